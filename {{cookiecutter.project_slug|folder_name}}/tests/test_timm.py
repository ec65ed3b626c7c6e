"""`--model timm/<name>`: timm's classifiers train and serve like the others. Small timm models, no downloads."""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from {{ cookiecutter.package_name }} import models
from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.errors import ModelError
from {{ cookiecutter.package_name }}.models import build_model, checkpoint_activations
from {{ cookiecutter.package_name }}.serving.inference import evaluate_run, extract_features, predict
from {{ cookiecutter.package_name }}.training.train import resolve, train

CPU = torch.device("cpu")
TINY = "timm/test_resnet"  # timm's own test model: a ResNet of 0.4 M parameters


def test_a_timm_model_trains_with_this_renders_tricks_and_serves_every_command(tiny_config, tmp_path, capsys):
    cfg = replace(
        tiny_config,
        model=TINY,
{% if cookiecutter.use_freezing %}
        freeze=["layer1"],  # timm's module names
{% endif %}
{% if cookiecutter.use_layerwise_lr %}
        lr_mult=["fc=10"],
{% endif %}
    )
    result = train(cfg)
    row, weights = result["metrics"][0], result["weights"]
    assert "timm." in type(result["model"]).__module__ and np.isfinite(row["train_loss"])
{% if cookiecutter.use_freezing %}
    assert "frozen parameters:" in capsys.readouterr().out
    assert not any(p.requires_grad for name, p in result["model"].named_parameters() if name.startswith("layer1."))
{% endif %}
{% if cookiecutter.use_layerwise_lr %}
    assert row["lr[fc]"] == pytest.approx(10 * row["lr"])
{% endif %}
{% if cookiecutter.use_ema %}
    assert (weights.parent / "ema.pt").is_file()
{% endif %}
{% if cookiecutter.use_checkpointing %}
    assert train(replace(cfg, epochs=2, resume="auto"))["metrics"][1]["epoch"] == 2  # resumed from its checkpoint
    assert "resumed from" in capsys.readouterr().out
{% endif %}
    assert 0 <= evaluate_run(str(weights), CPU)["val_acc"] <= 1
    image = tmp_path / "one.png"
    Image.new("RGB", (40, 30), (90, 160, 20)).save(image)
    assert len(predict(str(weights), [str(image)], CPU, str(tmp_path / "p.csv"))) == 1
    features = np.load(extract_features(str(weights), "layer4", CPU, str(tmp_path / "f.npy")))
    assert features.ndim == 4 and len(features) == len(np.load(tmp_path / "f_labels.npy"))  # maps of every image


def test_features_of_a_model_torch_fx_cannot_trace_come_from_its_modules(tiny_config, tmp_path):
    weights = train(replace(tiny_config, model="timm/test_vit"))["weights"]  # its position embedding defeats torch.fx
    features = np.load(extract_features(str(weights), "blocks.0", CPU, str(tmp_path / "f.npy")))
    assert features.ndim == 3 and len(features) == len(np.load(tmp_path / "f_labels.npy"))  # tokens of every image
    with pytest.raises(ModelError, match="has no layer 'blokcs.0'; the closest names: blocks.0"):
        extract_features(str(weights), "blokcs.0", CPU)


def test_pretrained_timm_weights_bring_their_own_normalisation_and_image_size(tmp_path):
    cfg = resolve(TrainConfig(model="timm/test_resnet.r160_in1k", pretrained=True, output_dir=str(tmp_path)))
    assert (cfg.mean, cfg.std, cfg.image_size) == ([0.5] * 3, [0.5] * 3, 160)  # timm's config, not ImageNet's
    own = resolve(TrainConfig(model="timm/test_resnet.r160_in1k", pretrained=True, image_size=64, output_dir="x"))
    assert own.image_size == 64


def test_without_timm_one_line_names_the_extra_to_install(tiny_config, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "timm", None)  # as if not installed
    with pytest.raises(ModelError, match=r'timm models need the timm package: pip install -e "\.\[timm\]"'):
        build_model(TINY, 3)
    assert main(["train", "--model", TINY, "--epochs", "1", "--output-dir", tiny_config.output_dir]) == 4
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: timm models need the timm package")


def test_an_unknown_timm_model_or_tag_gets_one_line():
    with pytest.raises(ModelError, match="timm has no model 'test_resnt'; did you mean timm/test_resnet"):
        build_model("timm/test_resnt", 3)
    with pytest.raises(ModelError, match="timm cannot build test_resnet.r160_in1 "):
        build_model("timm/test_resnet.r160_in1", 3)


def test_a_timm_model_that_classifies_with_a_convolution_builds():
    model = build_model("timm/dla46_c", 3)  # no Linear layer to start near zero
    assert model.eval()(torch.randn(1, 3, 32, 32)).shape == (1, 3)


@pytest.mark.slow
def test_pretrained_timm_weights_offline_are_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(models.__file__).parents[1]), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "train", "--pretrained"]
    command += ["--model", "timm/test_resnet.r160_in1k", "--epochs", "1", "--output-dir", str(tmp_path / "run")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4 and "Traceback" not in done.stderr, done.stderr
    assert "error: could not download timm's pretrained weights for test_resnet.r160_in1k" in done.stderr


def test_activation_checkpointing_uses_timms_own_and_computes_the_same(capsys):
    torch.manual_seed(0)
    plain = build_model(TINY, 3)
    recomputed = build_model(TINY, 3)
    recomputed.load_state_dict(plain.state_dict())
    checkpoint_activations(recomputed)
    assert recomputed.grad_checkpointing and "recompute their activations" in capsys.readouterr().err
    images = torch.randn(4, 3, 32, 32)
    for model in (plain, recomputed):
        model.train()(images).square().sum().backward()
    for a, b in zip(plain.parameters(), recomputed.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad)
{% if cookiecutter.use_sync_bn %}


def test_sync_bn_keeps_the_activation_of_timms_batchnorm(monkeypatch):
    """timm's BatchNormAct2d applies an activation after normalising: converted as a plain BatchNorm, the activation
    is kept as a child but never called."""
    import copy

    from {{ cookiecutter.package_name }}.tricks import sync_bn

    monkeypatch.setattr(sync_bn, "is_distributed_cuda", lambda device: True)
    model = build_model("timm/test_efficientnet", 3).eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = model(images)
        converted = sync_bn.convert_sync_bn(copy.deepcopy(model), CPU).eval()
        assert any(isinstance(module, torch.nn.SyncBatchNorm) for module in converted.modules())
        torch.testing.assert_close(converted(images), expected)  # in eval, SyncBatchNorm is BatchNorm
{% endif %}
