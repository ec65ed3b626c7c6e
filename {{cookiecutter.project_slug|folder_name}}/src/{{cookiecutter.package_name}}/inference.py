"""`evaluate`, `predict` and `features`: reuse a training run's model, config, class names and split."""

import csv
import dataclasses
import difflib
import re
import sys
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
from .errors import DataError, ModelError, UserError
from .files import replacing
from .layouts import is_image
from .metrics import write_reports
from .models import build_model, load_weights
from .plots import plot_run


def load_run(weights: str, device: torch.device, **overrides) -> tuple[TrainConfig, list[str], torch.nn.Module]:
    """The config and class names saved beside `weights` by `train`, and the model with those weights. On the data it
    was trained on, a run that held images out validates on the same ones (its split.csv)."""
    run_dir = Path(weights).parent
    if not (run_dir / "config.yaml").is_file() or not (run_dir / "classes.txt").is_file():
        raise ModelError(f"{run_dir} lacks config.yaml or classes.txt; pass weights from a training output dir")
    cfg = TrainConfig(**load_config_file(run_dir / "config.yaml"))
    if Path(overrides.get("data", cfg.data)).absolute() != Path(cfg.data).absolute():
        overrides["split"] = None  # other data: its own val/ or split column, or all of its images
    elif (run_dir / "split.csv").is_file():
        overrides["split"] = str(run_dir / "split.csv")
    cfg = dataclasses.replace(cfg, **overrides)
    classes = (run_dir / "classes.txt").read_text().split()
    model = build_model(cfg.model, len(classes))
    load_weights(model, weights)
    return cfg, classes, model.to(device).eval()


def default_evaluation_dir(weights: str, data: str) -> Path:
    """eval-<weights>-<data>/ beside the weights: the training run's own reports stay as training left them."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(data).name or data)
    return Path(weights).parent / f"eval-{Path(weights).stem}-{name}"


class FlipAveraged(torch.nn.Module):
    """Test-time augmentation: the softmax averaged over each image and its mirror image, returned as log-probabilities
    (what cross-entropy and argmax read just like logits)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return ((self.model(images).softmax(1) + self.model(images.flip(-1)).softmax(1)) / 2).log()


def _with_tta(model: torch.nn.Module, cfg: TrainConfig) -> torch.nn.Module:
    if not cfg.hflip:
        raise UserError("--tta averages over mirror images, but this run was trained with --no-hflip: drop --tta")
    return FlipAveraged(model)


def evaluate_run(
    weights: str, device: torch.device, output_dir: str | None = None, tta: bool = False, **overrides
) -> dict:
    cfg, classes, model = load_run(weights, device, **overrides)
    model = _with_tta(model, cfg) if tta else model
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


def image_files(paths: list[str]) -> list[Path]:
    """Files as given, and the images in folders (recursively, in sorted order)."""
    found = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += [file for file in sorted(path.rglob("*")) if is_image(file)]
        elif path.is_file():
            found.append(path)
        else:
            raise DataError(f"{name}: no such file or folder")
    if not found:
        raise DataError(f"no images in {', '.join(paths)}")
    return found


@torch.inference_mode()
def predict(
    weights: str,
    images: list[str],
    device: torch.device,
    output: str = "predictions.csv",
    top_k: int = 1,
    tta: bool = False,
) -> list[dict]:
    """The top-k classes and probabilities of each image, printed and written to `output`; files that cannot be
    read as images are listed and counted, not fatal."""
    cfg, classes, model = load_run(weights, device)
    model = _with_tta(model, cfg) if tta else model
    if not 1 <= top_k <= len(classes):
        raise UserError(f"--top-k must be between 1 and the {len(classes)} classes, got {top_k}")
    transform = build_transform(cfg.data, cfg.image_size, cfg.mean, cfg.std)
    rows, unreadable = [], []
    for path in image_files(images):
        try:
            with Image.open(path) as image:
                batch = transform(image.convert("RGB")).unsqueeze(0).to(device)  # a batch of one (T09)
        except (OSError, UnidentifiedImageError) as exc:
            unreadable.append(path)
            print(f"skipped {path}: not readable as an image ({exc.__class__.__name__})", file=sys.stderr)
            continue
        probabilities, indices = model(batch).softmax(1)[0].topk(top_k)
        row = {"path": str(path)}
        for rank, (index, probability) in enumerate(zip(indices.tolist(), probabilities.tolist(), strict=True), 1):
            row |= {f"class_{rank}": classes[index], f"probability_{rank}": round(probability, 6)}
        rows.append(row)
        print("\t".join(f"{value:.4f}" if isinstance(value, float) else value for value in row.values()))
    if not rows:
        raise DataError(f"none of the {len(unreadable)} file(s) is a readable image; nothing was predicted")
    with replacing(Path(output), "w") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    skipped = f"; {len(unreadable)} unreadable file(s) skipped" if unreadable else ""
    print(f"{len(rows)} predictions written to {output}{skipped}", file=sys.stderr)  # stdout: the predictions alone
    return rows


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
