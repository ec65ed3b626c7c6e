{% if cookiecutter.use_freezing %}
from dataclasses import replace

import pytest
import torch
from conftest import SYNTHETIC_CLASSES

from {{ cookiecutter.package_name }}.core.errors import UserError
from {{ cookiecutter.package_name }}.models import SmallCNN
from {{ cookiecutter.package_name }}.training.optim import build_optimizer
from {{ cookiecutter.package_name }}.training.train import resolve, train
from {{ cookiecutter.package_name }}.tricks.freezing import freeze


def test_frozen_weights_and_bn_statistics_stay_bitwise_unchanged(tiny_config, capsys):
    torch.manual_seed(0)
    model = SmallCNN(10)
    freeze(model, ["features.0", "features.2.*"])  # a prefix and a glob
    assert "frozen parameters: " in capsys.readouterr().out
    frozen = {k for k, p in model.named_parameters() if not p.requires_grad}
    assert frozen and all(k.startswith(("features.0.", "features.2.")) for k in frozen)
    bn_buffers = {k for k in model.state_dict() if k.startswith(("features.0.1.", "features.2.1."))}
    before = {k: v.clone() for k, v in model.state_dict().items()}

    cfg = resolve(replace(tiny_config, weight_decay=0.1, momentum=0.9, lr=0.5))
    optimizer = build_optimizer(model, cfg)
    assert not {id(p) for g in optimizer.param_groups for p in g["params"]} & {
        id(p) for p in model.parameters() if not p.requires_grad
    }
    for _ in range(3):
        model.train()  # must not wake the frozen BatchNorm layers
        loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 3, 32, 32)), torch.randint(0, 10, (8,)))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    after = model.state_dict()
    for key in frozen | bn_buffers:
        assert torch.equal(before[key], after[key]), key
    trainable = {k for k, p in model.named_parameters() if p.requires_grad}
    assert all(not torch.equal(before[k], after[k]) for k in trainable)
    assert not torch.equal(before["features.4.1.running_mean"], after["features.4.1.running_mean"])


def test_a_pattern_matching_nothing_lists_the_top_level_modules():
    with pytest.raises(UserError, match="top-level modules are: features, pool, fc"):
        freeze(SmallCNN(10), ["backbone"])


def test_freezing_every_parameter_is_refused_before_anything_changes():
    model = SmallCNN(10)
    for patterns in (["*"], ["features", "fc"]):
        with pytest.raises(UserError) as raised:
            freeze(model, patterns)
        assert str(raised.value) == f"--freeze {' '.join(patterns)} would freeze every parameter: nothing would train"
    assert all(parameter.requires_grad for parameter in model.parameters())


def test_freeze_in_a_training_run(tiny_config, capsys):
    train(replace(tiny_config, model="small_cnn", freeze=["features"]))
    head = SmallCNN(SYNTHETIC_CLASSES).fc
    assert f"trainable: {head.weight.numel() + head.bias.numel():,}" in capsys.readouterr().out
{% endif %}
