{% if cookiecutter.use_mixup %}
import itertools
from dataclasses import replace

import pytest
import torch
from conftest import NEUTRAL, plain_runtime
from torch import nn
from torchvision.transforms import v2

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.errors import UserError
from {{ cookiecutter.package_name }}.data.loaders import build_data
from {{ cookiecutter.package_name }}.training.engine import train_one_epoch
from {{ cookiecutter.package_name }}.training.train import resolve, train
from {{ cookiecutter.package_name }}.tricks import mixup
from {{ cookiecutter.package_name }}.tricks.mixup import Mix, build_mix


class FixedBeta:
    """Stands in for the Beta distribution torchvision samples lambda from."""

    def __init__(self, lam: float):
        self.lam = lam

    def sample(self, shape=()):
        return torch.full(shape or (1,), self.lam)


def fixed_mixup(lam: float, num_classes: int) -> v2.MixUp:
    mix = build_mix(TrainConfig(mixup_alpha=0.2, cutmix_alpha=0.0), num_classes)
    assert isinstance(mix, v2.MixUp)
    mix._dist = FixedBeta(lam)
    return mix


@pytest.mark.parametrize("batch", [4, 5, 1])  # odd and single-image last batches too
def test_mixed_images_and_loss_equal_the_reference(batch):
    torch.manual_seed(0)
{% if cookiecutter.task == "multi_label" %}
    images, targets, lam = torch.rand(batch, 3, 8, 8), torch.randint(0, 2, (batch, 3)).float(), 0.7
    mixed, soft = fixed_mixup(lam, 3)(images, targets)
    partner = images.roll(1, 0), targets.roll(1, 0)
    assert torch.allclose(mixed, lam * images + (1 - lam) * partner[0])
    assert torch.allclose(soft, lam * targets + (1 - lam) * partner[1])  # each label mixed on its own
    logits = torch.randn(batch, 3)
    expected = -(soft * logits.sigmoid().log() + (1 - soft) * (-logits).sigmoid().log()).mean()
    assert torch.allclose(nn.BCEWithLogitsLoss()(logits, soft), expected)
{% else %}
    images, targets, lam = torch.rand(batch, 3, 8, 8), torch.randint(0, 3, (batch,)), 0.7
    mixed, soft = fixed_mixup(lam, 3)(images, targets)
    partner = images.roll(1, 0), targets.roll(1, 0)
    assert torch.allclose(mixed, lam * images + (1 - lam) * partner[0])
    one_hot = nn.functional.one_hot
    assert torch.allclose(soft, lam * one_hot(targets, 3) + (1 - lam) * one_hot(partner[1], 3))
    logits = torch.randn(batch, 3)
    expected = -(soft * logits.log_softmax(1)).sum(1).mean()
    assert torch.allclose(nn.CrossEntropyLoss()(logits, soft), expected)
{% endif %}


def test_no_mix_when_both_alphas_are_zero_and_a_choice_when_both_are_set():
    assert build_mix(TrainConfig(mixup_alpha=0.0, cutmix_alpha=0.0), 3) is None
    both = build_mix(TrainConfig(mixup_alpha=0.2, cutmix_alpha=1.0, cutmix_prob=0.25), 3)
    assert isinstance(both, v2.RandomChoice) and both.p == [0.75, 0.25]


{% if cookiecutter.use_label_smoothing %}
def test_label_smoothing_is_applied_exactly_once_on_mixed_targets():
    torch.manual_seed(0)
{% if cookiecutter.task == "multi_label" %}
    from {{ cookiecutter.package_name }}.tricks import label_smoothing

    targets = torch.tensor([[1.0, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 0]])
    images, lam, eps = torch.rand(4, 3, 8, 8), 0.6, 0.1
    _, soft = fixed_mixup(lam, 3)(images, targets)
    assert torch.allclose(soft, lam * targets + (1 - lam) * targets.roll(1, 0))  # unsmoothed on the way out
    logits = torch.randn(4, 3)
    once = soft * (1 - eps) + eps / 2
    criterion = label_smoothing.build(TrainConfig(label_smoothing=eps), 3).criterion(nn.BCEWithLogitsLoss())
    assert torch.allclose(criterion(logits, soft), nn.functional.binary_cross_entropy_with_logits(logits, once))
{% else %}
    images, targets, lam, eps = torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 2, 1]), 0.6, 0.1
    _, soft = fixed_mixup(lam, 3)(images, targets)
    assert torch.allclose(soft.sum(1), torch.ones(4)) and soft.min() == 0  # unsmoothed on the way out
    logits = torch.randn(4, 3)
    once = soft * (1 - eps) + eps / 3
    expected = -(once * logits.log_softmax(1)).sum(1).mean()
    assert torch.allclose(nn.CrossEntropyLoss(label_smoothing=eps)(logits, soft), expected)
{% endif %}


{% endif %}
def test_the_model_trains_on_the_mixed_batches_against_their_soft_labels(tiny_config, watch, monkeypatch):
    lam = 0.7
    monkeypatch.setattr(mixup, "build_mix", lambda cfg, num_classes: fixed_mixup(lam, num_classes))
    cfg = replace(tiny_config, **(NEUTRAL | {"mixup_alpha": 0.2}))
    rows = train(cfg)["metrics"]
    assert len(watch.inputs) == len(watch.batches) == 2
    for (images, _), received in zip(watch.batches, watch.inputs, strict=True):
        torch.testing.assert_close(received, lam * images + (1 - lam) * images.roll(1, 0))
    # the loss the loop logs is taken against the mixed soft labels
    losses = []
    for (_, targets), logits in zip(watch.batches, watch.logits, strict=True):
{% if cookiecutter.task == "multi_label" %}
        soft = lam * targets + (1 - lam) * targets.roll(1, 0)
        losses.append(nn.functional.binary_cross_entropy_with_logits(logits, soft).item() * len(targets))
{% else %}
        soft = lam * nn.functional.one_hot(targets, 10) + (1 - lam) * nn.functional.one_hot(targets.roll(1, 0), 10)
        losses.append(nn.functional.cross_entropy(logits, soft.float()).item() * len(targets))
{% endif %}
    assert rows[0]["train_loss"] == pytest.approx(sum(losses) / sum(len(t) for _, t in watch.batches), rel=1e-5)
{% if cookiecutter.task == "multi_label" %}


def test_train_acc_counts_the_labels_with_at_least_half_a_share_of_each_mixed_image(tiny_config):
    """An even mix (lam 0.5) of an image with the one before it: its labels are those of either."""
    halves = fixed_mixup(0.5, 3)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3))
    with torch.no_grad():
        model[1].weight.zero_()
        model[1].bias.copy_(torch.tensor([5.0, -5.0, -5.0]))  # always predicts class 0 alone
    targets = torch.tensor([[1.0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])  # mixed: class 0 for the first two
    batches = [(torch.rand(4, 3, 8, 8), targets)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    cpu, mix = torch.device("cpu"), [Mix(halves)]
    stats = train_one_epoch(model, batches, nn.BCEWithLogitsLoss(), optimizer, plain_runtime(cpu), tricks=mix)
    assert stats["train_acc"] == 0.5  # against the original labels it would be 0.25
{% else %}


def test_train_acc_counts_the_label_with_the_larger_share_of_each_mixed_image(tiny_config):
    def shifted(images, targets):  # 70 % of each image's label goes to the class before it
        one_hot = nn.functional.one_hot
        return images, (0.3 * one_hot(targets, 10) + 0.7 * one_hot((targets - 1) % 10, 10)).float()

    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
    with torch.no_grad():
        model[1].weight.zero_()
        model[1].bias.copy_(torch.arange(10, 0, -1.0))  # always predicts class 0
    batches = [(torch.rand(4, 3, 8, 8), torch.tensor([1, 1, 2, 3]))]  # the larger shares: 0, 0, 1, 2
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    cpu, mix = torch.device("cpu"), [Mix(shifted)]
    stats = train_one_epoch(model, batches, nn.CrossEntropyLoss(), optimizer, plain_runtime(cpu), tricks=mix)
    assert stats["train_acc"] == 0.5  # against the original labels it would be 0
{% endif %}


def test_mixup_training_validates_on_hard_labels(tiny_config):
    cfg = replace(tiny_config, batch_size=7, **(NEUTRAL | {"mixup_alpha": 0.4, "cutmix_alpha": 1.0}))
    result = train(cfg)
    model, row = result["model"].eval(), result["metrics"][0]
    val, loss_sum, correct, seen = build_data(resolve(cfg), torch.device("cpu")).val, 0.0, 0, 0
{% if cookiecutter.task == "multi_label" %}
    with torch.no_grad():  # plain binary cross-entropy on unmixed images and their labels, by hand
        for images, targets in itertools.islice(val, cfg.max_steps_per_epoch):
            logits = model(images)
            loss_sum += nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="sum").item()
            right = ((logits >= 0) == (targets == 1)).all(1)  # every label of the image
            correct, seen = correct + right.sum().item(), seen + targets.numel()
    seen_images = seen // targets.shape[1]
    assert row["val_loss"] == pytest.approx(loss_sum / seen, rel=1e-5) and row["val_acc"] == correct / seen_images
{% else %}
    with torch.no_grad():  # plain cross-entropy on unmixed images and hard labels, by hand
        for images, targets in itertools.islice(val, cfg.max_steps_per_epoch):
            logits = model(images)
            loss_sum += nn.functional.cross_entropy(logits, targets, reduction="sum").item()
            correct, seen = correct + (logits.argmax(1) == targets).sum().item(), seen + len(targets)
    assert row["val_loss"] == pytest.approx(loss_sum / seen, rel=1e-5) and row["val_acc"] == correct / seen
{% endif %}
    assert row["train_loss"] > 0  # the training loss, on mixed soft targets, is another figure


def test_the_cutmix_chance_is_a_probability_edges_included():
    assert [TrainConfig(cutmix_prob=p).cutmix_prob for p in (0.0, 1.0)] == [0.0, 1.0]
    for bad in (-0.1, 1.5):
        with pytest.raises(UserError) as raised:
            TrainConfig(cutmix_prob=bad)
        assert str(raised.value) == f"--cutmix-prob must be between 0 and 1, got {bad}"
{% endif %}
