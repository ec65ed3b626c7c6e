from dataclasses import replace

import pytest
import torch
from torch import nn

from {{ cookiecutter.package_name }}.data import build_data
from {{ cookiecutter.package_name }}.engine import train_one_epoch
from {{ cookiecutter.package_name }}.models import SmallCNN
from {{ cookiecutter.package_name }}.train import resolve, train

CPU = torch.device("cpu")
PRECISIONS = [
{% if cookiecutter.use_amp %}
    ("fp32", False),
    ("bf16", False),
    ("fp16", True),  # with GradScaler("cpu"): the gradients must be unscaled before clipping
{% else %}
    ("fp32", False),
{% endif %}
]


def total_norm(parameters) -> float:
    return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in parameters if p.grad is not None])).item()


def clipped_epoch(tiny_config, precision: str, scaled: bool) -> tuple[list[float], dict]:
    """Three steps clipped at 0.05: the norm of the gradients each optimizer step received, and the epoch's stats."""
    cfg = resolve(replace(tiny_config, clip_grad_norm=0.05, lr=0.5, max_steps_per_epoch=3))
{% if cookiecutter.use_amp %}
    cfg = replace(cfg, precision=precision)
{% endif %}
    torch.manual_seed(0)
    model = SmallCNN(10)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    norms = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: norms.append(total_norm(model.parameters())))
{% if cookiecutter.use_amp %}
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12, enabled=scaled)
    stats = train_one_epoch(model, build_data(cfg, CPU).train, nn.CrossEntropyLoss(), optimizer, CPU, cfg, scaler)
{% else %}
    stats = train_one_epoch(model, build_data(cfg, CPU).train, nn.CrossEntropyLoss(), optimizer, CPU, cfg)
{% endif %}
    return norms, stats


@pytest.mark.parametrize(("precision", "scaled"), PRECISIONS)
def test_gradients_reaching_the_optimizer_are_clipped(tiny_config, precision, scaled):
    norms, stats = clipped_epoch(tiny_config, precision, scaled)
    # Exactly at the limit (every step's raw norm is above it): clipping loss-scaled gradients would leave
    # them thousands of times smaller, which an upper bound alone cannot tell apart.
    assert norms == pytest.approx([0.05] * 3, rel=1e-3)
    _, reference = clipped_epoch(tiny_config, "fp32", False)
    assert stats["grad_norm"] > 0.05  # the logged norm is the one before clipping, in true (unscaled) units
    assert stats["grad_norm"] == pytest.approx(reference["grad_norm"], rel=0.05)


def test_clip_norm_is_logged_per_epoch_and_zero_turns_it_off(tiny_config, tmp_path):
    assert "grad_norm" in train(replace(tiny_config, clip_grad_norm=1.0))["metrics"][0]
    off = replace(tiny_config, clip_grad_norm=0.0, output_dir=str(tmp_path / "off"))
    assert "grad_norm" not in train(off)["metrics"][0]
