{% if cookiecutter.use_ema %}
import csv
from dataclasses import replace

import pytest
import torch
from conftest import evaluated_images
from torch import nn

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.errors import UserError
from {{ cookiecutter.package_name }}.serving.inference import evaluate_run
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.train import train
from {{ cookiecutter.package_name }}.tricks import ema as moving_average


def build_ema(model: nn.Module, decay: float):
    """The trick as a run builds and starts it."""
    trick = moving_average.build(TrainConfig(ema_decay=decay), num_classes=2)
    if trick is not None:
        trick.start(model, optimizer=None, scheduler=None)
    return trick


def test_each_update_follows_the_ema_formula_for_weights_and_batchnorm_statistics():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    ema = build_ema(model, decay=0.9)
    for value in (1.0, 2.0, 4.0):
        with torch.no_grad():
            for tensor in [*model.parameters(), model[1].running_mean]:
                tensor.fill_(value)
        ema.after_step(model)
    # the first update copies the weights; then d = min(0.9, (1 + n) / (10 + n)) after n updates
    second = 2 / 11 * 1.0 + 9 / 11 * 2.0
    expected = 3 / 12 * second + 9 / 12 * 4.0
    for tensor in [*ema.average.module.parameters(), ema.average.module[1].running_mean]:
        assert torch.allclose(tensor, torch.full_like(tensor, expected))
    assert build_ema(model, decay=0.0) is None


def test_an_update_reads_nothing_on_the_host(monkeypatch):
    """torch's own AveragedModel reads its step counter on the host at every update: on a GPU, a wait per step."""
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    ema = build_ema(model, decay=0.9)

    def host_read(*args, **kwargs):
        raise AssertionError("an EMA update read a tensor on the host")

    with monkeypatch.context() as patched:
        for name in ("__bool__", "item", "tolist", "__int__", "__float__"):
            patched.setattr(torch.Tensor, name, host_read)
        ema.after_step(model)
        ema.after_step(model)
    assert int(ema.average.n_averaged) == 2


def test_the_average_is_evaluated_every_epoch_and_saved(tiny_config, tmp_path):
    result = train(replace(tiny_config, epochs=2, ema_decay=0.5))
    run = tmp_path / "run"
    with open(run / "metrics.csv") as file:
        rows = list(csv.DictReader(file))
    assert all(0 <= float(row["ema_val_acc"]) <= 1 and float(row["ema_val_loss"]) > 0 for row in rows)
    averaged = torch.load(run / "ema.pt", weights_only=True)
    trained = result["model"].state_dict()
    assert averaged.keys() == trained.keys()
    assert any(not torch.equal(averaged[key], trained[key]) for key in averaged)
    assert main(["evaluate", "--weights", str(run / "ema.pt"), "--device", "cpu"]) == 0  # a plain state_dict


def test_the_saved_average_is_the_decay_folded_over_the_weights_of_every_step(tiny_config, tmp_path, monkeypatch):
    """Eight updates at --ema-decay 0.3: the warm-up (2/11, 3/12) gives way to the decay from the fourth on, so a
    decay that ignored --ema-decay would show."""
    steps = []  # the model's weights and BatchNorm statistics after each optimizer step, as training made them
    build = train_module.build_optimizer

    def recording(model, cfg, tricks):
        optimizer = build(model, cfg, tricks)
        snapshot = lambda *args: steps.append({k: v.clone() for k, v in model.state_dict().items()})  # noqa: E731
        optimizer.register_step_post_hook(snapshot)
        return optimizer

    monkeypatch.setattr(train_module, "build_optimizer", recording)
    train(replace(tiny_config, epochs=2, max_steps_per_epoch=4, ema_decay=0.3))
    assert len(steps) == 8
    expected = {key: value for key, value in steps[0].items() if value.is_floating_point()}  # copied at first
    for n, weights in enumerate(steps[1:], start=1):
        d = min(0.3, (1 + n) / (10 + n))
        expected = {key: d * expected[key] + (1 - d) * weights[key] for key in expected}
    averaged = torch.load(tmp_path / "run" / "ema.pt", weights_only=True)
    for key, value in expected.items():
        torch.testing.assert_close(averaged[key], value, rtol=1e-5, atol=1e-6, msg=key)


def test_the_logged_figures_of_the_average_are_those_of_ema_pt(tiny_config, image_folder, tmp_path):
    """evaluate on the saved average gives the figures the run logged for it: they were measured on the average."""
    cfg = replace(tiny_config, data=str(image_folder), image_size=32, batch_size=4, epochs=2, ema_decay=0.5)
    logged = train(cfg)["metrics"][-1]  # 6 validation images: two steps of 4 evaluate them all
    averaged = evaluate_run(str(tmp_path / "run" / "ema.pt"), torch.device("cpu"))
    assert averaged["val_loss"] == pytest.approx(logged["ema_val_loss"], rel=1e-5)
    assert averaged["val_acc"] == logged["ema_val_acc"] and evaluated_images(averaged) == 6
    assert logged["ema_val_loss"] != pytest.approx(logged["val_loss"], rel=1e-5)  # not the trained model's


def test_on_a_short_run_the_average_follows_the_training_instead_of_staying_at_the_start(tiny_config, monkeypatch):
    initial = {}
    build = train_module.build_model

    def keep_initial(*args):
        model = build(*args)
        initial.update({k: v.clone() for k, v in model.state_dict().items() if v.is_floating_point()})
        return model

    monkeypatch.setattr(train_module, "build_model", keep_initial)
    result = train(replace(tiny_config, epochs=2, max_steps_per_epoch=8, ema_decay=0.999))  # 16 updates
    trained = result["model"].state_dict()
    averaged = torch.load(tiny_config.output_dir + "/ema.pt", weights_only=True)

    def distance(a, b):
        return sum((a[key] - b[key]).norm() ** 2 for key in initial) ** 0.5

    assert distance(averaged, trained) < 0.5 * distance(initial, trained)


def test_decay_zero_turns_it_off(tiny_config, tmp_path):
    rows = train(replace(tiny_config, ema_decay=0.0))["metrics"]
    assert "ema_val_acc" not in rows[0] and not (tmp_path / "run" / "ema.pt").exists()


def test_a_bad_decay_is_refused(tiny_config):
    with pytest.raises(UserError, match="--ema-decay must be in"):
        replace(tiny_config, ema_decay=1.0)


def test_the_average_and_its_counter_live_where_the_model_does():
    """The counter sits beside the weights (CUDA in a GPU run: no host-device copy per update); the meta device
    stands in for a GPU here. Buffers are averaged too, and the decay is the one asked for."""
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)).to("meta")
    average = build_ema(model, 0.75)
    assert average.average.n_averaged.device.type == "meta" and average.decay == 0.75
    assert {tensor.device.type for tensor in average.average.module.state_dict().values()} == {"meta"}
    assert average.average.use_buffers is True
    assert build_ema(model, 0.0) is None


def test_the_decay_range_is_zero_included_to_one_excluded():
    assert TrainConfig(ema_decay=0.0).ema_decay == 0.0 and TrainConfig(ema_decay=0.9999).ema_decay == 0.9999
    for value in (-0.5, 1.0, 1.5):
        with pytest.raises(UserError) as raised:
            TrainConfig(ema_decay=value)
        assert str(raised.value) == f"--ema-decay must be in [0, 1), got {value}"
{% endif %}
