{% if cookiecutter.use_label_smoothing %}
from dataclasses import replace

import pytest
import torch

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.errors import UserError
from {{ cookiecutter.package_name }}.training.train import train


{% if cookiecutter.task == "multi_label" %}
def reference_loss(logits: torch.Tensor, targets: torch.Tensor, eps: float) -> torch.Tensor:
    """Binary cross-entropy of every label against (1 - eps) * target + eps / 2, written out by hand."""
    smoothed = (1 - eps) * targets + eps / 2
    log_p, log_not_p = logits.sigmoid().log(), (-logits).sigmoid().log()  # log p and log (1 - p)
    return -(smoothed * log_p + (1 - smoothed) * log_not_p).mean()
{% else %}
def reference_loss(logits: torch.Tensor, targets: torch.Tensor, eps: float) -> torch.Tensor:
    """Cross-entropy against (1 - eps) * one_hot + eps / classes, written out by hand."""
    log_p = logits.log_softmax(1)
    classes = logits.shape[1]
    target_term = (1 - eps) * log_p[torch.arange(len(targets)), targets]
    uniform_term = eps / classes * log_p.sum(1)
    return -(target_term + uniform_term).mean()
{% endif %}


def test_the_logged_training_loss_is_the_closed_form_on_the_batch_trained_on(tiny_config, watch):
    # One step: the logged loss is that of the first batch, computed by the loop before the step.
    # kaiming init: logits far from uniform, where smoothing changes the loss visibly
    cfg = replace(tiny_config, label_smoothing=0.2, max_steps_per_epoch=1, init="kaiming")
{% if cookiecutter.use_mixup %}
    cfg = replace(cfg, mixup_alpha=0.0, cutmix_alpha=0.0)  # hard labels: the closed form below
{% endif %}
{% if cookiecutter.use_amp %}
    cfg = replace(cfg, precision="fp32")
{% endif %}
    logged = train(cfg)["metrics"][0]["train_loss"]
    (_, targets), logits = watch.batches[0], watch.logits[0]
    assert logged == pytest.approx(reference_loss(logits, targets, 0.2).item(), rel=1e-5)
    assert logged != pytest.approx(reference_loss(logits, targets, 0.0).item(), rel=1e-5)  # smoothing shows


def test_the_smoothing_is_in_zero_included_to_one_excluded():
    assert [TrainConfig(label_smoothing=eps).label_smoothing for eps in (0.0, 0.999)] == [0.0, 0.999]
    for bad in (-0.1, 1.0, 1.5):  # 1 would put no weight at all on the true class
        with pytest.raises(UserError) as raised:
            TrainConfig(label_smoothing=bad)
        assert str(raised.value) == f"--label-smoothing must be in [0, 1), got {bad}"
{% endif %}
