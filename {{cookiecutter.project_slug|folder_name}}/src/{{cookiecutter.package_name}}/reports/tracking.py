{% if cookiecutter.tracker != "none" %}
{% set ckpt = cookiecutter.use_checkpointing %}
{% if cookiecutter.tracker == "tensorboard" %}
"""Experiment tracking with TensorBoard: `tensorboard --logdir runs` shows every run's curves side by side.

Rank 0 logs every figure of metrics.csv per epoch (and, with plots on, the confusion matrix), and at the end the
config as hyper-parameters with the best accuracy. A failure of the log is said in one line and the run goes on.
"""
{% elif cookiecutter.tracker == "mlflow" %}
"""Experiment tracking with MLflow: `mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db` shows every run's
curves side by side.

Rank 0 logs the config as parameters, every figure of metrics.csv per epoch, and at the end the weights and the
reports (confusion matrix included) as artifacts. A failure of the store is said in one line and the run goes on.
"""
{% else %}
"""Experiment tracking with Weights & Biases: offline by default (`wandb sync <output dir>/wandb/offline-run-*`
uploads a run later), online with WANDB_MODE=online.

Rank 0 logs the config, every figure of metrics.csv per epoch, and at the end the weights and the reports (confusion
matrix included) as an artifact. A failure of W&B is said in one line and the run goes on.
"""
{% endif %}

{% if cookiecutter.tracker == "mlflow" %}
import contextlib
{% endif %}
import functools
{% if cookiecutter.tracker == "mlflow" %}
import logging
{% endif %}
{% if cookiecutter.tracker != "tensorboard" %}
import os
{% endif %}
import sys
{% if cookiecutter.tracker == "tensorboard" %}
import threading
{% endif %}
{% if cookiecutter.tracker == "mlflow" %}
import time
import urllib.parse
{% endif %}
from pathlib import Path

{% if cookiecutter.tracker == "mlflow" %}
import filelock

{% endif %}
{% if cookiecutter.tracker == "tensorboard" %}
from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread
from torch.utils.tensorboard import SummaryWriter

{% endif %}
from ..config import saved_fields
from ..core.errors import first_line
{% if cookiecutter.tracker in ("tensorboard", "wandb") %}
from ..core.files import own_folder
{% endif %}
{% if cookiecutter.tracker != "mlflow" %}
from .metrics import MONITOR
{% endif %}
{% if cookiecutter.tracker == "tensorboard" and cookiecutter.task != "multi_label" %}
from .plots import confusion_figure
{% endif %}

{% if cookiecutter.tracker == "tensorboard" %}
NAME = "TensorBoard"
{% elif cookiecutter.tracker == "mlflow" %}
NAME = "MLflow"
{% else %}
NAME = "W&B"
{% endif %}
# metrics.csv column -> the tracker's name for it; names that share a prefix share a chart section
TAGS = {"train_loss": "loss/train", "val_loss": "loss/val", "train_acc": "accuracy/train", "val_acc": "accuracy/val"}
{% if cookiecutter.use_ema %}
TAGS |= {"ema_val_loss": "loss/ema_val", "ema_val_acc": "accuracy/ema_val"}  # beside the trained model's curves
{% endif %}


{% if cookiecutter.tracker == "mlflow" %}
def store_lock(uri: str):
    """Runs that start together take turns to open an SQLite store: two that both create a new one fail in its
    migrations ("duplicate column name"), and two that both create the experiment fail on its name."""
    if not uri.startswith("sqlite:///"):
        return contextlib.nullcontext()  # a tracking server orders its own writes
    # waits for another run's migrations (seconds); a lock never released is said in one line by `guarded`
    return filelock.FileLock(urllib.parse.unquote(uri.removeprefix("sqlite:///")) + ".lock", timeout=300)


{% endif %}
def tag(column: str) -> str:
    """Column to name: lr -> lr/base, lr[fc] -> lr/fc (one chart for every group), others as in TAGS."""
    if column == "lr":
        return "lr/base"
    if column.startswith("lr["):
        return "lr/" + column[3:-1]
    return TAGS.get(column, column)


def figures(row: dict) -> dict:
    """A metrics.csv row's figures by name: every column but the epoch (the step they are logged at)."""
    return {tag(column): value for column, value in row.items() if column != "epoch"}


{% if cookiecutter.tracker != "tensorboard" %}
def reports(out: Path) -> list[Path]:
    """The run folder's files logged at the end: the final weights and every report."""
    files = (path for path in sorted(out.iterdir()) if path.is_file() and not path.name.startswith("."))
{% if ckpt %}
    return [path for path in files if path.name not in ("last.pt", "best.pt")]  # checkpoints: model.pt is final
{% else %}
    return list(files)
{% endif %}


{% endif %}
def guarded(method):
    """A tracker never costs the training run: its first failure (a full disk, a server gone, any error of its
    library) is said in one line, and it logs nothing more."""

    @functools.wraps(method)
    def call(self, *args):
        if not self.on:
            return None
        try:
            return method(self, *args)
        except Exception as exc:  # noqa: BLE001 (whatever the library raises)
            self.on = False
            why = f"{type(exc).__name__}: {first_line(exc)}"
            print(f"{NAME} failed ({why}); training goes on without it", file=sys.stderr)
            return None

    return call


_STARTED: list["Tracker"] = []  # the trackers started by the train() calls under way, newest last


def ending_tracked_runs(function):
    """A train() that raises (a trial tune prunes, a stop by a signal, an error) ends the tracked runs it started,
    marked so (Tracker.stop): else they would show as running forever."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        started_before = len(_STARTED)
        try:
            return function(*args, **kwargs)
        except BaseException as exc:
            for tracker in _STARTED[started_before:]:
                tracker.stop(exc)
            raise
        finally:
            del _STARTED[started_before:]

    return call


def how_it_stopped(exc: BaseException) -> tuple[bool, str]:
    """Whether a run that raised failed, and why it ended in a few words: pruned, interrupted or the error."""
    optuna = sys.modules.get("optuna")  # only tune raises TrialPruned, and it has imported Optuna then
    if optuna is not None and isinstance(exc, optuna.TrialPruned):
        return False, "pruned"
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return False, "interrupted"  # by a signal, say: resumable
    return True, f"{type(exc).__name__}: {first_line(exc)}"
{% if cookiecutter.tracker == "tensorboard" %}


_report_thread_error = threading.excepthook


def _quiet_writer_thread(args) -> None:
    """TensorBoard writes its events file from a thread. A failed write (a full disk, say) reaches the main thread
    again at the next write or flush, which says it in one line: the thread's own traceback only adds noise."""
    if not isinstance(args.thread, _AsyncWriterThread):
        _report_thread_error(args)


threading.excepthook = _quiet_writer_thread
{% endif %}


class Tracker:
{% if cookiecutter.tracker == "tensorboard" and ckpt %}
    """Logs into <output dir>/tensorboard, from the first epoch logged on: a resumed run replaces what its killed
    predecessor logged after the checkpoint."""
{% elif cookiecutter.tracker == "tensorboard" %}
    """Logs into <output dir>/tensorboard, from the first epoch logged on."""
{% elif ckpt %}
    """One tracked run per run folder, named after it. Its id is kept in the checkpoints (state_dict), so that a
    resumed run logs into the same tracked run."""
{% else %}
    """One tracked run per run folder, named after it."""
{% endif %}

    def __init__(self, out: Path, cfg, on: bool):
        self.out, self.cfg, self.on = out, cfg, on
{% if cookiecutter.tracker == "tensorboard" %}
        self.writer = None
{% else %}
        self.run = None
        self.run_id: str | None = None
{% endif %}
{% if cookiecutter.tracker != "tensorboard" and ckpt %}

    def state_dict(self) -> dict:
        return {"run_id": self.run_id}

    def load_state_dict(self, state: dict) -> None:
        self.run_id = state["run_id"]
{% endif %}
{% if cookiecutter.tracker == "tensorboard" %}

    @guarded
    def start(self, first_epoch: int) -> None:
        _STARTED.append(self)
        # a planted link is replaced, not followed; events from the first epoch on (a killed run's) are dropped
        self.writer = SummaryWriter(own_folder(self.out / "tensorboard"), purge_step=first_epoch)

    @guarded
    def log_epoch(self, row: dict, val: dict, classes: list[str]) -> None:
        for name, value in figures(row).items():
            self.writer.add_scalar(name, value, row["epoch"])
{% if cookiecutter.task != "multi_label" %}
        if self.cfg.plots:  # drawing one costs about half a second per epoch
            figure = confusion_figure(val["confusion"].tolist(), classes)
            self.writer.add_figure("confusion_matrix", figure, row["epoch"])
{% endif %}
        self.writer.flush()  # visible now, and kept if the run is killed

    @guarded
    def finish(self, best: float) -> None:
        # add_hparams takes numbers, strings and booleans only
        hyperparameters = {
            key: value if isinstance(value, int | float | str | bool) else str(value)
            for key, value in saved_fields(self.cfg).items()
        }
        self.writer.add_hparams(hyperparameters, {f"hparam/best_{MONITOR}": best}, run_name=".")
        self.writer.close()

    @guarded
    def stop(self, exc: BaseException) -> None:
        self.writer.close()  # what was logged stays; TensorBoard has no state for a run
{% elif cookiecutter.tracker == "mlflow" %}

    @guarded
    def start(self, first_epoch: int) -> None:
        """The tracked run, with its parameters, from the start: a run killed in its first epoch shows too."""
        _STARTED.append(self)
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # offline: nothing leaves the machine
        # a tracking server that is down costs seconds, not MLflow's default of minutes of retries per request
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        from mlflow import MlflowClient
        from mlflow.entities import Param

        # not a line per database migration, nor a traceback per failed write: its errors reach `guarded` as exceptions
        # (set after the import, which sets the level of MLflow's logger itself)
        logging.getLogger("mlflow").setLevel(logging.CRITICAL)

        uri = self.cfg.tracking_uri
        if "://" not in uri:  # a folder: an SQLite store in it, the artifacts beside it
            uri = f"sqlite:///{urllib.parse.quote(str(Path(uri, 'mlflow.db')))}"  # a ? or # in a name stays in it
            Path(self.cfg.tracking_uri).mkdir(parents=True, exist_ok=True)
        with store_lock(uri):
            self.run = MlflowClient(uri)  # creates a new store
            experiment_id = None if self.run_id else self._experiment_id()
        if self.run_id:
            self.run.update_run(self.run_id, status="RUNNING")  # a run stopped by a signal was marked KILLED
            print(f"{NAME}: continuing run {self.run_id}")
            return
        self.run_id = self.run.create_run(experiment_id, run_name=self.out.name).info.run_id
        params = [Param(key, str(value)) for key, value in saved_fields(self.cfg).items()]
        self.run.log_batch(self.run_id, params=params)
        print(f"{NAME}: run {self.run_id} in {uri}, experiment {self.cfg.experiment}")

    def _experiment_id(self) -> str:
        experiment = self.run.get_experiment_by_name(self.cfg.experiment)
        if experiment is not None:
            return experiment.experiment_id
        artifacts = None if "://" in self.cfg.tracking_uri else Path(self.cfg.tracking_uri, "artifacts").as_uri()
        return self.run.create_experiment(self.cfg.experiment, artifact_location=artifacts)

    @guarded
    def log_epoch(self, row: dict, val: dict, classes: list[str]) -> None:
        from mlflow.entities import Metric

        now = int(1000 * time.time())
        metrics = [Metric(name, value, now, row["epoch"]) for name, value in figures(row).items()]
        self.run.log_batch(self.run_id, metrics=metrics)

    @guarded
    def finish(self, best: float) -> None:
        for path in reports(self.out):
            self.run.log_artifact(self.run_id, str(path))
        self.run.set_terminated(self.run_id, "FINISHED")

    @guarded
    def stop(self, exc: BaseException) -> None:
        failed, why = how_it_stopped(exc)
        self.run.set_tag(self.run_id, "stopped", why)
        self.run.set_terminated(self.run_id, "FAILED" if failed else "KILLED")
{% else %}

    @guarded
    def start(self, first_epoch: int) -> None:
        """The tracked run, with its config, from the start: a run killed in its first epoch shows too."""
        import wandb

        _STARTED.append(self)
        mode = None if "WANDB_MODE" in os.environ else "offline"  # offline unless asked otherwise
        own_folder(self.out / "wandb")  # a planted link is replaced, not followed
        self.run = wandb.init(
            project=self.cfg.experiment,
            name=self.out.name,
{% if ckpt %}
            id=self.run_id,
            resume="allow" if self.run_id else None,
{% endif %}
            config=saved_fields(self.cfg),
            dir=self.out,
            mode=mode,
            reinit="finish_previous",  # a run a pruned trial of tune left open is not continued by the next
            settings=wandb.Settings(console="off"),  # the run's own output stays as it is
        )
        self.run_id = self.run.id

    @guarded
    def log_epoch(self, row: dict, val: dict, classes: list[str]) -> None:
        self.run.log(figures(row), step=row["epoch"])

    @guarded
    def finish(self, best: float) -> None:
        import wandb

        self.run.summary[f"best_{MONITOR}"] = best
        artifact = wandb.Artifact(f"run-{self.run_id}", type="run-folder")
        for path in reports(self.out):
            artifact.add_file(str(path), policy="immutable")  # not a staged copy of every file in the home folder
        self.run.log_artifact(artifact)
        self.run.finish()
        wandb.teardown()  # its service process writes its logs into the run folder until stopped

    @guarded
    def stop(self, exc: BaseException) -> None:
        import wandb

        failed, why = how_it_stopped(exc)
        self.run.summary["stopped"] = why
        self.run.finish(exit_code=1 if failed else 0)  # W&B: failed, else finished
        wandb.teardown()
{% endif %}
{% endif %}
