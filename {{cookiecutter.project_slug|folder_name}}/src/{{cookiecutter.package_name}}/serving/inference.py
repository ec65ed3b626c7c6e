"""`evaluate`, `predict` and `features`: reuse a training run's model, config, class names and split."""

import dataclasses
import difflib
import hashlib
import io
import os
import re
{% if cookiecutter.use_checkpointing %}
import shlex
{% endif %}
import sys
from pathlib import Path

import numpy as np
import torch
from torchvision.models.feature_extraction import create_feature_extractor, get_graph_node_names

from ..config import {{ 'SCRIPT, ' if cookiecutter.use_checkpointing }}TrainConfig, load_config_file
from ..core.errors import DataError, ModelError, UserError
from ..core.files import own_folder, replacing
from ..data.loaders import build_data
from ..data.transforms import build_transform
from ..models import build_model, load_weights
{% if cookiecutter.task == "multi_label" %}
from ..reports.multi_label import fit_thresholds, multi_label_metrics, write_reports
{% else %}
from ..reports.metrics import write_reports
{% endif %}
from ..reports.plots import plot_run
from ..training.engine import Runtime, evaluate
from .predictions import predict_images
{% if cookiecutter.task == "multi_label" %}
from .thresholds import load_thresholds, save_thresholds
{% endif %}


def load_run(weights: str, device: torch.device, **overrides) -> tuple[TrainConfig, list[str], torch.nn.Module]:
    """The config and class names saved beside `weights` by `train`, and the model with those weights. On the data it
    was trained on, a run that held images out validates on the same ones (its split.csv)."""
    run_dir = Path(weights).parent
{% if cookiecutter.use_checkpointing %}
    if not Path(weights).exists() and (run_dir / "last.pt").is_file():  # model.pt is written last
        raise ModelError(
            f"{run_dir} holds an unfinished run (no {Path(weights).name} yet); pass its last.pt, "
            f"or finish it with: {SCRIPT} train --resume auto --output-dir {shlex.quote(str(run_dir))}"
        )
{% endif %}
    if not Path(weights).is_file():
        what = "is a folder" if Path(weights).is_dir() else "does not exist"
        raise ModelError(f"weights file {weights} {what}; pass the model.pt of a training run")
    if not (run_dir / "config.yaml").is_file() or not (run_dir / "classes.txt").is_file():
        raise ModelError(f"{run_dir} lacks config.yaml or classes.txt; pass weights from a training output dir")
    cfg = TrainConfig(**load_config_file(run_dir / "config.yaml"))
    if os.path.realpath(overrides.get("data", cfg.data)) != os.path.realpath(cfg.data):  # however it is spelled
        overrides["split"] = None  # other data: its own val/ or split column, or all of its images
    elif (run_dir / "split.csv").is_file():
        overrides["split"] = str(run_dir / "split.csv")
    cfg = dataclasses.replace(cfg, **overrides)
    listed = (run_dir / "classes.txt").read_text(encoding="utf-8").splitlines()  # one per line: names hold spaces
    model = build_model(cfg.model, len(listed))
    classes = load_weights(model, weights) or listed  # the weights' own, where they name them
    if classes != listed:
        print(f"warning: {weights} names other classes than the run's classes.txt; using the weights'", file=sys.stderr)
    return cfg, classes, model.to(device).eval()


def default_evaluation_dir(weights: str, data: str, tta: bool) -> Path:
    """eval-<weights>-<data>-<hash of the data's path>[-tta]/ beside the weights: each evaluation gets its own
    folder (a/test and b/test too), and the training run's own reports stay as training left them."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(data).name or data)
    where = hashlib.sha1(str(Path(data).absolute()).encode("utf-8", "surrogateescape")).hexdigest()[:6]
    return Path(weights).parent / f"eval-{Path(weights).stem}-{name}-{where}{'-tta' if tta else ''}"


class FlipAveraged(torch.nn.Module):
{% if cookiecutter.task == "multi_label" %}
    """Test-time augmentation: each class's probability averaged over each image and its mirror image, returned as
    logits (what the sigmoid, the loss and the thresholds read)."""
{% else %}
    """Test-time augmentation: the softmax averaged over each image and its mirror image, returned as log-probabilities
    (what cross-entropy and argmax read just like logits)."""
{% endif %}

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
{% if cookiecutter.task == "multi_label" %}
        return ((self.model(images).sigmoid() + self.model(images.flip(-1)).sigmoid()) / 2).logit()
{% else %}
        return ((self.model(images).softmax(1) + self.model(images.flip(-1)).softmax(1)) / 2).log()
{% endif %}


def _with_tta(model: torch.nn.Module, cfg: TrainConfig) -> torch.nn.Module:
    if not cfg.hflip:
        raise UserError("--tta averages over mirror images, but this run was trained with --no-hflip: drop --tta")
    return FlipAveraged(model)


{% if cookiecutter.task == "multi_label" %}
def evaluate_run(
    weights: str,
    device: torch.device,
    output_dir: str | None = None,
    tta: bool = False,
    fit: bool = False,
    **overrides,
) -> dict:
    """The multi-label figures of `weights` at its thresholds (model_thresholds.csv beside model.pt, else
    --threshold), or, with `fit`, at the per-class thresholds that maximise each class's F1 here, which are saved
    beside the weights for predict and export."""
{% else %}
def evaluate_run(
    weights: str, device: torch.device, output_dir: str | None = None, tta: bool = False, **overrides
) -> dict:
{% endif %}
    cfg, classes, model = load_run(weights, device, **overrides)
{% if cookiecutter.task == "multi_label" %}
    if fit and tta:  # predict and export use the thresholds on the model as it is, not on mirrored averages
        raise UserError("--fit-thresholds fits thresholds for predict and export, which run without --tta: drop one")
{% endif %}
    model = _with_tta(model, cfg) if tta else model
    data = build_data(cfg, device, train=False)
    if data.classes != classes:
        raise DataError(f"{cfg.data} has classes {data.classes}, the model was trained on {classes}")
    runtime = Runtime(device, cfg)
    runtime.settle(cfg)  # as trained, on this device (the training device's settings may not suit it)
{% if cookiecutter.task == "multi_label" %}
    thresholds = load_thresholds(weights, classes, cfg.threshold)
    stats = evaluate(model, data.val, runtime, len(classes), thresholds=thresholds)
    if fit:
        thresholds = fit_thresholds(stats["probabilities"], stats["targets"], default=cfg.threshold)
        figures = multi_label_metrics(stats["probabilities"], stats["targets"], thresholds)
        stats |= {"val_acc": figures.pop("exact_match")} | {f"val_{name}": value for name, value in figures.items()}
        print(f"thresholds that maximise each class's F1 here: {save_thresholds(weights, thresholds, classes)}")
    out = own_folder(output_dir or default_evaluation_dir(weights, cfg.data, tta), replace_link=not output_dir)
    write_reports(out, stats["probabilities"], stats["targets"], thresholds, classes)
    plot_run(out)
    said = f"mAP {stats['val_map']:.4f}, F1 micro {stats['val_f1_micro']:.4f}, exact match {stats['val_acc']:.4f}"
    print(f"{said} on {len(stats['targets'])} images; report: {out / 'per_class.csv'}")
    return stats | {"thresholds": thresholds}
{% else %}
    stats = evaluate(model, data.val, runtime, len(classes))
    out = own_folder(output_dir or default_evaluation_dir(weights, cfg.data, tta), replace_link=not output_dir)
    write_reports(out, stats["confusion"], classes)
    plot_run(out)
    print(f"accuracy {stats['val_acc']:.4f} on {int(stats['confusion'].sum())} images; report: {out / 'per_class.csv'}")
    return stats
{% endif %}


def predict(
    weights: str,
    images: list[str],
    device: torch.device,
    output: str = "predictions.csv",
    top_k: int = 1,
    tta: bool = False,
) -> list[dict]:
{% if cookiecutter.task == "multi_label" %}
    """The labels whose probability reaches its threshold, and the top-k classes and probabilities, of each image,
    with the model of a training run."""
    cfg, classes, model = load_run(weights, device)
    thresholds = load_thresholds(weights, classes, cfg.threshold)
    model = _with_tta(model, cfg) if tta else model
    transform = build_transform(cfg.data, cfg.image_size, cfg.mean, cfg.std)
    return predict_images(
        lambda batch: model(batch.to(device)), transform, classes, images, output, top_k, thresholds.tolist()
    )
{% else %}
    """The top-k classes and probabilities of each image, with the model of a training run."""
    cfg, classes, model = load_run(weights, device)
    model = _with_tta(model, cfg) if tta else model
    transform = build_transform(cfg.data, cfg.image_size, cfg.mean, cfg.std)
    return predict_images(lambda batch: model(batch.to(device)), transform, classes, images, output, top_k)
{% endif %}


def _features_file(output: str) -> Path:
    """The .npy file features writes, checked before any work: a folder or another suffix is refused, a name
    without one gets .npy (as np.save adds it; the last line printed names the file)."""
    path = Path(output)
    if output.endswith(os.sep) or path.is_dir() or not path.name:
        raise UserError(f"--output {output} is a folder; give a file name such as features.npy")
    if path.suffix not in ("", ".npy"):
        raise UserError(f"--output {output} is not a .npy file name; give one such as {path.stem}.npy")
    return path.with_name(path.name + ".npy") if not path.suffix else path


def _graph_nodes(model: torch.nn.Module) -> list[str]:
    try:
        return get_graph_node_names(model)[1]
    except Exception:  # noqa: BLE001 (a model torch.fx cannot trace, such as a ViT: its modules still serve)
        return []


def _module_output(model: torch.nn.Module, layer: str):
    """What the module `layer` returns in a forward pass, caught by a hook: any model, nothing traced."""
    seen = {}
    model.get_submodule(layer).register_forward_hook(lambda module, args, output: seen.update(output=output))
    return lambda images: (model(images), seen["output"])[1]


def _node_output(model: torch.nn.Module, layer: str):
    extractor = create_feature_extractor(model, return_nodes={layer: "features"})
    return lambda images: extractor(images)["features"]


@torch.inference_mode()
def extract_features(weights: str, layer: str, device: torch.device, output: str | None = None, **overrides) -> Path:
    """The output of one layer for every validation image, as <output>.npy, labels as <output>_labels.npy."""
    out = _features_file(output) if output else Path(weights).parent / f"features_{layer}.npy"
    cfg, classes, model = load_run(weights, device, **overrides)
    modules = [name for name, _ in model.named_modules() if name]  # blocks such as layer3, and their parts
    if layer not in modules and layer not in _graph_nodes(model):  # or an operation's node
        # closest first; among equals the deeper one (layer5 -> layer4, layer3, ...)
        ranked = sorted(reversed(modules), key=lambda name: -difflib.SequenceMatcher(None, layer, name).ratio())
        raise ModelError(f"{cfg.model} has no layer {layer!r}; the closest names: {', '.join(ranked[:3])}")
    extractor = _module_output(model, layer) if layer in modules else _node_output(model, layer)
    data = build_data(cfg, device, train=False)
    features, labels = [], []
    for images, targets in data.val:
        found = extractor(images.to(device))
        if not isinstance(found, torch.Tensor):
            kind = type(found).__name__
            raise ModelError(f"layer {layer!r} of {cfg.model} gives a {kind}, not one tensor; pick another layer")
        features.append(found.cpu())
        labels.append(targets)
    for path, array in ((out, torch.cat(features)), (out.with_name(out.stem + "_labels.npy"), torch.cat(labels))):
        with replacing(path) as file:
            buffer = io.BytesIO()  # np.save into a real file writes through C, where a full disk goes unnoticed
            np.save(buffer, array.numpy())
            file.write(buffer.getbuffer())
    print(f"{out}: {tuple(torch.cat(features).shape)} features of {layer!r}; labels in {out.stem}_labels.npy")
    return out
