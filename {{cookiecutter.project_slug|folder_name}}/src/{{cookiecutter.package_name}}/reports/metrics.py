{% if cookiecutter.task == "multi_label" %}
"""The figure that picks a run's best epoch, and CSV files for any spreadsheet."""
{% else %}
"""The figure that picks a run's best epoch, those of a confusion matrix, and CSV files for any spreadsheet."""
{% endif %}

import csv
from pathlib import Path

{% if cookiecutter.task != "multi_label" %}
import torch

{% endif %}
from ..core.files import replacing

MONITOR = "{{ 'val_map' if cookiecutter.task == 'multi_label' else 'val_acc' }}"  # picks the best epoch, stops early, scores trials


def best_row(rows: list[dict]) -> dict:
    """The epoch with the best MONITOR figure; the first of equals."""
    return max(rows, key=lambda row: row[MONITOR])


def stopped_early(rows: list[dict], patience: int) -> bool:
    """Whether MONITOR has not improved for `patience` epochs (0: never stop early): the run ends there."""
    if not patience or not rows:
        return False
    best = best_row(rows)  # the first of equals: the run printed it as its best
    return rows[-1]["epoch"] - best["epoch"] >= patience


def write_csv(path: Path, rows: list[dict]) -> None:
    """Write to a temporary name, then rename: a crash never leaves a half-written file."""
    with replacing(path, "w") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]), lineterminator="\n")  # no CRLF
        writer.writeheader()
        writer.writerows(rows)
{% if cookiecutter.task != "multi_label" %}


def correct(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """How many predictions name the true class; of class probabilities (mixed images), the largest one."""
    labels = targets if targets.ndim == 1 else targets.argmax(1)
    return (logits.argmax(1) == labels).sum()


def confusion_matrix(targets: torch.Tensor, predictions: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Rows are true classes, columns predicted classes; stays on the device of its inputs. Counted with index_add_:
    bincount reads its inputs' maximum back to the host, a wait for the GPU on every validation batch."""
    flat = targets * num_classes + predictions
    matrix = torch.zeros(num_classes**2, dtype=torch.long, device=flat.device)
    return matrix.index_add_(0, flat, torch.ones_like(flat)).reshape(num_classes, num_classes)


def per_class_report(matrix: torch.Tensor, classes: list[str]) -> list[dict]:
    """Precision, recall, F1 and support per class, then micro, macro and weighted averages."""
    matrix = matrix.double()
    true_positives = matrix.diag()
    support = matrix.sum(1)
    precision = true_positives / matrix.sum(0).clamp_min(1)
    recall = true_positives / support.clamp_min(1)
    f1 = 2 * precision * recall / (precision + recall).clamp_min(1e-12)
    rows = [
        {"class": name, "precision": p, "recall": r, "f1": f, "support": int(s)}
        for name, p, r, f, s in zip(
            classes, precision.tolist(), recall.tolist(), f1.tolist(), support.tolist(), strict=True
        )
    ]
    micro_precision = float(true_positives.sum() / matrix.sum(0).sum().clamp_min(1))
    micro_recall = float(true_positives.sum() / support.sum().clamp_min(1))
    micro_f1 = 2 * micro_precision * micro_recall / max(micro_precision + micro_recall, 1e-12)
    micro = {"precision": micro_precision, "recall": micro_recall, "f1": micro_f1}
    rows.append({"class": "micro avg", **micro, "support": int(support.sum())})
    weights = {"macro avg": torch.full_like(support, 1 / len(classes)), "weighted avg": support / support.sum()}
    for label, w in weights.items():
        averages = {
            key: float((w * value).sum()) for key, value in (("precision", precision), ("recall", recall), ("f1", f1))
        }
        rows.append({"class": label, **averages, "support": int(support.sum())})
    return rows


def write_confusion_csv(path: Path, matrix: torch.Tensor, classes: list[str]) -> None:
    rows = [
        {"true \\ predicted": name, **dict(zip(classes, row, strict=True))}
        for name, row in zip(classes, matrix.tolist(), strict=True)
    ]
    write_csv(path, rows)


def write_reports(out: Path, matrix: torch.Tensor, classes: list[str]) -> None:
    """per_class.csv and confusion_matrix.csv of one evaluation."""
    write_csv(out / "per_class.csv", per_class_report(matrix, classes))
    write_confusion_csv(out / "confusion_matrix.csv", matrix, classes)
{% endif %}
