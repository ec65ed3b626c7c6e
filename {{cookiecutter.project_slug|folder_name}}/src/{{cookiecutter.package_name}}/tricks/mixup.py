{% if cookiecutter.use_mixup %}
"""MixUp and CutMix on training batches, from torchvision.transforms.v2."""

from torchvision.transforms import v2


def build_mix(cfg, num_classes: int):
{% if cookiecutter.use_label_smoothing %}
    """A batch transform `(images, labels) -> (mixed images, soft labels)`, or None when both alphas are 0.

    The soft labels are not smoothed: label smoothing is applied once, by the loss.
    """
{% else %}
    """A batch transform `(images, labels) -> (mixed images, soft labels)`, or None when both alphas are 0."""
{% endif %}
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
{% endif %}
