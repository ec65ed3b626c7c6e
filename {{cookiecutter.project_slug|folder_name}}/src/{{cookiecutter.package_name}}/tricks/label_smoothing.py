{% if cookiecutter.use_label_smoothing %}
{% if cookiecutter.task == "multi_label" %}
"""Label smoothing: each label's binary target moved toward 0.5 by eps, `(1 - eps) * target + eps / 2`.

`--label-smoothing 0.1` trains each class's yes/no against 0.95 and 0.05 instead of 1 and 0, which keeps the model
from becoming over-confident. It is applied once, by the loss{% if cookiecutter.use_mixup %} (also on MixUp's mixed labels){% endif %}; the validation loss is
plain binary cross-entropy so runs stay comparable.
"""
{% else %}
"""Label smoothing: the training loss against `(1 - eps) * one-hot + eps / classes`, not hard one-hot targets.

`--label-smoothing 0.1` trains against `0.9 * one-hot + 0.1 / classes` instead of hard one-hot targets, which keeps
the model from becoming over-confident. It is applied once, by the loss (PyTorch's `CrossEntropyLoss(label_smoothing=
...)`{% if cookiecutter.use_mixup %}, also on MixUp's soft labels{% endif %}); the validation loss is plain cross-entropy so runs stay comparable.
"""
{% endif %}

from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option
from . import Trick


@dataclass
class Options:
    label_smoothing: float = option(0.1, "label smoothing of the training loss (0 turns it off)")
    off = {"label_smoothing": 0.0}  # the values that switch it off

    def check(self) -> None:
        if not 0 <= self.label_smoothing < 1:  # 1 would put no weight at all on the true class
            raise UserError(f"--label-smoothing must be in [0, 1), got {self.label_smoothing}")


def build(cfg, num_classes: int) -> "LabelSmoothing | None":
    """None when --label-smoothing is 0."""
    return LabelSmoothing(cfg.label_smoothing) if cfg.label_smoothing else None


@dataclass
class LabelSmoothing(Trick):
    eps: float

    def criterion(self, criterion):
        from torch import nn  # torch is imported when a run starts, not for --help

{% if cookiecutter.task == "multi_label" %}
        eps = self.eps

        class SmoothedBCEWithLogitsLoss(nn.BCEWithLogitsLoss):
            def forward(self, logits, targets):
                return super().forward(logits, targets * (1 - eps) + eps / 2)  # toward 0.5, a label's "not sure"

        return SmoothedBCEWithLogitsLoss(pos_weight=criterion.pos_weight)
{% else %}
        return nn.CrossEntropyLoss(weight=criterion.weight, label_smoothing=self.eps)
{% endif %}
{% endif %}
