{% set ckpt = cookiecutter.use_checkpointing %}
"""tune: a search that finishes, prunes a bad trial, goes on after a kill without repeating a finished trial, and
whose best.yaml trains the best trial again."""

import csv
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from conftest import listing

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.config import make_config
from {{ cookiecutter.package_name }}.core.errors import DataError, DeviceError, OutputError, UserError
from {{ cookiecutter.package_name }}.core.files import unlock
from {{ cookiecutter.package_name }}.reports.metrics import MONITOR
from {{ cookiecutter.package_name }}.training import tune as tune_module
from {{ cookiecutter.package_name }}.training.search_space import load_space
from {{ cookiecutter.package_name }}.training.train import train
from {{ cookiecutter.package_name }}.training.tune import STUDY, tune

BEST = f"best_{MONITOR}"  # trials.csv's column of a trial's best figure

PACKAGE = "{{ cookiecutter.package_name }}"


@pytest.fixture
def searched(tiny_config, tmp_path):
    """What every trial shares: two epochs of six steps of the built-in CNN, enough for a good learning rate to beat
    chance (whatever this render's default model)."""
    return replace(tiny_config, model="small_cnn", epochs=2, max_steps_per_epoch=6, output_dir=str(tmp_path / "tune"))


def space_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return str(path)


def new_study(folder: Path) -> optuna.Study:
    """The study a tune into `folder` opens, made beforehand to plant trials in it."""
    folder.mkdir(parents=True, exist_ok=True)
    return optuna.create_study(storage=f"sqlite:///{folder / 'study.db'}", study_name=STUDY, direction="maximize")


def trials_csv(folder: Path) -> list[dict]:
    with open(folder / "trials.csv", newline="") as file:
        return list(csv.DictReader(file))


def metrics(run: Path) -> list[dict]:
    with open(run / "metrics.csv", newline="") as file:
        return [{key: value for key, value in row.items() if key != "seconds"} for row in csv.DictReader(file)]


def test_a_three_trial_search_finishes_and_reports_every_trial(searched, tmp_path):
    space = space_file(tmp_path, "lr: {low: 0.01, high: 0.1, log: true}\n")
    result = tune(searched, space, trials=3, timeout=None, startup_trials=5)
    folder = Path(searched.output_dir)
    rows = trials_csv(folder)
    assert [(row["state"], row["epochs"], row["folder"]) for row in rows] == [
        ("COMPLETE", "2", f"trial-00{number}") for number in range(3)
    ]
    for row in rows:  # each trial an ordinary run with the values it was given
        run = folder / row["folder"]
        assert 0.01 <= float(row["param_lr"]) <= 0.1 and (run / "model.pt").is_file()
        assert yaml.safe_load((run / "config.yaml").read_text())["lr"] == float(row["param_lr"])
        assert float(row[BEST]) == max(float(epoch[MONITOR]) for epoch in metrics(run))
    assert len({row["param_lr"] for row in rows}) == 3  # three proposals
    best = max(rows, key=lambda row: float(row[BEST]))
    assert result["best"] == folder / "best.yaml"
    assert yaml.safe_load((folder / "best.yaml").read_text())["lr"] == float(best["param_lr"])


def test_the_same_seed_searches_the_same_way(searched, tmp_path):
    space = space_file(tmp_path, "lr: {low: 0.01, high: 0.1, log: true}\n")
    proposals = []
    for name in ("a", "b"):
        tune(replace(searched, epochs=1, output_dir=str(tmp_path / name)), space, 2, None, 5)
        proposals.append([row["param_lr"] for row in trials_csv(tmp_path / name)])
    assert proposals[0] == proposals[1]


def test_a_search_continued_by_a_second_tune_proposes_anew_and_reports_each_epoch_to_the_pruner(searched, tmp_path):
    space = space_file(tmp_path, "lr: {low: 0.01, high: 0.1, log: true}\n")
    cfg = replace(searched, epochs=2, max_steps_per_epoch=2)
    tune(cfg, space, 2, None, 5)
    tune(cfg, space, 3, None, 5)  # one more trial
    folder = Path(cfg.output_dir)
    trials = optuna.load_study(storage=f"sqlite:///{folder / 'study.db'}", study_name=STUDY).trials
    assert [trial.state.name for trial in trials] == ["COMPLETE"] * 3
    # what Optuna's TPE, seeded past the proposals already made and given the trials so far, proposes next
    sampler = optuna.samplers.TPESampler(seed=cfg.seed + 2)
    fresh = optuna.create_study(direction="maximize", sampler=sampler)
    fresh.add_trials(trials[:2])
    assert fresh.ask(load_space(space)).params == trials[2].params
    assert trials[2].params["lr"] not in (trials[0].params["lr"], trials[1].params["lr"])  # no proposal replayed
    for trial in trials:  # the pruner saw each epoch's MONITOR figure, as metrics.csv has it
        epochs = metrics(folder / trial.user_attrs["folder"])
        assert trial.intermediate_values == {int(epoch["epoch"]): float(epoch[MONITOR]) for epoch in epochs}


def test_a_trial_told_to_do_badly_is_pruned_at_its_first_epoch(searched, tmp_path):
    space = space_file(tmp_path, "lr: [0.05, 1.0e-9]\n")
    folder = Path(searched.output_dir)
    folder.mkdir()
    study = optuna.create_study(storage=f"sqlite:///{folder / 'study.db'}", study_name=STUDY, direction="maximize")
    for lr in (0.05, 0.05, 1.0e-9):  # two trials that learn, then one that cannot
        study.enqueue_trial({"lr": lr})
    tune(searched, space, trials=3, timeout=None, startup_trials=2)
    rows = trials_csv(folder)
    assert [(row["state"], row["epochs"]) for row in rows] == [("COMPLETE", "2"), ("COMPLETE", "2"), ("PRUNED", "1")]


{% if cookiecutter.use_distributed %}
def test_under_ddp_every_batch_size_searched_must_divide_by_the_processes(monkeypatch):
    monkeypatch.setattr(tune_module, "world_size", lambda: 2)
    tune_module._check_batch_sizes(optuna.distributions.IntDistribution(16, 64, step=8))
    for odd in (optuna.distributions.CategoricalDistribution([16, 15]), optuna.distributions.IntDistribution(15, 63)):
        with pytest.raises(UserError, match="batch_size 15 .* must divide by the 2 processes"):
            tune_module._check_batch_sizes(odd)


def test_a_rank_whose_rank_0_stopped_says_so_in_one_line(monkeypatch):
    def closed(_):
        raise RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer")

    monkeypatch.setattr(tune_module, "broadcast", closed)
    with pytest.raises(UserError, match="^rank 0 stopped the search; its message says why$"):
        tune_module._follow(optuna)


@pytest.mark.slow
def test_a_search_on_two_processes_prunes_with_rank_0s_decision_on_both(searched, tmp_path, capfd):
    """Rank 0 reports and decides; were the other rank not told, it would train on alone and the job would hang."""
    folder = Path(searched.output_dir)
    folder.mkdir()
    study = optuna.create_study(storage=f"sqlite:///{folder / 'study.db'}", study_name=STUDY, direction="maximize")
    for lr in (0.05, 0.05, 1.0e-9):  # two trials that learn, then one that cannot
        study.enqueue_trial({"lr": lr})
    command = ["tune", "--space", space_file(tmp_path, "lr: [0.05, 1.0e-9]\n"), "--trials", "3"]
    # a rank left waiting for a decision fails in 30 s: healthy ranks wait on each other for a few seconds at most
    command += ["--startup-trials", "2", "--nproc", "2", "--device", "cpu", "--dist-timeout", "30", "--no-plots"]
    command += ["--model", "small_cnn", "--epochs", "2", "--max-steps-per-epoch", "6", "--batch-size", "16"]
    assert main([*command, "--num-workers", "0", "--output-dir", str(folder)]) == 0
    assert capfd.readouterr().out.count("distributed: world size 2, backend gloo") == 1  # one group for all
    rows = trials_csv(folder)
    assert [(row["state"], row["epochs"]) for row in rows] == [("COMPLETE", "2"), ("COMPLETE", "2"), ("PRUNED", "1")]
    reported = optuna.load_study(storage=f"sqlite:///{folder / 'study.db'}", study_name=STUDY).trials
    assert [sorted(trial.intermediate_values) for trial in reported] == [[1, 2], [1, 2], [1]]  # once per epoch


{% endif %}
def test_train_config_best_yaml_reproduces_the_best_trials_metrics(searched, tmp_path, monkeypatch):
    space = space_file(tmp_path, "lr: {low: 0.01, high: 0.1}\nweight_decay: [0.0, 0.001]\n")
    tune(replace(searched, deterministic=True), space, 2, None, 5)
    folder = Path(searched.output_dir)
    best = max(trials_csv(folder), key=lambda row: float(row[BEST]))
    monkeypatch.chdir(tmp_path)
    again = train(make_config({}, str(folder / "best.yaml")))  # as `train --config best.yaml`: a new run folder
    assert Path(again["config"].output_dir).parent == tmp_path / "runs"
    assert metrics(Path(again["config"].output_dir)) == metrics(folder / best["folder"])


def test_the_search_space_shipped_with_the_project_is_valid():
    space = load_space(str(Path(__file__).parents[1] / "search_space.yaml"))
    assert {"lr", "weight_decay"} <= set(space)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "must map train options to a list of choices or a low/high range"),
        ("colour: [red]\n", "colour is no option a trial can vary"),
        ("output_dir: [a, b]\n", "output_dir is no option a trial can vary"),
        ("lr: 0.1\n", "lr must be a list of choices or a low/high range"),
        ("lr: {low: 0.1, high: 0.01}\n", "lr needs finite low < high"),
        ("lr: {low: 0, high: 1, log: true}\n", "lr needs finite low < high"),
        ("lr: {low: 0.01, high: x}\n", "lr must be a range"),
        ("epochs: {low: 1.5, high: 3}\n", "epochs takes whole numbers"),
        ("epochs: [0, 1]\n", "epochs: the choice 0 is not valid (--epochs must be at least 1, got 0)"),
        ("optimizer: [sgd, sgd]\n", "optimizer must list different choices"),
        ("optimizer: [sgd, rmsprop]\n", "optimizer: the choice 'rmsprop' is not valid"),
        ("lr: [0.1\n", "is not valid YAML text"),
        ("lr: {low: 0.01, high: 0.1, step: 0}\n", "a step a number between 0 and high - low"),
        ("lr: {low: 0.01, high: 0.1, step: 1.0}\n", "a step a number between 0 and high - low"),
        ("lr: {low: 0.01, high: 0.1, log: 'false'}\n", "log must be true or false"),
        ("lr: {low: 0.01, high: 0.1, step: 1.0e-300}\n", "lr: step 1e-300 is too small for 0.01 to 0.1; use a larger"),
        ("lr: [0.1]\nweight_decay: [0.0]\nlr: [0.2]\n", ": lr is given twice (lines 1 and 3); keep one"),
        ("lr: {low: 0.01, high: 0.1, low: 0.02}\n", ": low is given twice (line 1); keep one"),
        ("lr: {low: 0.01, high: 1.0e300}\n", "lr: high 1.0e300 is read as text, not a number; write it as 1.0e+300"),
        ("lr: [0.01, 1e-3]\n", "lr: the choice 1e-3 is read as text, not a number; write it as 1.0e-3"),
    ],
)
def test_a_bad_search_space_is_one_line(tmp_path, text, message):
    with pytest.raises(UserError) as raised:
        load_space(space_file(tmp_path, text))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_load_space_builds_optunas_own_distributions(tmp_path):
    text = "lr: {low: 0.001, high: 0.1, log: true}\nmomentum: {low: 0.5, high: 0.9, step: 0.1}\n"
    text += "epochs: {low: 2, high: 8, step: 3}\nbatch_size: {low: 8, high: 64, log: true}\n"
    text += "optimizer: [sgd, adamw]\nweight_decay: [0.0, 0.001]\n"
    assert load_space(space_file(tmp_path, text)) == {
        "lr": optuna.distributions.FloatDistribution(0.001, 0.1, log=True),
        "momentum": optuna.distributions.FloatDistribution(0.5, 0.9, step=0.1),
        "epochs": optuna.distributions.IntDistribution(2, 8, step=3),
        "batch_size": optuna.distributions.IntDistribution(8, 64, log=True),
        "optimizer": optuna.distributions.CategoricalDistribution(["sgd", "adamw"]),
        "weight_decay": optuna.distributions.CategoricalDistribution([0.0, 0.001]),
    }


def test_a_bad_flag_every_trial_shares_stops_the_search_and_costs_no_trial(searched, tmp_path):
    space = space_file(tmp_path, "lr: {low: 0.01, high: 0.1}\n")
    with pytest.raises(DataError):
        tune(replace(searched, data=str(tmp_path / "missing")), space, 1, None, 5)
    tune(searched, space, 1, None, 5)  # fixed: the same command goes on, with the trial still to run
    rows = trials_csv(Path(searched.output_dir))
    assert [(row["state"], row["folder"]) for row in rows] == [("FAIL", "trial-000"), ("COMPLETE", "trial-000")]
    assert rows[0]["param_lr"] == rows[1]["param_lr"] and rows[0]["epochs"] == "0"  # its values; figures: the run's


def test_a_trial_whose_own_values_cannot_run_fails_with_its_reason_and_the_search_goes_on(searched, tmp_path):
    """A batch larger than the data, a misspelt model, images too small for it: that trial's values, not the
    search's; every rerun retried them, and a space without them crashed in Optuna."""
    space = space_file(tmp_path, "batch_size: [16, 4096]\nmodel: [small_cnn, resnet81]\nimage_size: [2, 32]\n")
    folder = Path(searched.output_dir)
    study = new_study(folder)
    good = {"batch_size": 16, "model": "small_cnn", "image_size": 32}
    for bad in ({"batch_size": 4096}, {"model": "resnet81"}, {"image_size": 2}, {}):
        study.enqueue_trial(good | bad)
    tune(replace(searched, epochs=1), space, 4, None, 5)
    rows = trials_csv(folder)
    assert [row["state"] for row in rows] == ["FAIL", "FAIL", "FAIL", "COMPLETE"]
    assert re.fullmatch(r"--batch-size 4096 exceeds the \d+ training images; lower it", rows[0]["reason"])
    assert rows[1]["reason"].startswith("unknown model 'resnet81'") and "2 px images" in rows[2]["reason"]
    assert rows[3]["reason"] == "" and (folder / "trial-003" / "model.pt").is_file()
    tune(replace(searched, epochs=1), space, 4, None, 5)  # four finished: nothing runs again
    assert len(trials_csv(folder)) == 4
    fewer = tmp_path / "fewer.yaml"
    fewer.write_text("batch_size: [16]\nmodel: [small_cnn, resnet81]\nimage_size: [2, 32]\n")
    with pytest.raises(UserError, match=r"\(differs in: the search space\)"):  # not Optuna's ValueError
        tune(replace(searched, epochs=1), str(fewer), 5, None, 5)


def test_a_trial_whose_loss_diverges_fails_with_its_reason_and_the_search_goes_on(searched, tmp_path):
    space = space_file(tmp_path, "lr: [1.0e+10, 0.05]\n")
    study = new_study(Path(searched.output_dir))
    for lr in (1.0e10, 0.05):
        study.enqueue_trial({"lr": lr})
    tune(replace(searched, epochs=1), space, 2, None, 5)
    rows = trials_csv(Path(searched.output_dir))
    assert [(row["state"], row["epochs"], row["folder"]) for row in rows] == [
        ("FAIL", "0", "trial-000"),
        ("COMPLETE", "1", "trial-001"),
    ]
    assert re.match(r"epoch 1: the training loss became NaN or infinite at step \d+", rows[0]["reason"])


def test_a_tune_killed_before_its_trial_had_a_folder_goes_on_and_counts_that_trial_for_nothing(searched, tmp_path):
    """Killed between asking the study for a trial and naming the trial's folder: the next tune stopped on the
    missing folder, and the one after kept a phantom trial, counted among --trials."""
    space = space_file(tmp_path, "lr: [0.05]\n")
    folder = Path(searched.output_dir)
    new_study(folder).ask(load_space(space))  # RUNNING, with its values and no folder
    tune(replace(searched, epochs=1), space, 1, None, 5)
    tune(replace(searched, epochs=1), space, 1, None, 5)  # one trial finished: nothing more to run
    rows = trials_csv(folder)
    assert [(row["state"], row["folder"], row["epochs"], row["reason"]) for row in rows] == [
        ("FAIL", "", "0", "killed before it started"),
        ("COMPLETE", "trial-001", "1", ""),
    ]
    assert sorted(path.name for path in folder.iterdir() if path.is_dir()) == ["trial-001"]


{% if cookiecutter.use_checkpointing %}
def test_a_stop_signal_between_trials_ends_the_search_there_and_the_same_command_goes_on(
    searched, tmp_path, capsys, monkeypatch
):
    """Between two trials no run catches a signal: it once killed tune by its default action, without a word."""
    import signal

    space, folder = space_file(tmp_path, "lr: [0.05, 0.1]\n"), Path(searched.output_dir)
    run_trial, handler = tune_module._run_trial, signal.getsignal(signal.SIGTERM)

    def then_signalled(*args):
        run_trial(*args)
        os.kill(os.getpid(), signal.SIGTERM)  # as the first trial has ended

    monkeypatch.setattr(tune_module, "_run_trial", then_signalled)
    with pytest.raises(SystemExit) as stopped:
        tune(replace(searched, epochs=1), space, 3, None, 5)
    assert stopped.value.code == 128 + signal.SIGTERM
    said = f"stopped by SIGTERM between trials in {folder}; the same tune command continues the search"
    assert capsys.readouterr().err.splitlines()[-1] == said
    assert signal.getsignal(signal.SIGTERM) == handler
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{folder / 'study.db'}")
    assert [trial.state.name for trial in study.trials] == ["COMPLETE"]  # no trial after the signal
    monkeypatch.undo()
    tune(replace(searched, epochs=1), space, 3, None, 5)
    assert [row["state"] for row in trials_csv(folder)] == ["COMPLETE"] * 3  # the first kept, two more


def test_a_stop_signal_as_a_trial_is_set_up_stops_that_trial_before_its_first_step(searched, tmp_path, capsys):
    """Between tune's check and the trial's own handlers, the request is handed on: the trial does not train."""
    import signal

    from {{ cookiecutter.package_name }}.training import train as train_module

    space, folder = space_file(tmp_path, "lr: [0.05]\n"), Path(searched.output_dir)

    def signalled_train(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return train_module.train(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tune_module, "train", signalled_train)
        with pytest.raises(SystemExit) as stopped:
            tune(replace(searched, epochs=1), space, 2, None, 5)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert "stopped by SIGTERM: nothing was saved yet" in capsys.readouterr().err
    assert not (folder / "trial-000" / "metrics.csv").exists()  # not one step trained
    tune(replace(searched, epochs=1), space, 2, None, 5)
    assert [row["state"] for row in trials_csv(folder)][-2:] == ["COMPLETE", "COMPLETE"]


def test_a_stop_signal_as_the_last_trial_ends_lets_the_search_write_its_report(searched, tmp_path, capsys):
    import signal

    from {{ cookiecutter.package_name }}.training import train as train_module

    space = space_file(tmp_path, "lr: [0.05, 0.1]\n")
    save_results, calls = train_module._save_results, []

    def signalled_at_the_last(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return save_results(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train_module, "_save_results", signalled_at_the_last)
        result = tune(replace(searched, epochs=1), space, 2, None, 5)
    assert [row["state"] for row in result["trials"]] == ["COMPLETE", "COMPLETE"] and result["best"].is_file()
    assert "SIGTERM came as the search ended: its report is complete" in capsys.readouterr().err


{% endif %}
def test_a_study_db_cut_short_or_emptied_is_one_line_naming_it(searched, tmp_path):
    space = space_file(tmp_path, "lr: [0.05]\n")
    folder = Path(searched.output_dir)
    study = new_study(folder)
    for _ in range(3):
        study.tell(study.ask(load_space(space)), 0.5)
    (folder / "trial-000").mkdir()
    whole = (folder / "study.db").read_bytes()
    for cut, said in ((len(whole) // 2, "cannot be read as a study ("), (0, "holds no trials, but")):
        (folder / "study.db").write_bytes(whole[:cut])  # half copied; emptied (a new study would take trial-000's)
        with pytest.raises(OutputError) as raised:
            tune(searched, space, 1, None, 5)
        message = str(raised.value)
        assert message.startswith(f"{folder / 'study.db'} {said}") and "\n" not in message
    assert listing(folder) == ["study.db", "trial-000"]  # nothing trained


def test_the_table_and_best_yaml_name_the_file_with_the_best_epochs_weights(searched, tmp_path):
    """A trial's figure is its best epoch's; model.pt holds its last."""
    folder = Path(searched.output_dir)
{% if ckpt %}
    tune(replace(searched, epochs=3, max_steps_per_epoch=2), space_file(tmp_path, "lr: [0.3, 0.05]\n"), 2, None, 5)
    rows = trials_csv(folder)
    for row in rows:
        epochs = [float(epoch[MONITOR]) for epoch in metrics(folder / row["folder"])]
        kept = torch.load(folder / row["folder"] / "best.pt", weights_only=True)["epoch"]  # what best.pt holds
        assert int(row["best_epoch"]) == epochs.index(max(epochs)) + 1 == kept and row["weights"] == "best.pt"
    best = max(rows, key=lambda row: float(row[BEST]))
    name, epoch = best["folder"], best["best_epoch"]
    said = f"{MONITOR} {float(best[BEST]):.4f} at epoch {epoch} (its weights: {name}/best.pt)"
{% else %}
    space = space_file(tmp_path, "lr: [0.03]\n")
    study = new_study(folder)
    study.ask(load_space(space)).set_user_attr("folder", "trial-000")  # stopped, and trained to its end by hand
    train(replace(searched, lr=0.03, output_dir=str(folder / "trial-000")))
    with open(folder / "trial-000" / "metrics.csv", newline="") as file:
        epochs = list(csv.DictReader(file))
    epochs[0][MONITOR] = str(float(epochs[1][MONITOR]) + 0.25)  # its first epoch the better one
    with open(folder / "trial-000" / "metrics.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, list(epochs[0]))
        writer.writeheader()
        writer.writerows(epochs)
    tune(searched, space, 1, None, 5)
    best = trials_csv(folder)[1]
    assert (best["best_epoch"], best["epochs"], best["weights"]) == ("1", "2", "")  # model.pt: epoch 2's
    name = "trial-000"
    kept = f"no file holds its weights: {name}/model.pt is epoch 2's"
    said = f"{MONITOR} {float(epochs[0][MONITOR]):.4f} at epoch 1 ({kept})"
{% endif %}
    header = (folder / "best.yaml").read_text().splitlines()[0]
    assert header == f"# the config of trial {best['number']} ({name}), {said}"


def test_tune_help_and_the_readme_name_the_same_default_tune_folder(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # no line broken inside the name
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    default = "runs/tune-<space file name>"
    assert f"the tune folder (auto: {default})" in capsys.readouterr().out
    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    assert f"(default `{default}`)" in readme


def test_a_tune_folder_named_with_url_characters_holds_its_own_study(searched, tmp_path, capsys):
    folder = tmp_path / "q?x %41 sp"  # a ? ended the database path, a % was decoded, a space broke the command
    tune(replace(searched, epochs=1, output_dir=str(folder)), space_file(tmp_path, "lr: [0.05]\n"), 1, None, 5)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["q?x %41 sp", "space.yaml"]
    assert (folder / "study.db").is_file()
    script = "{{ cookiecutter.project_slug }}"
    assert f"train it again: {script} train --config '{folder / 'best.yaml'}'\n" in capsys.readouterr().out


def test_a_timeout_before_any_trial_says_so(searched, tmp_path):
    with pytest.raises(UserError, match="no trial started before --timeout; give it more seconds"):
        tune(searched, space_file(tmp_path, "lr: [0.05]\n"), 1, 1e-9, 5)


def test_a_link_planted_as_a_trial_folder_is_replaced_not_followed(fingerprint, searched, tmp_path):
    victim = train(replace(searched, output_dir=str(tmp_path / "victim")))["weights"]
    before = fingerprint(victim)
    folder = Path(searched.output_dir)
    folder.mkdir()
    optuna.create_study(storage=f"sqlite:///{folder / 'study.db'}", study_name=STUDY, direction="maximize")
    (folder / "trial-000").symlink_to(victim.parent, target_is_directory=True)
    tune(searched, space_file(tmp_path, "lr: [0.02]\n"), 1, None, 5)
    assert fingerprint(victim) == before and not (folder / "trial-000").is_symlink()
    assert (folder / "trial-000" / "model.pt").is_file()


def test_a_trial_finished_outside_a_stopped_tune_counts_as_it_is(searched, tmp_path):
    """Stopped (SIGTERM) mid-trial, the trial trained to its end by hand: the next tune takes its result."""
    space = space_file(tmp_path, "lr: [0.03]\n")
    folder = Path(searched.output_dir)
    folder.mkdir()
    study = optuna.create_study(storage=f"sqlite:///{folder / 'study.db'}", study_name=STUDY, direction="maximize")
    running = study.ask(load_space(space))  # the trial the stopped tune was running
    running.set_user_attr("folder", "trial-000")
    weights = train(replace(searched, lr=0.03, output_dir=str(folder / "trial-000")))["weights"]
    trained = weights.stat().st_mtime_ns
    tune(searched, space, 1, None, 5)
    rows = trials_csv(folder)
    assert [(row["state"], row["folder"]) for row in rows] == [("FAIL", "trial-000"), ("COMPLETE", "trial-000")]
    assert weights.stat().st_mtime_ns == trained  # not trained again
    recorded = optuna.load_study(storage=f"sqlite:///{folder / 'study.db'}", study_name=STUDY).trials[1].value
    assert recorded == max(float(epoch[MONITOR]) for epoch in metrics(folder / "trial-000"))
    assert rows[0]["reason"] == "stopped; continued as trial 1"


def test_a_search_continued_with_other_flags_or_another_space_is_refused(searched, tmp_path):
    space = space_file(tmp_path, "lr: [0.05, 0.02]\n")
    tune(replace(searched, epochs=1), space, 1, None, 5)
    with pytest.raises(UserError, match=r"ran with other settings \(differs in: epochs\)"):
        tune(searched, space, 2, None, 5)
    other = tmp_path / "other.yaml"
    other.write_text("lr: [0.05, 0.03]\n")
    with pytest.raises(UserError, match=r"\(differs in: the search space\)"):
        tune(replace(searched, epochs=1), str(other), 2, None, 5)
    tune(replace(searched, epochs=1, num_workers=1), space, 2, None, 5)  # where and how fast it runs may change
    assert len(trials_csv(Path(searched.output_dir))) == 2


def test_tune_without_optuna_names_the_extra(monkeypatch, tmp_path, searched):
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(UserError, match=r'tune needs Optuna: pip install -e "\.\[tune\]"'):
        tune(searched, space_file(tmp_path, "lr: [0.1]\n"), 1, None, 5)


def test_a_second_tune_into_the_same_folder_is_refused(searched, tmp_path):
    folder = Path(searched.output_dir)
    holder = tune_module._lock(folder)  # a tune running there
    try:
        with pytest.raises(OutputError, match="another tune is running in"):
            tune(searched, space_file(tmp_path, "lr: [0.1]\n"), 1, None, 5)
    finally:
        unlock(holder)
    assert not (folder / "study.db").exists()


def test_a_device_this_machine_lacks_is_refused_before_the_tune_folder_is_touched(searched, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: None)  # none here
    with pytest.raises(DeviceError, match="^--device xpu was asked for but this machine has none"):
        tune(replace(searched, device="xpu"), space_file(tmp_path, "lr: [0.1]\n"), 1, None, 5)
    assert not Path(searched.output_dir).exists()  # no lock, no study


def test_a_folder_of_other_files_is_refused(searched, tmp_path):
    folder = Path(searched.output_dir)
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="holds files that no tune wrote"):
        tune(searched, space_file(tmp_path, "lr: [0.1]\n"), 1, None, 5)
    assert sorted(path.name for path in folder.iterdir()) == ["notes.txt"]


def trial_sections(output: str) -> dict[str, list[int]]:
    """The epochs each trial trained in a tune's output: folder -> epoch numbers printed after its "trial" line."""
    sections, current = {}, None
    for line in output.splitlines():
        if line.startswith("trial ") and " (trial-" in line:
            current = line.split("(")[1].split(")")[0]
            sections.setdefault(current, [])
        elif current and line.startswith("epoch ") and line[6:7].isdigit():
            sections[current].append(int(line.split()[1]))
    return sections


@pytest.mark.slow
def test_a_killed_tune_repeats_no_finished_trial_and_continues_the_killed_one(tmp_path):
    folder, epochs = tmp_path / "tune", 8
    command = [sys.executable, "-m", PACKAGE, "tune", "--space", space_file(tmp_path, "lr: {low: 0.01, high: 0.1}\n")]
    command += ["--trials", "3", "--epochs", str(epochs), "--max-steps-per-epoch", "2", "--batch-size", "16"]
    command += ["--model", "small_cnn", "--device", "cpu", "--no-plots", "--output-dir", str(folder)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src"), "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = folder / "trial-001"
{% if ckpt %}
    sign = killed / "last.pt"  # its first epoch saved
{% else %}
    sign = killed / "metrics.csv"  # its first epoch done
{% endif %}
    deadline = time.monotonic() + 240
    while not sign.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    first.kill()
    before = first.communicate()[0]
    assert sign.exists() and not (killed / "model.pt").exists(), before[-3000:]  # killed mid-trial
{% if ckpt %}
    done = len(metrics(killed))  # the epochs of its checkpoint
{% endif %}
    finished = (folder / "trial-000" / "model.pt").stat().st_mtime_ns

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    trained = trial_sections(again.stdout)
    assert "trial-000" not in trained and (folder / "trial-000" / "model.pt").stat().st_mtime_ns == finished
{% if ckpt %}
    assert trained["trial-001"] == list(range(done + 1, epochs + 1))  # from its checkpoint, not from the start
    assert f"resumed from {killed / 'last.pt'} after epoch {done}" in again.stdout
{% else %}
    assert trained["trial-001"] == list(range(1, epochs + 1))  # without checkpoints, trained again from its start
{% endif %}
    assert trained["trial-003"] == list(range(1, epochs + 1))  # the next trial, under its own number
    rows = trials_csv(folder)
    assert [(row["state"], row["folder"]) for row in rows] == [
        ("COMPLETE", "trial-000"),
        ("FAIL", "trial-001"),  # the killed one, continued by the next
        ("COMPLETE", "trial-001"),
        ("COMPLETE", "trial-003"),
    ]
    assert [len(metrics(folder / f"trial-00{number}")) for number in (0, 1, 3)] == [epochs] * 3
