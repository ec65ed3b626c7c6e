"""`evaluate`, `predict` and `features`: reuse a training run's model, config and class names."""

import dataclasses
import difflib
import re
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torchvision.models.feature_extraction import create_feature_extractor, get_graph_node_names

{% if cookiecutter.use_amp %}
from .amp import resolve_precision
{% endif %}
from .config import TrainConfig, load_config_file
from .data import build_data, build_transform
from .engine import evaluate
from .errors import DataError, ModelError
from .files import replacing
from .metrics import write_reports
from .models import build_model, load_weights
from .plots import plot_run


def load_run(weights: str, device: torch.device, **overrides) -> tuple[TrainConfig, list[str], torch.nn.Module]:
    """The config and class names saved beside `weights` by `train`, and the model with those weights."""
    run_dir = Path(weights).parent
    if not (run_dir / "config.yaml").is_file() or not (run_dir / "classes.txt").is_file():
        raise ModelError(f"{run_dir} lacks config.yaml or classes.txt; pass weights from a training output dir")
    cfg = dataclasses.replace(TrainConfig(**load_config_file(run_dir / "config.yaml")), **overrides)
    classes = (run_dir / "classes.txt").read_text().split()
    model = build_model(cfg.model, len(classes))
    load_weights(model, weights)
    return cfg, classes, model.to(device).eval()


def default_evaluation_dir(weights: str, data: str) -> Path:
    """eval-<weights>-<data>/ beside the weights: the training run's own reports stay as training left them."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(data).name or data)
    return Path(weights).parent / f"eval-{Path(weights).stem}-{name}"


def evaluate_run(weights: str, device: torch.device, output_dir: str | None = None, **overrides) -> dict:
    cfg, classes, model = load_run(weights, device, **overrides)
    data = build_data(cfg, device, train=False)
    if data.classes != classes:
        raise DataError(f"{cfg.data} has classes {data.classes}, the model was trained on {classes}")
{% if cookiecutter.use_amp %}
    precision = resolve_precision(cfg.precision, device)  # saved for the training device: fp16 has no CPU autocast
    stats = evaluate(model, data.val, device, len(classes), precision=precision)
{% else %}
    stats = evaluate(model, data.val, device, len(classes))
{% endif %}
    out = Path(output_dir or default_evaluation_dir(weights, cfg.data))
    out.mkdir(parents=True, exist_ok=True)
    write_reports(out, stats["confusion"], classes)
    plot_run(out)
    print(f"accuracy {stats['val_acc']:.4f} on {int(stats['confusion'].sum())} images; report: {out / 'per_class.csv'}")
    return stats


@torch.inference_mode()
def predict(weights: str, images: list[str], device: torch.device) -> list[tuple[str, str, float]]:
    cfg, classes, model = load_run(weights, device)
    transform = build_transform(cfg.data, cfg.image_size, cfg.mean, cfg.std, train=False)
    results = []
    for path in images:
        try:
            with Image.open(path) as image:
                batch = transform(image.convert("RGB")).unsqueeze(0).to(device)  # a batch of one (T09)
        except (OSError, UnidentifiedImageError) as exc:
            raise DataError(f"cannot read image {path}: {exc}") from None
        probabilities = model(batch).softmax(1)[0]
        index = int(probabilities.argmax())
        results.append((path, classes[index], float(probabilities[index])))
        print(f"{path}\t{classes[index]}\t{probabilities[index]:.4f}")
    return results


@torch.inference_mode()
def extract_features(weights: str, layer: str, device: torch.device, output: str | None = None, **overrides) -> Path:
    """The output of one layer for every validation image (T26), as <output>.npy, labels as <output>_labels.npy."""
    cfg, classes, model = load_run(weights, device, **overrides)
    layers = get_graph_node_names(model)[1]
    if layer not in layers:
        close = difflib.get_close_matches(layer, layers, n=3) or layers[-3:]
        raise ModelError(f"{cfg.model} has no layer {layer!r}; close names: {', '.join(close)}")
    extractor = create_feature_extractor(model, return_nodes={layer: "features"})
    data = build_data(cfg, device, train=False)
    features, labels = [], []
    for images, targets in data.val:
        features.append(extractor(images.to(device))["features"].cpu())
        labels.append(targets)
    out = Path(output or Path(weights).parent / f"features_{layer}.npy").with_suffix(".npy")
    for path, array in ((out, torch.cat(features)), (out.with_name(out.stem + "_labels.npy"), torch.cat(labels))):
        with replacing(path) as file:
            np.save(file, array.numpy())
    print(f"{out}: {tuple(torch.cat(features).shape)} features of {layer!r}; labels in {out.stem}_labels.npy")
    return out
