{% if cookiecutter.use_swa %}
import copy
import itertools
import re
from dataclasses import replace

import pytest
import torch
import yaml
from torch.optim.swa_utils import SWALR, AveragedModel, update_bn

{% if cookiecutter.use_checkpointing %}
from {{ cookiecutter.package_name }}.cli import main
{% endif %}
from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.errors import UserError
from {{ cookiecutter.package_name }}.data.loaders import build_data, start_epoch
from {{ cookiecutter.package_name }}.reports.metrics import MONITOR
from {{ cookiecutter.package_name }}.serving.inference import evaluate_run
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.train import train

CPU = torch.device("cpu")


def test_swa_pt_is_torchs_average_of_the_epochs_weights_with_batchnorm_recomputed(
    tiny_config, image_folder, monkeypatch, capsys
):
    """torch's own AveragedModel, fed the weights after epochs 2 and 3, and update_bn on the training data, give
    swa.pt; the line the run prints gives swa.pt's validation figures."""
    models, build = [], train_module.build_model
    monkeypatch.setattr(train_module, "build_model", lambda *args: models.append(build(*args)) or models[-1])
    after_each_epoch = []
    cfg = replace(tiny_config, data=str(image_folder), image_size=32, batch_size=4, num_workers=0, epochs=3)
    result = train(
        replace(cfg, swa_start=2),
        after_epoch=lambda rows: after_each_epoch.append(copy.deepcopy(models[0].state_dict())),
    )
    reference = AveragedModel(copy.deepcopy(result["model"]))
    for state in after_each_epoch[1:]:  # epochs 2 and 3
        result["model"].load_state_dict(state)
        reference.update_parameters(result["model"])
    data = build_data(result["config"], CPU)
    start_epoch(data.train, 0)  # the pass the run measured BatchNorm on: its own order, no epoch's
    update_bn(itertools.islice(data.train, cfg.max_steps_per_epoch), reference)
    saved = torch.load(tiny_config.output_dir + "/swa.pt", weights_only=True)
    expected = reference.module.state_dict()
    assert saved.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(saved[key], value, rtol=1e-6, atol=1e-7, msg=key)
    trained = torch.load(tiny_config.output_dir + "/model.pt", weights_only=True)
    statistics = [key for key in saved if key.endswith("running_mean")]
    assert statistics and all(not torch.equal(saved[key], trained[key]) for key in statistics)  # recomputed
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("SWA "))
    said = re.fullmatch(rf"SWA val_loss (\S+)  {MONITOR} (\S+) \(weights of epochs 2 to 3 averaged\)", line)
    loss, figure = map(float, said.groups())
    figures = evaluate_run(tiny_config.output_dir + "/swa.pt", CPU)  # all 6 validation images, as in the run
    assert figures["val_loss"] == pytest.approx(loss, rel=1e-3) and figures[MONITOR] == pytest.approx(figure, abs=1e-4)


def test_the_learning_rates_are_those_of_torchs_swalr_taking_over_the_schedule(tiny_config):
    """The schedule halves the rate each epoch; from --swa-start on SWALR anneals it to --swa-lr (cosine, over
    --swa-anneal-epochs), as torch's own SWALR does in the loop of its documentation."""
    cfg = replace(tiny_config, epochs=7, lr=0.1, scheduler="step", step_size=1, gamma=0.5, warmup_epochs=0)
    rows = train(replace(cfg, swa_start=3, swa_lr=0.02, swa_anneal_epochs=2))["metrics"]
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=0.1)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    swa_schedule = SWALR(optimizer, swa_lr=0.02, anneal_epochs=2, anneal_strategy="cos")
    expected = []
    for epoch in range(1, 8):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        (swa_schedule if epoch >= 3 else schedule).step()
    assert [row["lr"] for row in rows] == pytest.approx(expected, rel=1e-9)
{% if cookiecutter.use_checkpointing %}


class Stopped(Exception):
    pass


def test_a_resumed_run_saves_the_same_average(tiny_config, tmp_path, fingerprint, capsys):
    cfg = replace(tiny_config, epochs=4, swa_start=2)
    train(replace(cfg, output_dir=str(tmp_path / "whole")))

    def stop_after_epoch_3(rows):
        if len(rows) == 3:  # after the average took in epoch 3
            raise Stopped

    with pytest.raises(Stopped):
        train(replace(cfg, output_dir=str(tmp_path / "cut")), after_epoch=stop_after_epoch_3)
    assert not (tmp_path / "cut" / "swa.pt").exists()
    capsys.readouterr()
    train(replace(cfg, output_dir=str(tmp_path / "cut"), resume="auto"))
    trained = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("epoch ")]
    assert trained == ["4"]  # resumed after epoch 3, not trained again from the start
    assert fingerprint(tmp_path / "cut" / "swa.pt") == fingerprint(tmp_path / "whole" / "swa.pt")


def test_a_run_saved_before_the_project_had_swa_resumes_with_it_off(tiny_config, tmp_path, capsys):
    """`cruft update` switched the trick on later: the run's config.yaml and checkpoint have no swa_* keys."""
    run = tmp_path / "run"
    train(replace(tiny_config, epochs=1, swa_start=0))
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({k: v for k, v in config.items() if not k.startswith("swa_")}))
    for name in ("last.pt", "best.pt"):
        state = torch.load(run / name, weights_only=True)
        state["config"] = {k: v for k, v in state["config"].items() if not k.startswith("swa_")}
        torch.save(state, run / name)
    capsys.readouterr()
    assert main(["train", "--resume", "auto", "--output-dir", str(run), "--epochs", "2"]) == 0
    assert "resumed from" in capsys.readouterr().out and not (run / "swa.pt").exists()
    assert yaml.safe_load((run / "config.yaml").read_text())["swa_start"] == 0
{% endif %}
{% if cookiecutter.use_freezing %}


def test_frozen_batchnorm_layers_keep_their_statistics_in_the_average(tiny_config, tmp_path):
    train(replace(tiny_config, epochs=2, swa_start=1, freeze=["features.0"]))
    saved, trained = (torch.load(tmp_path / "run" / name, weights_only=True) for name in ("swa.pt", "model.pt"))
    frozen = [key for key in saved if key.startswith("features.0.") and "running" in key]
    assert frozen and all(torch.equal(saved[key], trained[key]) for key in frozen)
    recomputed = [key for key in saved if key.startswith("features.2.") and "running_mean" in key]
    assert recomputed and not any(torch.equal(saved[key], trained[key]) for key in recomputed)
{% endif %}


def test_the_automatic_start_is_saved_and_the_last_line_names_swa_pt(tiny_config, tmp_path, capsys):
    train(replace(tiny_config, epochs=5))
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["swa_start"] == 4
    assert f"SWA: {tmp_path / 'run' / 'swa.pt'}; " in capsys.readouterr().out.splitlines()[-1]


@pytest.mark.parametrize(("epochs", "averaged"), [(12, "epochs 10 to 12"), (5, "epochs 4 to 5"), (1, "epoch 1")])
def test_by_default_the_average_takes_the_last_quarter_or_the_last_epoch(tiny_config, epochs, averaged, capsys):
    train(replace(tiny_config, epochs=epochs))
    assert f"(weights of {averaged} averaged)" in capsys.readouterr().out


def test_swa_start_0_turns_it_off(tiny_config, tmp_path, capsys):
    train(replace(tiny_config, swa_start=0))
    assert "SWA" not in capsys.readouterr().out and not (tmp_path / "run" / "swa.pt").exists()


def test_an_average_of_no_epoch_is_one_line_and_no_file(tiny_config, tmp_path, capsys):
    train(replace(tiny_config, epochs=2, swa_start=3))
    said = [line for line in capsys.readouterr().out.splitlines() if "SWA" in line]
    assert said == ["SWA: the run trained no epoch from --swa-start 3 on (it ended with epoch 2); no swa.pt"]
    assert not (tmp_path / "run" / "swa.pt").exists()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"swa_start": -1}, "--swa-start must be an epoch (0 turns SWA off), got -1"),
        ({"swa_anneal_epochs": 0}, "--swa-anneal-epochs must be at least 1, got 0"),
        ({"swa_lr": 0.0}, "--swa-lr must be a positive number, got 0.0"),
        ({"swa_lr": float("inf")}, "--swa-lr must be a positive number, got inf"),
    ],
)
def test_bad_values_are_one_line(values, message):
    with pytest.raises(UserError) as raised:
        TrainConfig(**values)
    assert str(raised.value) == message
{% endif %}
