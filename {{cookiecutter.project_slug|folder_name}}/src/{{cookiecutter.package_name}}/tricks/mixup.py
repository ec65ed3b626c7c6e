{% if cookiecutter.use_mixup %}
"""MixUp and CutMix: training batches mixed with torchvision.transforms.v2.

`--mixup-alpha` blends pairs of training images and their labels; `--cutmix-alpha` pastes a patch of one image into
another; with both, each batch uses one of them (`--cutmix-prob`). The loss is cross-entropy against the mixed soft
labels; validation uses the real labels. Use them against over-fitting on small datasets and long schedules; they
slow down the fall of the training loss, which is expected. `train_acc` counts a prediction as right when it names
the class with the larger share of the mixed image, so it stays comparable with `val_acc`.
"""

from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option
from . import Trick


@dataclass
class Options:
    mixup_alpha: float = option(0.2, "MixUp Beta(alpha, alpha) on training batches (0 turns it off)")
    cutmix_alpha: float = option(0.0, "CutMix Beta(alpha, alpha) on training batches (0 turns it off)")
    cutmix_prob: float = option(0.5, "chance of CutMix instead of MixUp when both alphas are set")
    off = {"mixup_alpha": 0.0, "cutmix_alpha": 0.0}  # the values that switch it off

    def check(self) -> None:
        for name in ("mixup_alpha", "cutmix_alpha"):
            if not 0 <= getattr(self, name) < float("inf"):
                flag = "--" + name.replace("_", "-")
                raise UserError(f"{flag} must be a finite number, not negative, got {getattr(self, name)}")
        if not 0 <= self.cutmix_prob <= 1:
            raise UserError(f"--cutmix-prob must be between 0 and 1, got {self.cutmix_prob}")


def build(cfg, num_classes: int) -> "Mix | None":
    transform = build_mix(cfg, num_classes)
    return Mix(transform) if transform else None


def build_mix(cfg, num_classes: int):
    """torchvision's MixUp, CutMix or a random choice of the two; None when both alphas are 0."""
    from torchvision.transforms import v2  # torch is imported when a run starts, not for --help

    mixes, weights = [], []
    if cfg.mixup_alpha > 0:
        mixes.append(v2.MixUp(alpha=cfg.mixup_alpha, num_classes=num_classes))
        weights.append(1 - cfg.cutmix_prob)
    if cfg.cutmix_alpha > 0:
        mixes.append(v2.CutMix(alpha=cfg.cutmix_alpha, num_classes=num_classes))
        weights.append(cfg.cutmix_prob)
    if len(mixes) < 2:
        return mixes[0] if mixes else None
    return v2.RandomChoice(mixes, p=weights)


@dataclass
class Mix(Trick):
{% if cookiecutter.use_label_smoothing %}
    """`(images, labels) -> (mixed images, soft labels)`. The soft labels are not smoothed: label smoothing is applied
    once, by the loss."""
{% else %}
    """`(images, labels) -> (mixed images, soft labels)`."""
{% endif %}

    transform: object  # build_mix's

    def batch(self, images, targets):
        return self.transform(images, targets)
{% endif %}
