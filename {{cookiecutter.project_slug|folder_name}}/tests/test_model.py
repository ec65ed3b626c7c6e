from collections import Counter
from dataclasses import replace
from urllib.error import URLError

import pytest
import torch
import torchvision
from conftest import NEUTRAL
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.errors import UserError
from {{ cookiecutter.package_name }}.models import (
    SmallCNN,
    build_model,
    checkpoint_activations,
    init_from,
    init_weights,
    load_weights,
    read_weights,
    weights_file,
)
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.train import train


def test_small_cnn_maps_images_to_logits():
    assert SmallCNN(7)(torch.zeros(2, 3, 32, 32)).shape == (2, 7)


@pytest.mark.parametrize("name", ["{{ cookiecutter.model | escaped }}", "resnet18", "mobilenet_v3_small"])
def test_any_model_gets_the_requested_number_of_classes(name):
    model = build_model(name, num_classes=5).eval()
    assert model(torch.zeros(1, 3, 32, 32)).shape == (1, 5)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "small_cnn",
        "resnet18",
        "mobilenet_v3_small",  # at chance before its BatchNorm momentum was raised for training from scratch
        "efficientnet_b0",  # at chance before its classifier started near zero
    ],
)
def test_each_prompted_model_learns_the_synthetic_set_from_scratch(tiny_config, name):
    cfg = replace(tiny_config, model=name, epochs=4, max_steps_per_epoch=20, batch_size=32)
    if name == "efficientnet_b0":  # as the README advises: AdamW 0.003 (SGD 0.05 stays near chance); it takes off
        cfg = replace(cfg, optimizer="adamw", lr=0.003, epochs=6)  # in epoch 4 or 5, to 0.43-0.57 after 6 (3 seeds)
    cfg = replace(cfg, **NEUTRAL)
{% if cookiecutter.task == "multi_label" %}
    assert train(cfg)["best_val_map"] >= 0.4  # a label is on 28 % of the images: a mAP near 0.28 is chance
{% else %}
    assert train(cfg)["best_val_acc"] >= 0.3  # 10 classes: chance is 0.1
{% endif %}


def test_small_cnn_is_for_small_images_as_its_readme_line_says():
    """At 128 px the built-in CNN costs about nine times mobilenet_v3_small (it keeps full resolution through its
    first block), which is why the README sends photos to a torchvision model."""

    def flops(name: str, size: int) -> int:
        with FlopCounterMode(display=False) as counter:
            build_model(name, 8).eval()(torch.zeros(1, 3, size, size))
        return counter.get_total_flops()

    assert flops("small_cnn", 32) < 25e6  # CIFAR-sized images: cheap
    assert flops("small_cnn", 128) > 5 * flops("mobilenet_v3_small", 128)


def test_unknown_model_names_suggest_close_ones():
    with pytest.raises(UserError, match="did you mean resnet18"):
        build_model("resnet19", 10)


def test_builtin_model_refuses_pretrained_weights():
    with pytest.raises(UserError, match="no pretrained weights"):
        build_model("small_cnn", 10, pretrained=True)


def test_init_schemes_reinitialise_every_conv_and_linear_layer():
    torch.manual_seed(0)
    model = SmallCNN(10)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    init_weights(model, "default")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    init_weights(model, "normal")
    layers = [m for m in model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    assert all(abs(m.weight.std().item() - 0.02) < 0.005 for m in layers)
    assert torch.count_nonzero(model.fc.bias) == 0


def test_weights_saved_by_a_wrapped_model_load_into_a_plain_one(tmp_path):
    source = SmallCNN(3)
    wrapped = {f"module._orig_mod.{k}": v for k, v in source.state_dict().items()}  # DDP around torch.compile
    torch.save(wrapped, tmp_path / "w.pt")
    assert set(read_weights(tmp_path / "w.pt")[0]) == set(source.state_dict())
    target = SmallCNN(3)
    load_weights(target, tmp_path / "w.pt")
    expected = source.state_dict()
    assert all(torch.equal(expected[k], v) for k, v in target.state_dict().items())


def test_weights_of_another_model_are_refused_with_the_mismatch(tmp_path):
    torch.save(SmallCNN(3).state_dict(), tmp_path / "w.pt")
    with pytest.raises(UserError, match="does not fit this model"):
        load_weights(SmallCNN(4), tmp_path / "w.pt")
    (tmp_path / "bad.pt").write_bytes(b"not a weights file")
    with pytest.raises(UserError, match="not a readable PyTorch weights file"):
        load_weights(SmallCNN(3), tmp_path / "bad.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(UserError, match=r"empty.pt is not a readable PyTorch weights file \(EOFError\)"):
        load_weights(SmallCNN(3), tmp_path / "empty.pt")
    torch.save(SmallCNN(3).state_dict(), tmp_path / "whole.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "whole.pt").read_bytes()[:5000])  # a copy cut short
    (tmp_path / "text.pt").write_text("hello")
    for name in ("cut.pt", "text.pt"):
        with pytest.raises(UserError, match=f"{name} is not a readable PyTorch weights file"):
            load_weights(SmallCNN(3), tmp_path / name)
    for content, kind in (([1, 2], "list"), (torch.zeros(2), "Tensor"), ({1: torch.zeros(1)}, "dict")):
        torch.save(content, tmp_path / "odd.pt")
        with pytest.raises(UserError, match=f"odd.pt holds no weights .a {kind}.; pass the model.pt"):
            load_weights(SmallCNN(3), tmp_path / "odd.pt")


def test_pretrained_weights_offline_are_one_clear_error(monkeypatch):
    def offline(*args, **kwargs):
        raise URLError("no network")

    monkeypatch.setattr(torchvision.models, "get_model", offline)
    with pytest.raises(UserError, match="could not download pretrained weights for resnet18"):
        build_model("resnet18", 10, pretrained=True)


def test_init_from_takes_every_tensor_that_fits_and_reports_the_head_it_leaves(tmp_path, capsys):
    """A 10-class model started from a 5-class file of the same architecture (saved by DDP)."""
    torch.manual_seed(1)
    source = build_model("resnet18", 5)
    torch.save({f"module.{k}": v for k, v in source.state_dict().items()}, tmp_path / "five.pt")
    torch.manual_seed(2)
    target = build_model("resnet18", 10)
    fresh_head = target.fc.weight.clone()
    init_from(target, str(tmp_path / "five.pt"), [str(label) for label in range(10)])
    expected = source.state_dict()
    backbone = {k: v for k, v in target.state_dict().items() if not k.startswith("fc.")}
    assert backbone and all(torch.equal(v, expected[k]) for k, v in backbone.items())  # bitwise the source's
    assert torch.equal(target.fc.weight, fresh_head)  # left as built
    err = capsys.readouterr().err
    assert f"loaded {len(backbone)} of this model's {len(backbone) + 2} tensors" in err
    assert "other shape (left as built): fc.weight, fc.bias" in err


def test_init_from_weights_of_as_many_other_classes_says_the_output_layer_was_theirs(tmp_path, capsys):
    source = SmallCNN(2)
    torch.save(weights_file(source, ["cat", "dog"]), tmp_path / "cats.pt")
    init_from(SmallCNN(2), str(tmp_path / "cats.pt"), ["cat", "dog"])
    assert "output layer" not in capsys.readouterr().err  # the same classes: nothing to say
    target = SmallCNN(2)
    init_from(target, str(tmp_path / "cats.pt"), ["car", "bus"])
    assert capsys.readouterr().err.splitlines()[-1] == "  its output layer was trained for other classes (cat, dog)"
    assert torch.equal(target.fc.weight, source.fc.weight)  # taken all the same: a start, not a fit


def test_init_from_a_file_of_another_model_is_one_error(tmp_path):
    torch.save(SmallCNN(3).state_dict(), tmp_path / "small.pt")
    with pytest.raises(UserError, match="no tensor matches this model by name and shape"):
        init_from(build_model("resnet18", 10), str(tmp_path / "small.pt"), [str(label) for label in range(10)])


def test_a_run_starts_from_another_runs_weights(tiny_config, tmp_path):
    first = train(replace(tiny_config, output_dir=str(tmp_path / "first")))["model"].state_dict()
    config = TrainConfig(**{**tiny_config.__dict__, "init_from": str(tmp_path / "first" / "model.pt"), "epochs": 1})
    started, check = {}, train_module.check_fits

    def weights_at_the_start(model, *args):  # check_fits runs right after init_from, before any step
        started.update({k: v.clone() for k, v in model.state_dict().items()})
        check(model, *args)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(train_module, "check_fits", weights_at_the_start)
        train(config)
    assert all(torch.equal(first[k], started[k]) for k in first)
    assert "init_from" not in (tmp_path / "run" / "config.yaml").read_text()  # how this one run started
{% if cookiecutter.use_checkpointing %}
    with pytest.raises(UserError, match="--init-from starts a new run from other weights, --resume continues"):
        replace(config, resume="auto")
{% endif %}


def saved_tensors_loss_and_gradients(model, images, targets) -> tuple[int, torch.Tensor, dict]:
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda tensor: saved.append(1) or tensor, lambda tensor: tensor):
        loss = nn.functional.cross_entropy(model(images), targets)
    loss.backward()
    return len(saved), loss.detach(), {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("name", ["small_cnn", "resnet18", "mobilenet_v3_small"])
def test_activation_checkpointing_keeps_loss_and_gradients_and_keeps_fewer_tensors(name, monkeypatch):
    """The same loss and gradients (deterministic CPU), fewer tensors saved for backward."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    generator = torch.Generator().manual_seed(0)
    images, targets = torch.randn(4, 3, 32, 32, generator=generator), torch.randint(0, 10, (4,), generator=generator)
    torch.use_deterministic_algorithms(True)
    try:
        runs = []
        for recompute in (False, True):
            torch.manual_seed(0)
            model = build_model(name, 10).train()
            if recompute:
                checkpoint_activations(model)
            runs.append(saved_tensors_loss_and_gradients(model, images, targets))
    finally:
        torch.use_deterministic_algorithms(False)
    (plain_saved, plain_loss, plain_grads), (saved, loss, grads) = runs
    assert saved < plain_saved / 2, (saved, plain_saved)
    assert torch.allclose(loss, plain_loss, rtol=1e-6, atol=1e-7)
    assert all(torch.allclose(grads[n], plain_grads[n], rtol=1e-5, atol=1e-7) for n in plain_grads)


@pytest.mark.parametrize("name", ["small_cnn", "resnet18", "mobilenet_v3_small"])
def test_activation_checkpointing_recomputes_every_stage(name):
    """Every convolution past the stem runs twice in a training step: in the forward, and again in backward."""
    model = build_model(name, 10).train()
    checkpoint_activations(model)
    calls = Counter()
    for conv, module in model.named_modules():
        if isinstance(module, nn.Conv2d):
            module.register_forward_hook(lambda *args, conv=conv: calls.update([conv]))
    nn.functional.cross_entropy(model(torch.randn(2, 3, 32, 32)), torch.tensor([0, 1])).backward()
    stem = {"conv1"} if name == "resnet18" else set()  # ResNet's first convolution belongs to no stage
    assert {conv for conv, count in calls.items() if count != 2} == stem and all(calls[conv] == 1 for conv in stem)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="peak GPU memory: the GPU lane")
def test_activation_checkpointing_lowers_peak_gpu_memory():
    """The activation memory a forward keeps for backward, measured on the GPU above a baseline of weights and
    gradients (allocated by a first step and kept): recomputing the stages keeps about half of it for ResNet-18 at
    128 px (its stem, which belongs to no stage, keeps the rest); a checkpointing that does nothing keeps all of it."""
    images, targets = torch.randn(32, 3, 128, 128, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
    kept, peaks = [], []
    for recompute in (False, True):
        model = build_model("resnet18", 10).cuda().train()
        if recompute:
            checkpoint_activations(model)
        nn.functional.cross_entropy(model(images), targets).backward()  # gradients allocated, cuDNN warmed up
        model.zero_grad(set_to_none=False)  # ... and kept in the baseline
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        loss = nn.functional.cross_entropy(model(images), targets)
        kept.append(torch.cuda.memory_allocated() - baseline)  # what the forward holds for backward
        loss.backward()
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() - baseline)  # the step's own peak, for the message
        del loss, model
    mib = {"kept after forward": [k / 2**20 for k in kept], "peak above baseline": [p / 2**20 for p in peaks]}
    assert kept[0] > 0 and kept[1] < 0.7 * kept[0], f"MiB without and with checkpointing: {mib}"


def test_activation_checkpointing_trains_and_refuses_a_model_without_stages(tiny_config, capsys):
    train(replace(tiny_config, model="small_cnn", activation_checkpointing=True))  # three conv blocks
    assert "activation checkpointing: 3 stages recompute their activations in backward" in capsys.readouterr().err
    with pytest.raises(UserError, match="--activation-checkpointing: Sequential has no stages it knows"):
        checkpoint_activations(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)))
