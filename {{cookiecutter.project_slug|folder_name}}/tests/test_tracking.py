{% if cookiecutter.tracker != "none" %}
{% set ckpt = cookiecutter.use_checkpointing %}
{% set tb = cookiecutter.tracker == "tensorboard" %}
{% set flag = cookiecutter.tracker %}
"""The experiment tracker: what a run logs (every figure of metrics.csv per epoch, the config, the final files),
{% if ckpt %}
that a resumed run logs into the same tracked run, and that a failing tracker never costs the training run.
{% else %}
and that a failing tracker never costs the training run.
{% endif %}
"""

import csv
{% if cookiecutter.tracker == "mlflow" %}
import dataclasses
{% endif %}
import errno
{% if cookiecutter.tracker in ("mlflow", "wandb") %}
import json
{% endif %}
{% if cookiecutter.tracker in ("tensorboard", "mlflow") %}
import os
{% endif %}
{% if cookiecutter.tracker == "mlflow" %}
import re
import subprocess
import sys
{% endif %}
{% if cookiecutter.tracker == "wandb" %}
import struct
{% endif %}
{% if tb %}
import threading
{% endif %}
{% if (tb and ckpt) or cookiecutter.tracker == "wandb" %}
import time
{% endif %}
from dataclasses import replace
from pathlib import Path

{% if cookiecutter.tracker == "mlflow" %}
import optuna
{% endif %}
import pytest
import torch
{% if cookiecutter.tracker == "wandb" %}
import wandb
{% endif %}
import yaml
{% if tb %}
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.summary.writer.record_writer import RecordWriter
from torch.utils.tensorboard import SummaryWriter
{% elif cookiecutter.tracker == "mlflow" %}
from mlflow import MlflowClient
{% else %}
from wandb.proto import wandb_internal_pb2
{% endif %}

{% if cookiecutter.tracker == "mlflow" %}
{% if cookiecutter.use_distributed %}
from {{ cookiecutter.package_name }}.cli import main
{% endif %}
from {{ cookiecutter.package_name }}.config import make_config
{% endif %}
from {{ cookiecutter.package_name }}.reports import tracking
{% if cookiecutter.tracker in ("mlflow", "wandb") %}
from {{ cookiecutter.package_name }}.training import train as train_module
{% endif %}
from {{ cookiecutter.package_name }}.training.train import train
{% if cookiecutter.tracker == "mlflow" %}
from {{ cookiecutter.package_name }}.training.tune import tune

EXPERIMENT = "{{ cookiecutter.project_slug | escaped }}"  # the project's experiment: --experiment's default
# what each epoch logs (metrics.csv's columns but the epoch), by the names the MLflow UI shows
METRICS = {"loss/train", "loss/val", "accuracy/train", "accuracy/val", "lr/base", "seconds"}
{% if cookiecutter.use_grad_clipping %}
METRICS |= {"grad_norm"}  # the mean gradient norm before clipping
{% endif %}
{% if cookiecutter.use_ema %}
METRICS |= {"loss/ema_val", "accuracy/ema_val"}
{% endif %}
{% if cookiecutter.task == "multi_label" %}
LABEL_FIGURES = {"map", "f1_micro", "f1_macro", "f1_samples", "precision_micro", "precision_macro", "recall_micro"}
LABEL_FIGURES |= {"recall_macro", "hamming_loss"}
METRICS |= {f"val_{name}" for name in LABEL_FIGURES}
{% if cookiecutter.use_ema %}
METRICS |= {f"ema_val_{name}" for name in LABEL_FIGURES}  # the average's too
{% endif %}
{% endif %}
{% endif %}


def metrics_csv(run: Path) -> list[dict]:
    with open(run / "metrics.csv", newline="") as file:
        return list(csv.DictReader(file))


def expected_history(run: Path) -> dict[str, list[tuple[int, float]]]:
    """metrics.csv as the tracker must hold it: per column but the epoch, (epoch, value) in order."""
    rows = metrics_csv(run)
    columns = [column for column in rows[0] if column != "epoch"]
    assert "val_acc" in columns and "lr" in columns and "seconds" in columns
    return {name_of(column): [(int(row["epoch"]), float(row[column])) for row in rows] for column in columns}


# metrics.csv's columns by the names the tracker shows, written here, not read from tracking.py
REPORTS = {{ '("per_class.csv",)' if cookiecutter.task == "multi_label" else '("confusion_matrix.csv", "per_class.csv")' }}  # a run's reports
NAMES = {"train_loss": "loss/train", "val_loss": "loss/val", "train_acc": "accuracy/train", "val_acc": "accuracy/val"}
{% if cookiecutter.use_ema %}
NAMES |= {"ema_val_loss": "loss/ema_val", "ema_val_acc": "accuracy/ema_val"}
{% endif %}


def name_of(column: str) -> str:
    if column.startswith("lr"):  # lr -> lr/base, lr[head] -> lr/head: every parameter group in one chart
        return "lr/" + (column[3:-1] if column.startswith("lr[") else "base")
    return NAMES.get(column, column)


def saved_config(run: Path) -> dict:
    config = yaml.safe_load((run / "config.yaml").read_text())
    del config["output_dir"]  # "." in the file: the folder it is in
    return config
{% if tb %}


def read_log(log_dir: Path) -> EventAccumulator:
    log = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    log.Reload()
    return log


def logged_history(run: Path) -> dict[str, list[tuple[int, float]]]:
    log = read_log(run / "tensorboard")
    tags = [tag for tag in log.Tags()["scalars"] if not tag.startswith("hparam/")]  # the best accuracy, at the end
    return {tag: [(event.step, event.value) for event in log.Scalars(tag)] for tag in tags}


def logged_config(run: Path) -> dict:
    content = read_log(run / "tensorboard").PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    return {key: getattr(value, value.WhichOneof("kind")) for key, value in hparams.items()}


def as_logged(config: dict) -> dict:
    """add_hparams takes numbers, strings and booleans: None and lists arrive as text."""
    return {key: value if isinstance(value, int | float | str | bool) else str(value) for key, value in config.items()}


@pytest.fixture
def tracked(tiny_config):
    return tiny_config
{% elif cookiecutter.tracker == "mlflow" %}


@pytest.fixture
def tracked(tiny_config, tmp_path):
    return replace(tiny_config, tracking_uri=str(tmp_path / "mlruns"))


def store(cfg) -> MlflowClient:
    return MlflowClient(f"sqlite:///{cfg.tracking_uri}/mlflow.db")


def runs_of(cfg) -> list:
    client = store(cfg)
    experiment = client.get_experiment_by_name(cfg.experiment)
    return client.search_runs([experiment.experiment_id]) if experiment else []


def the_run(cfg):
    runs = runs_of(cfg)
    assert len(runs) == 1, [run.info.run_name for run in runs]
    return runs[0]


def logged_history(cfg) -> dict[str, list[tuple[int, float]]]:
    client, run = store(cfg), the_run(cfg)
    return {
        name: [(metric.step, metric.value) for metric in client.get_metric_history(run.info.run_id, name)]
        for name in run.data.metrics
    }


def logged_config(cfg) -> dict:
    return the_run(cfg).data.params


def as_logged(config: dict) -> dict:
    """MLflow keeps parameters as text."""
    return {key: str(value) for key, value in config.items()}
{% else %}


@pytest.fixture
def tracked(tiny_config, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    return tiny_config


BLOCK = 32768  # W&B's run file is a LevelDB-style log: 32 KiB blocks of records, each 7 bytes of header and data


def records(path: Path):
    """The protobuf records of an offline run's .wandb file."""
    data, position, pieces = path.read_bytes(), 7, b""  # the file starts with a 7-byte header
    while position + 7 <= len(data):
        left = BLOCK - position % BLOCK
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if left < 7 or (length, kind) == (0, 0):  # padding to the end of the block
            position += left
            continue
        pieces += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            pieces = b""
            yield record


def offline_runs(run: Path) -> list[Path]:
    return sorted((run / "wandb").glob("offline-run-*/run-*.wandb"))


def logged(run: Path, kind: str) -> list:
    found = (record for path in offline_runs(run) for record in records(path))
    return [getattr(record, kind) for record in found if record.WhichOneof("record_type") == kind]


def logged_history(run: Path) -> dict[str, list[tuple[int, float]]]:
    history = {}
    for step in logged(run, "history"):
        items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in step.item}
        for name, value in items.items():
            if not name.startswith("_"):
                history.setdefault(name, []).append((step.step.num, value))
    return history


def logged_config(run: Path) -> dict:
    first = logged(run, "run")[0]
    return {item.key: json.loads(item.value_json) for item in first.config.update if item.key != "_wandb"}


def as_logged(config: dict) -> dict:
    return config
{% endif %}
{% if cookiecutter.tracker == "mlflow" %}


def store_of(cfg):
    return cfg  # the store its tracking_uri names
{% else %}


def store_of(cfg) -> Path:
    return Path(cfg.output_dir)  # the log is in the run folder
{% endif %}


def assert_history_is_metrics_csv(cfg) -> None:
    logged, expected = logged_history(store_of(cfg)), expected_history(Path(cfg.output_dir))
    assert sorted(logged) == sorted(expected)
    for name, points in expected.items():
        assert [step for step, _ in logged[name]] == [step for step, _ in points], name
        assert [value for _, value in logged[name]] == pytest.approx([value for _, value in points], rel=1e-5), name


def test_every_figure_of_metrics_csv_is_logged_at_its_epoch(tracked):
    train(replace(tracked, epochs=2))
    assert_history_is_metrics_csv(tracked)


def test_the_hyperparameters_are_the_saved_config(tracked):
    train(tracked)
    logged = logged_config(store_of(tracked))
    logged.pop("output_dir")  # the run folder's absolute path
    assert logged == as_logged(saved_config(Path(tracked.output_dir)))
{% if tb %}


def test_the_confusion_matrix_is_logged_every_epoch_with_plots(tracked):
    train(replace(tracked, epochs=2, plots=True))
    images = read_log(Path(tracked.output_dir) / "tensorboard").Images("confusion_matrix")
    assert [image.step for image in images] == [1, 2] and min(image.width for image in images) > 100


def test_no_plots_leaves_out_the_confusion_figure_only(tracked):
    train(tracked)  # plots=False
    log = read_log(Path(tracked.output_dir) / "tensorboard")
    assert "confusion_matrix" not in log.Tags()["images"] and log.Scalars("loss/train")
{% elif cookiecutter.tracker == "mlflow" %}


def test_the_weights_and_reports_are_the_runs_artifacts(tracked):
    train(tracked)
    run = the_run(tracked)
    names = {artifact.path for artifact in store(tracked).list_artifacts(run.info.run_id)}
    assert {"model.pt", "metrics.csv", "config.yaml", *REPORTS} <= names
{% if ckpt %}
    assert not {"last.pt", "best.pt"} & names  # checkpoints are not results
{% endif %}
    assert run.info.status == "FINISHED" and run.info.run_name == "run"  # named after the run folder
    assert Path(run.info.artifact_uri.removeprefix("file://")).is_relative_to(tracked.tracking_uri)
{% else %}


def test_the_weights_and_reports_are_the_runs_artifact(tracked):
    train(tracked)
    (artifact,) = logged(Path(tracked.output_dir), "artifact")
    names = {entry.path for entry in artifact.manifest.contents}
    assert {"model.pt", "metrics.csv", "config.yaml", *REPORTS} <= names
{% if ckpt %}
    assert not {"last.pt", "best.pt"} & names  # checkpoints are not results
{% endif %}
    (run,) = logged(Path(tracked.output_dir), "run")
    assert run.display_name == "run" and run.project == tracked.experiment  # named after the run folder
{% endif %}


def test_the_no_flag_logs_nothing(tracked):
    train(replace(tracked, {{ flag }}=False))
{% if cookiecutter.tracker == "mlflow" %}
    assert not Path(tracked.tracking_uri).exists()
{% else %}
    assert not (Path(tracked.output_dir) / "{{ flag }}").exists()
{% endif %}
{% if ckpt %}


{% if tb %}
def in_a_new_second() -> None:
    """TensorBoard names event files by the second, then by this process's count of writers, and reads them in name
    order: within one second a 10th writer's file comes before a 9th's. A real resume is a new process, later."""
    time.sleep(1 - time.time() % 1)


{% endif %}
def test_a_resumed_run_logs_into_the_same_tracked_run(tracked):
    train(replace(tracked, epochs=1))
{% if tb %}
    in_a_new_second()
{% endif %}
    train(replace(tracked, epochs=2, resume="auto"))
    assert_history_is_metrics_csv(tracked)  # one run (MLflow), one history of epochs 1 and 2
{% if cookiecutter.tracker == "wandb" %}
    first, second = logged(Path(tracked.output_dir), "run")  # offline, a resumed run gets a folder of its own
    assert second.run_id == first.run_id
{% elif cookiecutter.tracker == "mlflow" %}
    assert the_run(tracked).info.status == "FINISHED"
{% endif %}
{% if tb %}


def test_a_resumed_run_replaces_what_a_killed_run_logged_after_its_checkpoint(tracked):
    train(replace(tracked, epochs=1))
    in_a_new_second()
    with SummaryWriter(Path(tracked.output_dir) / "tensorboard") as killed:  # logged epoch 2, killed before saving it
        killed.add_scalar("loss/train", 99.0, 2)
    in_a_new_second()
    train(replace(tracked, epochs=2, resume="auto"))
    assert_history_is_metrics_csv(tracked)  # epoch 2 once: the resumed run's
{% endif %}
{% endif %}
{% if cookiecutter.tracker == "wandb" %}


def config_once_written(run: Path) -> dict:
    """The config in the offline run as soon as W&B's service process has written it (a moment after init)."""
    deadline = time.monotonic() + 120  # bounds a failure; success returns as soon as the record is there
    while not logged(run, "run") and time.monotonic() < deadline:
        time.sleep(0.05)
    return logged_config(run)
{% endif %}
{% if cookiecutter.tracker in ("mlflow", "wandb") %}


def test_a_run_is_tracked_with_its_config_from_its_start(tracked, monkeypatch):
    """A run killed in its first epoch shows in the tracker, with the config it ran with."""
    seen, first_epoch = [], train_module.train_one_epoch

    def looking_at_the_tracker(*args, **kwargs):
{% if cookiecutter.tracker == "mlflow" %}
        seen.append(the_run(tracked))  # what a run killed now leaves in the store
{% else %}
        seen.append(config_once_written(Path(tracked.output_dir)))  # what a run killed now leaves in its offline run
{% endif %}
        return first_epoch(*args, **kwargs)

    monkeypatch.setattr(train_module, "train_one_epoch", looking_at_the_tracker)
    train(tracked)
{% if cookiecutter.tracker == "mlflow" %}
    (run,) = seen
    assert run.info.status == "RUNNING" and run.info.run_name == "run"
    logged = dict(run.data.params)
{% else %}
    (logged,) = seen
{% endif %}
    logged.pop("output_dir")
    assert logged == as_logged(saved_config(Path(tracked.output_dir)))
{% endif %}
{% if cookiecutter.tracker == "mlflow" %}


@pytest.mark.parametrize(
    ("stop", "status", "why"),
    [
        (optuna.TrialPruned(), "KILLED", "pruned"),  # how tune stops a trial
        (SystemExit(143), "KILLED", "interrupted"),  # a signal stopped the run
        (RuntimeError("CUDA out of memory"), "FAILED", "RuntimeError: CUDA out of memory"),
    ],
)
def test_a_run_that_raises_ends_its_tracked_run_saying_why(tracked, stop, status, why):
    def after_epoch(rows):
        raise stop

    with pytest.raises(type(stop)):
        train(replace(tracked, epochs=2), after_epoch=after_epoch)
    run = the_run(tracked)
    assert run.info.status == status and run.data.tags["stopped"] == why and run.info.end_time
    assert [metric.step for metric in store(tracked).get_metric_history(run.info.run_id, "loss/train")] == [1]


def test_runs_in_one_store_are_each_a_tracked_run_of_the_projects_experiment(tracked, tmp_path):
    for name, epochs in (("first", 1), ("second", 2)):
        train(replace(tracked, epochs=epochs, output_dir=str(tmp_path / name)))
    client = store(tracked)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == ["first", "second"]
    for name, epochs in (("first", 1), ("second", 2)):
        run = runs[name]
        assert set(run.data.metrics) == METRICS and run.info.status == "FINISHED"
        assert run.data.params["output_dir"] == str(tmp_path / name)
        history = client.get_metric_history(run.info.run_id, "accuracy/val")
        assert [metric.step for metric in history] == list(range(1, epochs + 1))


@pytest.mark.parametrize("form", ["folder", "sqlite uri"])
def test_the_store_mlflow_tracking_uri_names_is_the_runs(tiny_config, tmp_path, monkeypatch, form):
    folder = tmp_path / "from-env"
    uri = str(folder) if form == "folder" else f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)  # where MLflow keeps an SQLite URI's artifacts: ./mlruns
    train(tiny_config)  # no --tracking-uri
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}" if form == "folder" else uri)
    (run,) = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    assert run.info.run_name == "run" and run.info.status == "FINISHED" and "accuracy/val" in run.data.metrics


TOGETHER = """
import json, sys, time
from pathlib import Path
from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.reports import tracking
from {{ cookiecutter.package_name }}.training.train import train

meeting, name, cfg = Path(sys.argv[1]), sys.argv[2], TrainConfig(**json.loads(sys.argv[3]))
start = tracking.Tracker.start


def together(self, first_epoch):
    (meeting / name).touch()
    while len(list(meeting.iterdir())) < 2:  # the other run is here too
        time.sleep(0.001)
    start(self, first_epoch)


tracking.Tracker.start = together
train(cfg)
"""


def test_two_runs_starting_together_in_a_new_store_are_both_tracked(tracked, tmp_path):
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(tracking.__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    runs = {}
    for name in ("one", "two"):  # both open the store at the same moment, before it exists
        cfg = json.dumps(dataclasses.asdict(replace(tracked, output_dir=str(tmp_path / name))))
        command = [sys.executable, "-c", TOGETHER, str(meeting), name, cfg]
        runs[name] = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for name, run in runs.items():
        err = run.communicate(timeout=300)[1]
        assert run.returncode == 0 and "MLflow failed" not in err, (name, err[-2000:])
    client = store(tracked)
    tracked_runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    assert sorted(run.info.run_name for run in tracked_runs) == ["one", "two"]
    assert all(run.info.status == "FINISHED" and set(run.data.metrics) == METRICS for run in tracked_runs)


def test_a_retrain_from_tunes_best_yaml_is_tracked_as_a_run_of_the_projects_experiment(tracked, tmp_path, monkeypatch):
    space = tmp_path / "space.yaml"
    space.write_text("lr: [0.05]\n")
    tune(replace(tracked, output_dir=str(tmp_path / "tune")), str(space), trials=1, timeout=None, startup_trials=5)
    monkeypatch.chdir(tmp_path)  # the retrain's run folder: runs/<date-time> here, as for any run
    train(make_config({}, str(tmp_path / "tune" / "best.yaml")))
    client = store(tracked)
    experiments = {experiment.name: experiment.experiment_id for experiment in client.search_experiments()}
    names = {name: [run.info.run_name for run in client.search_runs([id])] for name, id in experiments.items()}
    (retrain,) = names[EXPERIMENT]
    assert re.fullmatch(r"\d{8}-\d{6}", retrain) and (tmp_path / "runs" / retrain / "model.pt").is_file()
    assert names[f"{EXPERIMENT}-tune"] == ["trial-000"]  # the tune's trials, apart


def test_each_trial_of_a_tune_is_a_tracked_run_ended_as_the_trial_ended(tracked, tmp_path, monkeypatch):
    """Trial 0 completes, trial 1 is pruned after its first epoch (the pruner's answer forced: what is tested is what
    the store keeps of each trial)."""
    monkeypatch.setattr(optuna.trial.Trial, "should_prune", lambda trial: trial.number == 1)
    space = tmp_path / "space.yaml"
    space.write_text("lr: [0.05, 0.1]\n")
    searched = replace(tracked, model="small_cnn", epochs=2, output_dir=str(tmp_path / "tune"))
    tune(searched, str(space), trials=2, timeout=None, startup_trials=5)
    client = store(tracked)
    trials = client.get_experiment_by_name(f"{EXPERIMENT}-tune").experiment_id
    runs = {run.info.run_name: run for run in client.search_runs([trials])}
    assert sorted(runs) == ["trial-000", "trial-001"]
    for name, status, epochs in (("trial-000", "FINISHED", [1, 2]), ("trial-001", "KILLED", [1])):
        run = runs[name]
        history = client.get_metric_history(run.info.run_id, "accuracy/val")
        assert run.info.status == status and [metric.step for metric in history] == epochs, name
        saved = yaml.safe_load((tmp_path / "tune" / name / "config.yaml").read_text())
        assert run.data.params["lr"] == str(saved["lr"]), name
    assert runs["trial-001"].data.tags["stopped"] == "pruned"
{% if cookiecutter.use_distributed %}


def test_two_processes_make_one_tracked_run_with_every_epoch(tracked):
    args = ["train", "--device", "cpu", "--nproc", "2", "--epochs", "2", "--max-steps-per-epoch", "2", "--no-plots"]
    args += ["--batch-size", "8", "--num-workers", "0", "--output-dir", tracked.output_dir]
    assert main([*args, "--tracking-uri", tracked.tracking_uri]) == 0
    assert_history_is_metrics_csv(tracked)  # one run: rank 0's, epochs 1 and 2 once each
    run = the_run(tracked)
    assert run.info.run_name == "run" and run.info.status == "FINISHED" and set(run.data.metrics) == METRICS
{% endif %}
{% endif %}


{% if tb %}
WRITE = (SummaryWriter, "add_scalar")
{% elif cookiecutter.tracker == "mlflow" %}
WRITE = (MlflowClient, "log_batch")  # the parameters, then each epoch's figures
{% else %}
WRITE = (wandb.Run, "log")  # each epoch's figures
{% endif %}


def test_a_tracker_failing_on_its_third_call_leaves_the_same_training_run(tracked, monkeypatch, capfd):
    untracked = str(Path(tracked.output_dir).parent / "plain")
    plain = train(replace(tracked, epochs=3, {{ flag }}=False, output_dir=untracked))
    kind, name = WRITE
    calls, write = [], getattr(kind, name)

    def failing(*args, **kwargs):
        calls.append(name)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(*args, **kwargs)

    monkeypatch.setattr(kind, name, failing)
    capfd.readouterr()
    tracked_run = train(replace(tracked, epochs=3))
    err = capfd.readouterr().err
    assert len(calls) == 3  # nothing more once it failed
    failures = [line for line in err.splitlines() if "failed" in line]
    why = "OSError: [Errno 28] No space left on device"
    assert failures == [f"{tracking.NAME} failed ({why}); training goes on without it"] and "Traceback" not in err
    assert [row["val_acc"] for row in tracked_run["metrics"]] == [row["val_acc"] for row in plain["metrics"]]
    for key, value in plain["model"].state_dict().items():
        assert torch.equal(tracked_run["model"].state_dict()[key], value), key
{% if tb %}


def test_a_link_planted_in_place_of_the_log_folder_is_replaced(tracked, tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    run.mkdir()
    for marker in ("classes.txt", "answers.json"):  # the folder of a run that stopped before its first epoch
        (run / marker).write_text("")
    (run / "tensorboard").symlink_to(outside, target_is_directory=True)
    train(tracked)
    assert list(outside.iterdir()) == [] and not (run / "tensorboard").is_symlink()
    assert read_log(run / "tensorboard").Scalars("loss/train")


def test_a_full_disk_under_the_log_is_one_line_not_a_threads_traceback(tracked, monkeypatch, capfd):
    def full_disk(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RecordWriter, "write", full_disk)  # runs in TensorBoard's writer thread
    reported = []
    monkeypatch.setattr(tracking, "_report_thread_error", reported.append)
    monkeypatch.setattr(threading, "excepthook", tracking._quiet_writer_thread)  # pytest swaps in its own
    result = train(replace(tracked, epochs=2))
    assert len(result["metrics"]) == 2 and (Path(tracked.output_dir) / "model.pt").is_file()
    failures = [line for line in capfd.readouterr().err.splitlines() if "TensorBoard" in line]
    assert len(failures) == 1 and "No space left on device" in failures[0], failures
    assert reported == []  # the writer thread's error said once, by the main thread


def test_a_log_folder_whose_name_is_not_utf8_is_one_line_and_the_run_goes_on(tracked, tmp_path, capfd):
    out = tmp_path / os.fsdecode(b"caf\xe9")  # a Latin-1 name: Linux allows it, TensorBoard cannot encode it
    result = train(replace(tracked, output_dir=str(out)))
    assert result["metrics"] and (out / "model.pt").is_file()
    failures = [line for line in capfd.readouterr().err.splitlines() if "TensorBoard" in line]
    assert len(failures) == 1 and "UnicodeEncodeError" in failures[0], failures
{% endif %}
{% endif %}
