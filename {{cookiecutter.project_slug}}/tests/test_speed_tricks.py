from dataclasses import replace

import pytest
import torch
from torch import nn

from {{ cookiecutter.package_name }} import data
from {{ cookiecutter.package_name }} import train as train_module
from {{ cookiecutter.package_name }}.train import train


def no_batchnorm_model(name, classes, *rest):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, classes)
    )


@pytest.fixture
def exact_setup(monkeypatch, tiny_config):
    """No random augmentation, mixing, low precision or BatchNorm: splitting a batch changes no sums."""
    augmenting = data.build_transform
    monkeypatch.setattr(data, "build_transform", lambda *args, train: augmenting(*args, train=False))
    monkeypatch.setattr(train_module, "build_model", no_batchnorm_model)
    exact = {}
{% if cookiecutter.use_mixup %}
    exact |= {"mixup_alpha": 0.0, "cutmix_alpha": 0.0}
{% endif %}
{% if cookiecutter.use_amp %}
    exact |= {"precision": "fp32"}  # bf16 rounds differently for different batch sizes
{% endif %}
    return replace(tiny_config, **exact)


def test_accumulating_k_batches_of_b_equals_one_batch_of_kb(exact_setup, tmp_path):
    big = train(replace(exact_setup, batch_size=32, max_steps_per_epoch=2, output_dir=str(tmp_path / "big")))
    small = replace(exact_setup, batch_size=8, accumulate_steps=4, max_steps_per_epoch=8)
    accumulated = train(replace(small, output_dir=str(tmp_path / "accumulated")))
    pairs = zip(big["model"].parameters(), accumulated["model"].parameters(), strict=True)
    assert max((a - b).abs().max().item() for a, b in pairs) < 1e-5
    assert big["metrics"][0]["train_loss"] == pytest.approx(accumulated["metrics"][0]["train_loss"], rel=1e-5)


def test_an_incomplete_last_group_still_steps_on_its_mean_gradient(exact_setup, tmp_path):
    # 3 batches with groups of 2: one update from batches 1-2, one from batch 3 alone
    three = train(replace(exact_setup, batch_size=8, accumulate_steps=2, max_steps_per_epoch=3))
    assert all(torch.isfinite(p).all() for p in three["model"].parameters())


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
        return evaluate(*args, **kwargs) | {"val_acc": next(accuracies)}

    monkeypatch.setattr(train_module, "evaluate", scripted)
{% if cookiecutter.use_ema %}
    tiny_config = replace(tiny_config, ema_decay=0.0)  # one evaluation per epoch
{% endif %}
    result = train(replace(tiny_config, epochs=6, patience=2))
    assert [row["epoch"] for row in result["metrics"]] == [1, 2, 3, 4]
    assert "early stop: val_acc has not improved for 2 epochs since epoch 2" in capsys.readouterr().out


@pytest.mark.slow
def test_compile_trains_like_eager_and_saves_plain_weights(exact_setup, tmp_path):
    compiled = train(replace(exact_setup, compile=True))
    eager = train(replace(exact_setup, output_dir=str(tmp_path / "eager")))
    saved = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert not any(key.startswith("_orig_mod.") for key in saved)
    pairs = zip(compiled["model"].parameters(), eager["model"].parameters(), strict=True)
    assert max((a - b).abs().max().item() for a, b in pairs) < 1e-4
