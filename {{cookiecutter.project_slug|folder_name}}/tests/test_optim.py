"""The optimizer, the schedules and the L1 penalty, built and checked directly (no training run)."""

import math

import pytest
import torch
from torch import nn

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.training.optim import (
    L1Penalty,
    build_optimizer,
    build_scheduler,
    learning_rates,
    warmup_cosine,
)


def small_model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def test_sgd_is_nesterov_sgd_at_the_configured_rate_and_momentum():
    model = small_model()
    optimizer = build_optimizer(model, TrainConfig(optimizer="sgd", lr=0.2, momentum=0.8, weight_decay=0.01))
    assert type(optimizer) is torch.optim.SGD
    assert optimizer.defaults["lr"] == 0.2 and optimizer.defaults["momentum"] == 0.8
    assert optimizer.defaults["nesterov"] is True
    assert {id(p) for group in optimizer.param_groups for p in group["params"]} == {id(p) for p in model.parameters()}
    assert all(group["lr"] == pytest.approx(0.2) for group in optimizer.param_groups)
    kernels = {id(p) for p in model.parameters() if p.ndim > 1}
    for group in optimizer.param_groups:  # decay on the kernels only, never on biases and norm weights
        assert group["weight_decay"] == (0.01 if {id(p) for p in group["params"]} <= kernels else 0.0)
    plain = build_optimizer(small_model(), TrainConfig(optimizer="sgd", lr=0.1, momentum=0.0))
    assert plain.defaults["nesterov"] is False and plain.defaults["momentum"] == 0.0  # Nesterov needs momentum


def test_adamw_is_adamw_over_every_parameter_at_the_configured_rate():
    model = small_model()
    optimizer = build_optimizer(model, TrainConfig(optimizer="adamw", lr=0.003, weight_decay=0.0))
    assert type(optimizer) is torch.optim.AdamW and optimizer.defaults["lr"] == 0.003
    assert sum(len(group["params"]) for group in optimizer.param_groups) == len(list(model.parameters()))
    assert all(group["lr"] == pytest.approx(0.003) for group in optimizer.param_groups)
    assert learning_rates(optimizer) == pytest.approx({"lr": 0.003})


def lrs_per_epoch(cfg: TrainConfig, epochs: int) -> list[float]:
    optimizer = build_optimizer(small_model(), cfg)
    scheduler = build_scheduler(optimizer, cfg)
    rates = []
    for _ in range(epochs):
        rates.append(learning_rates(optimizer)["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_each_schedule_gives_its_learning_rate_per_epoch():
    assert lrs_per_epoch(TrainConfig(lr=0.1, scheduler="none", epochs=4), 4) == pytest.approx([0.1] * 4)
    step = TrainConfig(lr=0.1, scheduler="step", step_size=2, gamma=0.5, epochs=6)
    assert lrs_per_epoch(step, 6) == pytest.approx([0.1, 0.1, 0.05, 0.05, 0.025, 0.025])
    cosine = TrainConfig(lr=0.1, scheduler="cosine", warmup_epochs=1, epochs=5)
    expected = [0.05] + [0.1 * 0.5 * (1 + math.cos(math.pi * e / 4)) for e in range(4)]
    assert lrs_per_epoch(cosine, 5) == pytest.approx(expected)


def test_warmup_cosine_rises_linearly_then_falls_to_zero():
    assert [warmup_cosine(e, 3, 7) for e in range(3)] == pytest.approx([0.25, 0.5, 0.75])
    assert [warmup_cosine(e, 3, 7) for e in range(3, 8)] == pytest.approx([1.0, 0.8535534, 0.5, 0.1464466, 0.0])
    assert warmup_cosine(0, 0, 1) == 1.0 and warmup_cosine(1, 0, 1) == pytest.approx(0.0, abs=1e-12)
    assert warmup_cosine(2, 2, 2) == 1.0  # as many warm-up epochs as epochs: no division by zero


def test_the_l1_penalty_adds_strength_times_the_kernels_and_logs_its_epoch_mean():
    model = small_model()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(-0.5)  # |w| = 0.5 everywhere: biases and norm weights must not count
    model[2].weight.requires_grad_(False)  # kernels that do not train do not count either
    criterion = L1Penalty(nn.MSELoss(), model, strength=0.1)
    kernels = 3 * 4  # the first Linear's weight only
    logits, targets = torch.zeros(2, 2), torch.ones(2, 2)
    assert criterion(logits, targets).item() == pytest.approx(1.0 + 0.1 * 0.5 * kernels)
    with torch.no_grad():
        model[0].weight.fill_(1.5)
    assert criterion(logits, targets).item() == pytest.approx(1.0 + 0.1 * 1.5 * kernels)
    assert criterion.epoch_mean() == pytest.approx(0.1 * kernels * (0.5 + 1.5) / 2)  # the mean of the two steps
    assert criterion.epoch_mean() == 0.0  # a new epoch starts empty
    criterion(logits, targets)
    assert criterion.epoch_mean() == pytest.approx(0.1 * 1.5 * kernels)  # one step: its penalty, unhalved
