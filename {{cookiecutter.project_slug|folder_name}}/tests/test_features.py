import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.models.feature_extraction import get_graph_node_names

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.data.loaders import build_data
from {{ cookiecutter.package_name }}.serving.inference import load_run
from {{ cookiecutter.package_name }}.training.train import train


def test_features_of_the_last_layer_are_the_model_outputs(tiny_config, tmp_path, capsys):
    train(tiny_config)
    weights = tmp_path / "run" / "model.pt"
    cfg, classes, model = load_run(str(weights), torch.device("cpu"))
    head = get_graph_node_names(model)[1][-1]  # the last layer: fc, classifier.3, ...
    out = tmp_path / "head.npy"
    assert main(["features", "--weights", str(weights), "--layer", head, "--output", str(out), "--device", "cpu"]) == 0
    features, labels = np.load(out), np.load(tmp_path / "head_labels.npy")
    data = build_data(cfg, torch.device("cpu"), train=False)
    assert features.shape == (len(data.val.dataset), len(classes))
    assert labels.shape == (len(data.val.dataset),{{ " len(classes)" if cookiecutter.task == "multi_label" }})  # {{ "multi-hot rows" if cookiecutter.task == "multi_label" else "class indices" }}
    images, targets = next(iter(data.val))
    with torch.inference_mode():
        logits = model(images)
    assert np.allclose(features[: len(images)], logits.numpy(), atol=1e-5)
    assert (labels[: len(targets)] == targets.numpy()).all()

    assert main(["features", "--weights", str(weights), "--layer", head + "x", "--device", "cpu"]) == 4
    assert f"the closest names: {head}" in capsys.readouterr().err


@pytest.mark.parametrize(("model", "block", "wrong", "closest"), [("resnet18", "layer3", "layer5", "layer4")])
def test_features_of_a_block_and_suggestions_by_closeness(tiny_config, tmp_path, capsys, model, block, wrong, closest):
    """Blocks work, not only single operations; a wrong name gets the closest module names first."""
    train(replace(tiny_config, model=model, max_steps_per_epoch=1))
    weights = str(tmp_path / "run" / "model.pt")
    out = tmp_path / "block.npy"
    assert main(["features", "--weights", weights, "--layer", block, "--output", str(out), "--device", "cpu"]) == 0
    assert np.load(out).shape == (512, 256, 2, 2)  # layer3 of resnet18 at 32 px: 256 channels at 1/16 the size
    assert main(["features", "--weights", weights, "--layer", wrong, "--device", "cpu"]) == 4
    assert f"{model} has no layer {wrong!r}; the closest names: {closest}, " in capsys.readouterr().err


def test_features_output_must_name_a_npy_file_and_a_bare_name_gets_the_suffix(tiny_config, tmp_path, capsys):
    """A folder or another suffix is refused before any work, and nothing is written beside it; without a suffix
    the file gets .npy, and the last line says so."""
    train(replace(tiny_config, model="small_cnn"))  # whatever the default: the layer fc below is its
    capsys.readouterr()
    command = ["features", "--weights", str(tmp_path / "run" / "model.pt"), "--layer", "fc", "--device", "cpu"]
    (tmp_path / "out").mkdir()
    refused = {
        str(tmp_path / "out"): "is a folder; give a file name such as features.npy",
        str(tmp_path / "new") + "/": "is a folder; give a file name such as features.npy",
        "/": "is a folder; give a file name such as features.npy",
        str(tmp_path / "x.txt"): "is not a .npy file name; give one such as x.npy",
    }
    for output, wrong in refused.items():
        before = sorted(tmp_path.rglob("*"))
        assert main([*command, "--output", output]) == 2, output
        assert capsys.readouterr().err == f"error: --output {output} {wrong}\n"
        assert sorted(tmp_path.rglob("*")) == before, output
    assert main([*command, "--output", str(tmp_path / "out" / "bare")]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'out' / 'bare.npy'}: ")
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["bare.npy", "bare_labels.npy"]


@pytest.mark.slow
def test_a_full_disk_while_saving_features_is_one_line_and_leaves_no_file(tiny_config, tmp_path):
    """A file-size limit stands in for a full disk: np.save straight into a file wrote through C and missed it."""
    train(replace(tiny_config, model="small_cnn"))  # whatever the default: the layer fc below is its
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "features", "--device", "cpu"]
    command += ["--layer", "fc", "--weights", str(tmp_path / "run" / "model.pt"), "--output", str(tmp_path / "f.npy")]
    resource = pytest.importorskip("resource")  # POSIX only, as is the file-size limit
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))  # noqa: E731
    done = subprocess.run(command, env=env, preexec_fn=limit, capture_output=True, text=True)
    assert done.returncode == 5, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"error: cannot write {tmp_path / 'f.npy'} (File too large)")
    assert not list(tmp_path.glob("*f.npy*")) and not list(tmp_path.glob(".*.tmp"))
