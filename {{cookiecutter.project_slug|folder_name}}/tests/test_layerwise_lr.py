{% if cookiecutter.use_layerwise_lr %}
from dataclasses import replace

import pytest
from conftest import NEUTRAL

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.errors import UserError
from {{ cookiecutter.package_name }}.models import SmallCNN
from {{ cookiecutter.package_name }}.training import optim
from {{ cookiecutter.package_name }}.training.train import train
from {{ cookiecutter.package_name }}.tricks.layerwise_lr import LayerwiseLR, build, parse_lr_mults


def parameter_groups(model, weight_decay: float, lr: float, lr_mults: dict) -> list[dict]:
    """The optimizer's groups as a run with `--lr LR --lr-mult ...` makes them."""
    return LayerwiseLR(lr_mults, lr).param_groups(model, optim.parameter_groups(model, weight_decay))


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
    optimizer = optim.build_optimizer(model, cfg, [build(cfg, 10)])
    schedule = optim.build_scheduler(optimizer, cfg)
    # By hand: warm-up 1/3, 2/3, then (1 + cos(pi * k / 4)) / 2 for k = 0..3; or 0.1 every 2 epochs.
    factors = {"cosine": [1 / 3, 2 / 3, 1.0, 0.85355339, 0.5, 0.14644661], "step": [1, 1, 0.1, 0.1, 0.01, 0.01]}
    for factor in factors[scheduler]:
        for group in optimizer.param_groups:
            mult = 10 if {id(p) for p in group["params"]} & head else 1
            assert group["lr"] == pytest.approx(0.1 * mult * factor)
        optimizer.step()
        schedule.step()


def test_each_group_lr_is_logged_per_epoch(tiny_config):
    # the schedule's own rates: every other trick off
    cfg = replace(tiny_config, model="small_cnn", lr=0.1, epochs=3, **NEUTRAL | {"lr_mult": ["fc=10"]})
    rows = train(cfg)["metrics"]
    assert [*rows[0]][-3:] == ["lr", "lr[fc]", "seconds"]  # the rates together, at the end of the row
    for row, factor in zip(rows, [1.0, 0.75, 0.25], strict=True):  # (1 + cos(pi * epoch / 3)) / 2
        assert row["lr"] == pytest.approx(0.1 * factor)
        assert row["lr[fc]"] == pytest.approx(0.1 * 10 * factor)


def test_bad_multipliers_are_refused():
    with pytest.raises(UserError, match="matches no parameter"):
        parameter_groups(SmallCNN(10), 0.1, 0.1, {"head": 10.0})
    for item in ("fc", "fc=ten", "fc=-1", "=2", "fc=nan", "fc=inf"):
        with pytest.raises(UserError, match="must be PATTERN=MULT"):
            TrainConfig(lr_mult=[item])


def test_multipliers_parse_to_a_dict_and_the_boundaries_hold():
    assert parse_lr_mults(None) == {} and parse_lr_mults([]) == {}
    assert parse_lr_mults(["fc=10", "features.4=0.5", "layer*=1"]) == {"fc": 10.0, "features.4": 0.5, "layer*": 1.0}
    assert TrainConfig(lr_mult=["fc=1e-3"]).lr_mult == ["fc=1e-3"]
    for item in ("fc=0", "fc=-0.5", "a=b=2", "fc=", "fc=inf=2"):
        with pytest.raises(UserError) as raised:
            parse_lr_mults(["layer4=2", item])
        assert str(raised.value) == f"--lr-mult {item!r} must be PATTERN=MULT with a positive number, e.g. fc=10"


def test_a_config_file_may_give_one_multiplier_as_a_bare_string(tmp_path):
    from {{ cookiecutter.package_name }}.config import load_config_file

    path = tmp_path / "config.yaml"
    path.write_text("lr_mult: fc=10\n")
    assert load_config_file(str(path)) == {"lr_mult": ["fc=10"]}
    path.write_text("lr_mult: [fc=10, features.0=2]\n")
    assert load_config_file(str(path)) == {"lr_mult": ["fc=10", "features.0=2"]}
    for text, shown in (("lr_mult: [1, 2]", "[1, 2]"), ("lr_mult: 3", "3"), ("lr_mult: {fc: 10}", "{'fc': 10}")):
        path.write_text(text + "\n")
        with pytest.raises(UserError) as raised:
            load_config_file(str(path))
        assert str(raised.value) == f"config key 'lr_mult' must be a list of str, got {shown}; fix the config file"


def test_the_logged_base_lr_is_the_unmultiplied_one_whichever_group_comes_first():
    import torch

    model = SmallCNN(10)
    first = next(name for name, _ in model.named_parameters())
    trick = LayerwiseLR({first: 4.0, "fc": 10.0}, 0.2)
    groups = trick.param_groups(model, optim.parameter_groups(model, 0.0))
    assert groups[0]["lr_pattern"] == first and groups[0]["lr"] == pytest.approx(0.8)
    trick.start(model, torch.optim.SGD(groups, lr=0.2), None)
    rates = trick.after_epoch(1, model, validate=None)
    assert rates == pytest.approx({"lr": 0.2, f"lr[{first}]": 0.8, "lr[fc]": 2.0})
    assert build(TrainConfig(lr=0.3), 10) is None  # no multiplier: the plain groups, and the plain "lr"


def test_a_pattern_matching_no_parameter_is_refused_naming_the_flag_and_the_modules():
    model = SmallCNN(10)
    top = ", ".join(name for name, _ in model.named_children())
    with pytest.raises(UserError) as raised:
        parameter_groups(model, 0.1, 0.1, {"fc": 2.0, "head": 10.0})
    assert str(raised.value) == f"--lr-mult 'head' matches no parameter; the model's top-level modules are: {top}"


def test_a_pattern_given_twice_is_refused_not_overwritten():
    with pytest.raises(UserError) as raised:
        parse_lr_mults(["fc=10", "layer4=2", "fc=5"])
    assert str(raised.value) == "--lr-mult gives 'fc' two rates; give it one"


def test_a_pattern_whose_parameters_all_go_elsewhere_is_refused():
    model = SmallCNN(10)
    with pytest.raises(UserError) as raised:  # fc takes fc.weight first: 5 would never apply
        parameter_groups(model, weight_decay=0.1, lr=0.2, lr_mults={"fc": 10.0, "fc.weight": 5.0})
    why = "is {{ 'frozen or ' if cookiecutter.use_freezing else '' }}taken by an earlier pattern"
    assert str(raised.value) == f"--lr-mult 'fc.weight' sets no rate: each parameter it matches {why}; drop it"
{% if cookiecutter.use_freezing %}
    model.fc.requires_grad_(False)  # as --freeze fc leaves it
    with pytest.raises(UserError, match="^--lr-mult 'fc' sets no rate: each parameter it matches is frozen"):
        parameter_groups(model, weight_decay=0.1, lr=0.2, lr_mults={"fc": 10.0})
{% endif %}
{% endif %}
