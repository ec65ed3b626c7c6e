from dataclasses import replace

import pytest

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.errors import UserError
from {{ cookiecutter.package_name }}.models import SmallCNN
from {{ cookiecutter.package_name }}.optim import (
    build_optimizer,
    build_scheduler,
    parameter_groups,
    warmup_cosine,
)
from {{ cookiecutter.package_name }}.train import train


def test_every_trainable_parameter_is_in_exactly_one_group_with_the_right_decay():
    model = SmallCNN(10)
    model.features[0][0].weight.requires_grad_(False)
    groups = parameter_groups(model, weight_decay=0.1, lr=0.2, lr_mults={"fc": 10.0, "features.4": 2.0})
    ids = [id(p) for g in groups for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters() if p.requires_grad)
    for group in groups:
        assert all((p.ndim <= 1) == (group["weight_decay"] == 0) for p in group["params"])
        assert group["lr"] == pytest.approx(0.2 * {"fc": 10.0, "features.4": 2.0, None: 1.0}[group["lr_pattern"]])
    head = {id(model.fc.weight), id(model.fc.bias)}
    assert all(g["lr_pattern"] == "fc" for g in groups if {id(p) for p in g["params"]} & head)


@pytest.mark.parametrize("scheduler", ["cosine", "step"])
def test_schedules_keep_the_ratios_at_every_epoch(tiny_config, scheduler):
    cfg = replace(tiny_config, lr=0.1, lr_mult=["fc=10"], scheduler=scheduler, epochs=6, warmup_epochs=2, step_size=2)
    optimizer = build_optimizer(SmallCNN(10), cfg)
    schedule = build_scheduler(optimizer, cfg)
    for epoch in range(cfg.epochs):
        factor = warmup_cosine(epoch, 2, 6) if scheduler == "cosine" else 0.1 ** (epoch // 2)
        for group in optimizer.param_groups:
            assert group["lr"] == pytest.approx(0.1 * group["lr_mult"] * factor)
        optimizer.step()
        schedule.step()


def test_each_group_lr_is_logged_per_epoch(tiny_config):
    rows = train(replace(tiny_config, model="small_cnn", lr=0.1, lr_mult=["fc=10"], epochs=3))["metrics"]
    for epoch, row in enumerate(rows):
        assert row["lr"] == pytest.approx(0.1 * warmup_cosine(epoch, 0, 3))
        assert row["lr[fc]"] == pytest.approx(10 * row["lr"])


def test_bad_multipliers_are_refused():
    with pytest.raises(UserError, match="matches no parameter"):
        parameter_groups(SmallCNN(10), 0.1, 0.1, {"head": 10.0})
    for item in ("fc", "fc=ten", "fc=-1", "=2"):
        with pytest.raises(UserError, match="must be PATTERN=MULT"):
            TrainConfig(lr_mult=[item])
