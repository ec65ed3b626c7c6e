from dataclasses import replace

import pytest

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.errors import UserError
from {{ cookiecutter.package_name }}.models import SmallCNN
from {{ cookiecutter.package_name }}.optim import (
    build_optimizer,
    build_scheduler,
    parameter_groups,
)
from {{ cookiecutter.package_name }}.train import train


def test_every_trainable_parameter_is_in_exactly_one_group_with_the_right_decay():
    model = SmallCNN(10)
    model.features[0][0].weight.requires_grad_(False)
    groups = parameter_groups(model, weight_decay=0.1, lr=0.2, lr_mults={"fc": 10.0, "features.4": 2.0})
    ids = [id(p) for g in groups for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters() if p.requires_grad)
    # Expected by where each parameter sits in the model, not by what the groups say about themselves.
    mults = {id(p): 10.0 for p in model.fc.parameters()} | {id(p): 2.0 for p in model.features[4].parameters()}
    for group in groups:
        assert all((p.ndim <= 1) == (group["weight_decay"] == 0) for p in group["params"])
        assert all(group["lr"] == pytest.approx(0.2 * mults.get(id(p), 1.0)) for p in group["params"])


@pytest.mark.parametrize("scheduler", ["cosine", "step"])
def test_schedules_keep_the_ratios_at_every_epoch(tiny_config, scheduler):
    cfg = replace(tiny_config, lr=0.1, lr_mult=["fc=10"], scheduler=scheduler, epochs=6, warmup_epochs=2, step_size=2)
    model = SmallCNN(10)
    head = {id(p) for p in model.fc.parameters()}
    optimizer = build_optimizer(model, cfg)
    schedule = build_scheduler(optimizer, cfg)
    # By hand: warm-up 1/3, 2/3, then (1 + cos(pi * k / 4)) / 2 for k = 0..3; or 0.1 every 2 epochs.
    factors = {"cosine": [1 / 3, 2 / 3, 1.0, 0.85355339, 0.5, 0.14644661], "step": [1, 1, 0.1, 0.1, 0.01, 0.01]}
    for factor in factors[scheduler]:
        for group in optimizer.param_groups:
            mult = 10 if {id(p) for p in group["params"]} & head else 1
            assert group["lr"] == pytest.approx(0.1 * mult * factor)
        optimizer.step()
        schedule.step()


def test_each_group_lr_is_logged_per_epoch(tiny_config):
    rows = train(replace(tiny_config, model="small_cnn", lr=0.1, lr_mult=["fc=10"], epochs=3))["metrics"]
    for row, factor in zip(rows, [1.0, 0.75, 0.25], strict=True):  # (1 + cos(pi * epoch / 3)) / 2
        assert row["lr"] == pytest.approx(0.1 * factor)
        assert row["lr[fc]"] == pytest.approx(0.1 * 10 * factor)


def test_bad_multipliers_are_refused():
    with pytest.raises(UserError, match="matches no parameter"):
        parameter_groups(SmallCNN(10), 0.1, 0.1, {"head": 10.0})
    for item in ("fc", "fc=ten", "fc=-1", "=2"):
        with pytest.raises(UserError, match="must be PATTERN=MULT"):
            TrainConfig(lr_mult=[item])
