{% if cookiecutter.task == "multi_label" %}
"""Predictions for image files, whatever model gives them (a training run's or an exported file): the labels of
each image whose probability reaches its class's threshold, and its top classes, printed and written as a CSV."""
{% else %}
"""Predictions for image files, whatever model gives them (a training run's or an exported file): the top classes
of each image, printed and written as a CSV."""
{% endif %}

import csv
import sys
from pathlib import Path

import torch

from ..core.errors import DataError, ModelError, UserError
from ..core.files import replacing
from ..data.decoding import load_rgb
from ..data.layouts import is_image

NAMED_SKIPS = 3  # of the files predict leaves out of a folder


def image_files(paths: list[str]) -> list[Path]:
    """Files as given, and the images in folders (recursively, in sorted order); the other files of those folders
    are counted and named on stderr, in one line."""
    found, others = [], []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                if is_image(file):
                    found.append(file)
                elif file.is_file():
                    others.append(file)
        elif path.is_file():
            found.append(path)
        else:
            raise DataError(f"{name}: no such file or folder")
    named = ", ".join(str(file) for file in others[:NAMED_SKIPS]) + (", ..." if len(others) > NAMED_SKIPS else "")
    skipped = f"{len(others)} file(s) that are not images by their names skipped: {named}"
    if not found:
        raise DataError(f"no images in {', '.join(paths)}" + (f"; {skipped}" if others else ""))
    if others:
        print(skipped, file=sys.stderr)
    return found


def _check_output(output: Path) -> None:
    """predict writes a new CSV or replaces one it wrote earlier: never weights, a config or anything else."""
    if output.is_dir():
        raise UserError(f"--output {output} is a folder; give a file name such as predictions.csv")
    if output.exists():
        with open(output, "rb") as file:
            header = file.readline()
        if not header.startswith(b"{{ 'path,labels,class_1' if cookiecutter.task == 'multi_label' else 'path,class_1' }},probability_1"):
            raise UserError(f"--output {output} exists and holds no predictions; pick another file name")


{% if cookiecutter.task == "multi_label" %}
@torch.inference_mode()
def predict_images(
    logits_of, transform, classes: list[str], images: list[str], output: str, top_k: int, thresholds: list[float]
) -> list[dict]:
    """The labels of each image (every class whose probability reaches its threshold, joined by ;) and its top-k
    classes and probabilities, printed and written to `output`; files that cannot be read as images are listed and
    counted, not fatal. `logits_of` gives the logits of a batch of one image."""
{% else %}
@torch.inference_mode()
def predict_images(logits_of, transform, classes: list[str], images: list[str], output: str, top_k: int) -> list[dict]:
    """The top-k classes and probabilities of each image, printed and written to `output`; files that cannot be
    read as images are listed and counted, not fatal. `logits_of` gives the logits of a batch of one image."""
{% endif %}
    if not 1 <= top_k <= len(classes):
        raise UserError(f"--top-k must be between 1 and the {len(classes)} classes, got {top_k}")
    _check_output(Path(output))
    rows, unreadable = [], []
    for path in image_files(images):
        try:
            batch = transform(load_rgb(str(path))).unsqueeze(0)  # a batch of one
        except DataError as exc:  # corrupt, not an image, or too large to open safely
            unreadable.append(path)
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        logits = logits_of(batch)
        if not logits.isfinite().all():  # {{ "the sigmoid" if cookiecutter.task == "multi_label" else "softmax" }} would make them NaN probabilities
            raise ModelError(f"the model's scores for {path} are not all finite numbers; no predictions were written")
{% if cookiecutter.task == "multi_label" %}
        every = logits.double().sigmoid()[0]
        labels = [name for name, p, t in zip(classes, every.tolist(), thresholds, strict=True) if p >= t]
        probabilities, indices = every.topk(top_k)
        row = {"path": str(path), "labels": ";".join(labels)}
{% else %}
        probabilities, indices = logits.softmax(1)[0].topk(top_k)
        row = {"path": str(path)}
{% endif %}
        for rank, (index, probability) in enumerate(zip(indices.tolist(), probabilities.tolist(), strict=True), 1):
            row |= {f"class_{rank}": classes[index], f"probability_{rank}": round(probability, 6)}
        rows.append(row)
        print("\t".join(f"{value:.4f}" if isinstance(value, float) else value for value in row.values()))
    if not rows:
        raise DataError(f"none of the {len(unreadable)} file(s) is a readable image; nothing was predicted")
    with replacing(Path(output), "w") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    skipped = f"; {len(unreadable)} unreadable file(s) skipped" if unreadable else ""
    print(f"{len(rows)} predictions written to {output}{skipped}", file=sys.stderr)  # stdout: the predictions alone
    return rows
