from dataclasses import replace

import pytest
import torch
from conftest import CRITERION, NEUTRAL, plain_runtime, random_targets
from torch import nn

from {{ cookiecutter.package_name }}.reports.metrics import MONITOR
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.engine import train_one_epoch
from {{ cookiecutter.package_name }}.training.train import train


def no_batchnorm_model(name, classes, *rest):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, classes)
    )


@pytest.fixture
def exact_setup(monkeypatch, tiny_config):
    """No random augmentation, optional trick (bf16 rounds differently for different batch sizes) or BatchNorm:
    splitting a batch changes no sums.{{ ' Clipping stays on: a group is clipped once, on its mean gradient.' if cookiecutter.use_grad_clipping else '' }}"""
    monkeypatch.setattr(train_module, "build_model", no_batchnorm_model)
{% if cookiecutter.use_grad_clipping %}
    return replace(tiny_config, augment="none", hflip=False, **(NEUTRAL | {"clip_grad_norm": 0.5}))
{% else %}
    return replace(tiny_config, augment="none", hflip=False, **NEUTRAL)
{% endif %}


def test_accumulating_k_batches_of_b_equals_one_batch_of_kb(exact_setup, tmp_path):
    big = train(replace(exact_setup, batch_size=32, max_steps_per_epoch=2, output_dir=str(tmp_path / "big")))
    small = replace(exact_setup, batch_size=8, accumulate_steps=4, max_steps_per_epoch=8)
    accumulated = train(replace(small, output_dir=str(tmp_path / "accumulated")))
    pairs = zip(big["model"].parameters(), accumulated["model"].parameters(), strict=True)
    assert max((a - b).abs().max().item() for a, b in pairs) < 1e-5
    assert big["metrics"][0]["train_loss"] == pytest.approx(accumulated["metrics"][0]["train_loss"], rel=1e-5)


def test_an_incomplete_last_group_steps_on_its_own_mean_gradient():
    # 3 batches in groups of 2: one update on the mean gradient of batches 1-2, then one on batch 3 alone
    torch.manual_seed(0)
    batches = [(torch.randn(8, 3, 8, 8), random_targets(8, 10)) for _ in range(3)]
    accumulated = no_batchnorm_model("", 10)
    initial = {key: value.clone() for key, value in accumulated.state_dict().items()}
    criterion, device = CRITERION(), torch.device("cpu")
    optimizer = torch.optim.SGD(accumulated.parameters(), lr=0.5)
    train_one_epoch(accumulated, batches, criterion, optimizer, plain_runtime(device), accumulate_steps=2)

    def distance_to_steps_by_hand(last_batch_weight: float) -> float:
        model = no_batchnorm_model("", 10)
        model.load_state_dict(initial)
        reference = torch.optim.SGD(model.parameters(), lr=0.5)
        first_two = torch.cat([batches[0][0], batches[1][0]]), torch.cat([batches[0][1], batches[1][1]])
        for images, targets, weight in (*first_two, 1.0), (*batches[2], last_batch_weight):
            reference.zero_grad()
            (criterion(model(images), targets) * weight).backward()
            reference.step()
        pairs = zip(accumulated.parameters(), model.parameters(), strict=True)
        return max((a - b).abs().max().item() for a, b in pairs)

    assert distance_to_steps_by_hand(1.0) < 1e-6
    assert distance_to_steps_by_hand(0.5) > 1e-3  # as if divided by the full group size: the test would notice


def test_channels_last_trains_in_that_layout_to_the_same_result(tiny_config, tmp_path):
{% if cookiecutter.use_amp %}
    tiny_config = replace(tiny_config, precision="fp32")  # compare the layouts, not rounding modes
{% endif %}
    last = train(replace(tiny_config, channels_last=True))
    plain = train(replace(tiny_config, output_dir=str(tmp_path / "plain")))
    convolutions = [p for p in last["model"].parameters() if p.dim() == 4 and p.shape[-1] > 1]
    assert convolutions and all(p.is_contiguous(memory_format=torch.channels_last) for p in convolutions)
    pairs = zip(last["model"].parameters(), plain["model"].parameters(), strict=True)
    for a, b in pairs:  # the same maths in another summation order
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)


def test_patience_stops_when_validation_accuracy_stalls(tiny_config, capsys, monkeypatch):
    accuracies = iter([0.5, 0.6, 0.6, 0.55, 0.9, 0.9])  # best at epoch 2; a tie is no improvement
    evaluate = train_module.evaluate

    def scripted(*args, **kwargs):
        return evaluate(*args, **kwargs) | {MONITOR: next(accuracies)}

    monkeypatch.setattr(train_module, "evaluate", scripted)
    tiny_config = replace(tiny_config, **NEUTRAL)  # one evaluation per epoch (no EMA's)
    result = train(replace(tiny_config, epochs=6, patience=2))
    assert [row["epoch"] for row in result["metrics"]] == [1, 2, 3, 4]
    assert f"early stop: {MONITOR} has not improved for 2 epochs since epoch 2" in capsys.readouterr().out


@pytest.mark.slow
def test_compile_trains_like_eager_and_saves_plain_weights(exact_setup, tmp_path):
    from torch._dynamo.utils import counters

    counters.clear()
    compiled = train(replace(exact_setup, compile=True))
    assert counters["stats"]["unique_graphs"] >= 1  # dynamo really traced the model: the flag was not ignored
    eager = train(replace(exact_setup, output_dir=str(tmp_path / "eager")))
    saved = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert not any(key.startswith("_orig_mod.") for key in saved)
    pairs = zip(compiled["model"].parameters(), eager["model"].parameters(), strict=True)
    assert max((a - b).abs().max().item() for a, b in pairs) < 1e-4
