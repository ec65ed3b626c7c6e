{% if cookiecutter.task == "multi_label" %}
"""The per-class thresholds of multi-label predictions: those `evaluate --fit-thresholds` saved beside the weights,
else --threshold for every class."""

import csv
from pathlib import Path

import torch

from ..core.errors import ModelError
from ..reports.metrics import write_csv


def thresholds_file(weights: str | Path) -> Path:
    """model.pt -> model_thresholds.csv: each weights file its own (another file's weights may want others)."""
    return Path(weights).with_name(f"{Path(weights).stem}_thresholds.csv")


def save_thresholds(weights: str | Path, thresholds: torch.Tensor, classes: list[str]) -> Path:
    path = thresholds_file(weights)
    rows = zip(classes, thresholds.tolist(), strict=True)
    write_csv(path, [{"class": name, "threshold": value} for name, value in rows])
    return path


def load_thresholds(weights: str | Path, classes: list[str], default: float) -> torch.Tensor:
    """The saved thresholds, in the order of `classes`, or `default` for each class where none were saved."""
    path = thresholds_file(weights)
    if not path.exists() and not path.is_symlink():
        return torch.full((len(classes),), default, dtype=torch.float64)
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:  # -sig: as a spreadsheet saves it
            rows = [(row["class"], float(row["threshold"])) for row in csv.DictReader(file)]
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"cannot read {path} ({exc}); fit it again with evaluate --fit-thresholds") from None
    if [name for name, _ in rows] != classes or not all(0 <= value <= 1 for _, value in rows):  # NaN fails too
        raise ModelError(
            f"{path} does not hold a threshold from 0 to 1 for each of the model's {len(classes)} classes in order; "
            "fit it again with evaluate --fit-thresholds"
        )
    return torch.tensor([value for _, value in rows], dtype=torch.float64)
{% endif %}
