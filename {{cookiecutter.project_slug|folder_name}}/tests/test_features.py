import numpy as np
import torch
from torchvision.models.feature_extraction import get_graph_node_names

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.data import build_data
from {{ cookiecutter.package_name }}.inference import load_run
from {{ cookiecutter.package_name }}.train import train


def test_features_of_the_last_layer_are_the_model_outputs(tiny_config, tmp_path, capsys):
    train(tiny_config)
    weights = tmp_path / "run" / "model.pt"
    cfg, classes, model = load_run(str(weights), torch.device("cpu"))
    head = get_graph_node_names(model)[1][-1]  # the last layer: fc, classifier.3, ...
    out = tmp_path / "head.npy"
    assert main(["features", "--weights", str(weights), "--layer", head, "--output", str(out), "--device", "cpu"]) == 0
    features, labels = np.load(out), np.load(tmp_path / "head_labels.npy")
    data = build_data(cfg, torch.device("cpu"), train=False)
    assert features.shape == (len(data.val.dataset), len(classes)) and labels.shape == (len(data.val.dataset),)
    images, targets = next(iter(data.val))
    with torch.inference_mode():
        logits = model(images)
    assert np.allclose(features[: len(images)], logits.numpy(), atol=1e-5)
    assert (labels[: len(targets)] == targets.numpy()).all()

    assert main(["features", "--weights", str(weights), "--layer", head + "x", "--device", "cpu"]) == 4
    assert f"close names: {head}" in capsys.readouterr().err
