{% if cookiecutter.task == "multi_label" %}
"""Multi-label classification: the loss a run trains against and the reports it writes after each epoch."""

from pathlib import Path

from torch import nn

from ..reports.multi_label import write_reports


def training_loss(class_weights) -> nn.Module:
    """A yes/no per class: binary cross-entropy of each logit (`class_weights`: --pos-weight auto's, on positives)."""
    return nn.BCEWithLogitsLoss(pos_weight=class_weights)


def write_epoch_reports(out: Path, val: dict, classes: list[str], cfg) -> None:
    """per_class.csv at --threshold, and precision_recall.csv."""
    write_reports(out, val["probabilities"], val["targets"], cfg.threshold, classes)
{% else %}
"""Single-label classification: the loss a run trains against and the reports it writes after each epoch."""

from pathlib import Path

from torch import nn

from ..reports.metrics import write_reports


def training_loss(class_weights) -> nn.Module:
    """One class per image: cross-entropy of the logits (`class_weights`: --class-weights auto's)."""
    return nn.CrossEntropyLoss(weight=class_weights)


def write_epoch_reports(out: Path, val: dict, classes: list[str], cfg) -> None:
    """per_class.csv and confusion_matrix.csv."""
    write_reports(out, val["confusion"], classes)
{% endif %}
