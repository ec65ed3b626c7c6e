{% set ckpt = cookiecutter.use_checkpointing %}
{% set ddp = cookiecutter.use_distributed %}
"""`tune`: hyper-parameter search with Optuna (`pip install -e ".[tune]"`).

Each trial is an ordinary training run in its own folder (trial-000, trial-001, ...) of the tune folder, so that
evaluate and plot work on it. TPE proposes the values of the search space (seeded: the same command searches the
same way); a trial whose MONITOR figure (reports/metrics.py) falls below the median of earlier trials at the same
epoch is pruned.
The study lives in study.db in the tune folder: the same command, run again after a crash or a kill, goes on where it
{% if ckpt %}
stopped, repeats no finished trial, and continues the trial that was running from its own last checkpoint.
{% else %}
stopped, repeats no finished trial, and trains the trial that was running again from its start.
{% endif %}
{% if ddp %}
Under torchrun (or --nproc) every trial trains in all processes: rank 0 runs the study, hands each trial's config to
the others and decides for all of them whether to prune.
{% endif %}
"""

{% if ddp %}
import contextlib
{% endif %}
import csv
import dataclasses
import io
{% if ddp and ckpt %}
import os
{% endif %}
import re
import shlex
{% if ckpt %}
import signal
import sys
{% endif %}
import time
from pathlib import Path
from urllib.parse import quote

import yaml

from ..config import SCRIPT, TrainConfig, saved_fields
{% if ddp %}
from ..core.distributed import broadcast, is_main, setup, world_size
{% endif %}
from ..core.errors import OutputError, TrainingDiverged, UserError, first_line, one_line
from ..core.files import LOCK_FILE, FileLock, cannot_write, hold, unlock, write_text
from ..core.runtime import check_device
from ..reports.metrics import MONITOR
from .search_space import RUN_WHERE, load_space, optuna_module
{% if ckpt %}
from .stop_signals import GracefulStop
{% endif %}
from .train import train

STUDY = "tune"  # the study's name in study.db


class _Pruning:
{% if ddp %}
    """Reports each epoch's MONITOR figure to the trial and stops the run when the pruner says so: rank 0
    reports and decides, every rank stops (the others have no trial)."""
{% else %}
    """Reports each epoch's MONITOR figure to the trial and stops the run when the pruner says so."""
{% endif %}

    def __init__(self, optuna, trial):
        self.optuna, self.trial, self.reported = optuna, trial, set()

    def __call__(self, rows: list[dict]) -> None:
{% if ddp %}
        if self.trial is None:  # a rank other than 0: rank 0's decision
            if broadcast(None):
                raise self.optuna.TrialPruned()
            return
{% endif %}
        for row in rows:  # a continued trial reports the epochs of its checkpoint too
            if row["epoch"] not in self.reported:
                self.trial.report(row[MONITOR], row["epoch"])
                self.reported.add(row["epoch"])
{% if ddp %}
        if broadcast(self.trial.should_prune()):
{% else %}
        if self.trial.should_prune():
{% endif %}
            raise self.optuna.TrialPruned()


def _lock(folder: Path) -> FileLock:
    """One tune per folder: a second one would run the same trials."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(folder, exc) from None
    lock = hold(folder)
    if lock is None:
        raise OutputError(f"another tune is running in {folder}; wait for it, or pick another --output-dir")
    return lock


def tune(base: TrainConfig, space_file: str, trials: int, timeout: float | None, startup_trials: int) -> dict:
    """Run trials until `trials` have finished (this and earlier runs of the command together) or `timeout`
    seconds have passed; write trials.csv and best.yaml into the tune folder and return them."""
    optuna = optuna_module()
    space = load_space(space_file)
    check_device(base.device, base.gpus)  # refused before the study is touched
{% if ddp %}
    setup(base.device, base.gpus, base.dist_timeout)  # once, for every trial: rank 0 hands them out through it
    _check_batch_sizes(space.get("batch_size"))
{% if ckpt %}
    os.environ.pop("TORCHELASTIC_RESTART_COUNT", None)  # a restarted tune continues its killed trial itself
{% endif %}
    if not is_main():
        return _follow(optuna)
{% endif %}
    folder = Path(base.output_dir or f"runs/tune-{Path(space_file).stem}").absolute()
    if folder.is_dir() and any(p.name != LOCK_FILE for p in folder.iterdir()) and not (folder / "study.db").is_file():
        raise OutputError(f"--output-dir {folder} holds files that no tune wrote; pick an empty or new folder")
    lock = _lock(folder)
    try:
        study = _open_study(optuna, folder, startup_trials, base, space)
        # seeded, and a search continued later does not replay the proposals it already made
        study.sampler = optuna.samplers.TPESampler(seed=base.seed + len(study.trials))
{% if ckpt %}
        stop = GracefulStop()  # a signal between trials or at the end; train() catches those that come during one
        with stop.caught():
            report = _search(optuna, study, space, base, folder, trials, timeout, stop)
        if stop:  # came as the last trial or the report was written, and let them finish
            name = signal.Signals(stop.signal).name
            print(f"{name} came as the search ended: its report is complete", file=sys.stderr)
        return report
{% else %}
        return _search(optuna, study, space, base, folder, trials, timeout)
{% endif %}
    finally:
        unlock(lock)


def _search(optuna, study, space, base, folder, trials, timeout{% if ckpt %}, stop{% endif %}) -> dict:
    """Trials until `trials` have finished (this and earlier runs of the command together) or `timeout` seconds have
    passed, then the report."""
    started = time.monotonic()
    while _finished(optuna, study) < trials and (timeout is None or time.monotonic() - started < timeout):
{% if ckpt %}
        _stop_between_trials(stop, folder)
{% endif %}
        _run_trial(optuna, study, space, base, folder)
{% if ddp %}
    broadcast(None)  # no more trials: the other ranks return
{% endif %}
    return _report(optuna, study, folder)


{% if ckpt %}
def _stop_between_trials(stop: GracefulStop, folder: Path) -> None:
    """A stop signal that came between two trials (or as one wrote its final files) ends the search there, before the
    next; one that comes as the next is set up stops it as it starts (train() takes the request on)."""
    if stop:
{% if ddp %}
        broadcast(None)  # the other ranks return too
{% endif %}
        again = "the same tune command continues the search"
        print(f"stopped by {signal.Signals(stop.signal).name} between trials in {folder}; {again}", file=sys.stderr)
        raise SystemExit(128 + stop.signal)


{% endif %}
def _open_study(optuna, folder: Path, startup_trials: int, base: TrainConfig, space: dict):
    """The study in study.db, checked against this command and with its killed trials queued again. A file that is
    no SQLite database (cut short, copied half) is one line naming it, not the database driver's traceback."""
    from sqlalchemy.exc import DatabaseError  # Optuna's storage

    path = folder / "study.db"
    try:
        study = optuna.create_study(
            storage=f"sqlite:///{quote(str(folder / 'study.db'))}",  # a ? or % in the path is the path's
            study_name=STUDY,
            direction="maximize",
            load_if_exists=True,
            pruner=optuna.pruners.MedianPruner(n_startup_trials=startup_trials),
        )
        trials = study.get_trials(deepcopy=False)
    except DatabaseError as exc:
        raise OutputError(
            f"{path} cannot be read as a study ({first_line(exc.orig or exc)}); put back a whole copy of it, "
            "or search anew in another --output-dir"
        ) from None
    # an emptied study.db opens as a new study, which would take the old trial folders' results for its own values
    ran = sorted(p.name for p in folder.glob("trial-*") if p.is_dir() and not p.is_symlink())
    if not trials and ran:
        raise OutputError(
            f"{path} holds no trials, but {folder} holds the folders of some ({ran[0]}, ...): the study was lost; "
            "put back a whole copy of study.db, or search anew in another --output-dir"
        )
    _check_same_search(study, base, space, folder)
    _continue_killed_trials(optuna, study)
    return study


{% if ddp %}
def _follow(optuna) -> dict:
    """A rank other than 0 trains each trial rank 0 hands out, until it hands out None."""
{% if ckpt %}
    with GracefulStop().caught():  # a stop signal between trials: rank 0 ends the search, says so, hands out None
        _follow_trials(optuna)
    return {}


def _follow_trials(optuna) -> None:
{% endif %}
    while (cfg := _next_trial()) is not None:
        # rank 0 tells the study; an error that stops the search stops rank 0, and _next_trial then says so
        with contextlib.suppress(optuna.TrialPruned, UserError):
            train(cfg, after_epoch=_Pruning(optuna, None))
{% if not ckpt %}
    return {}
{% endif %}


def _next_trial():
    try:
        return broadcast(None)
    except RuntimeError:  # rank 0 ended: a flag, the study or its folder, which it has explained
        raise UserError("rank 0 stopped the search; its message says why") from None


def _check_batch_sizes(distribution) -> None:
    """Under DDP --batch-size is global: every size searched must divide by the processes, or its trial stops."""
    if distribution is None:
        return
    sizes = list(getattr(distribution, "choices", ())) or [distribution.low, distribution.step]  # low + k step
    odd = [size for size in sizes if size % world_size()]
    if odd:
        raise UserError(
            f"search space: batch_size {odd[0]} (a choice, or the low or step of a range) must divide by the "
            f"{world_size()} processes"
        )


{% endif %}
def _check_same_search(study, base: TrainConfig, space: dict, folder: Path) -> None:
    """A tune folder holds one search: continued with other shared flags or another space, its trials would not
    compare (and a killed trial could not continue). Where and how fast trials run may change. The flags may change
    while no trial has counted (a shared flag fixed); the space not once a trial has been given values: Optuna keeps
    a parameter's choices for good, and a trial queued again keeps its values."""
    search = {
        "flags": {key: value for key, value in saved_fields(base).items() if key not in space and key not in RUN_WHERE},
        "space": {name: repr(distribution) for name, distribution in space.items()},
    }
    counted = [trial for trial in study.trials if not trial.user_attrs.get("stopped") and trial.state.name != "WAITING"]
    given = [trial for trial in study.trials if trial.params or "folder" in trial.user_attrs]  # by this command
    saved = study.user_attrs.get("search", search)  # none: nothing to compare with yet
    changed = [key for key in search["flags"] if counted and saved["flags"].get(key) != search["flags"][key]]
    changed += ["the search space"] if given and saved["space"] != search["space"] else []
    if changed:
        raise UserError(
            f"the search in {folder} ran with other settings (differs in: {', '.join(changed)}); "
            "give it the same flags and space, or pick another --output-dir"
        )
    study.set_user_attr("search", search)


def _continue_killed_trials(optuna, study) -> None:
    """A trial still RUNNING was killed with the tune that ran it (the folder lock rules out another tune): it is
    marked failed and queued again with the same values, into the same folder. One killed before it had a folder
    never started: it fails, and counts for nothing (the sampler proposes anew)."""
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        if "folder" not in trial.user_attrs:
            continue
        study.enqueue_trial(trial.params, user_attrs={"folder": trial.user_attrs["folder"], "continues": trial.number})


def _finished(optuna, study) -> int:
    done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
    trials = study.get_trials(deepcopy=False)
    continued = {trial.user_attrs["continues"] for trial in trials if "continues" in trial.user_attrs}
    stopped = {trial.number for trial in trials if trial.user_attrs.get("stopped") or "folder" not in trial.user_attrs}
    return sum(trial.state in done and trial.number not in continued | stopped for trial in trials)


def _run_trial(optuna, study, space: dict, base: TrainConfig, folder: Path) -> None:
    trial = study.ask(space)
    name = trial.user_attrs.get("folder") or f"trial-{trial.number:03d}"
    trial.set_user_attr("folder", name)
    out = folder / name
    if out.is_symlink():  # planted: a trial writes into its own folder, not wherever a link points
        out.unlink()
    if (out / "model.pt").is_file():  # trained to its end after tune was stopped: its result counts
        study.tell(trial, max(float(row[MONITOR]) for row in _metrics_rows(out / "metrics.csv")))
        return
    cfg = dataclasses.replace(base, **trial.params, output_dir=str(out))
{% if cookiecutter.tracker in ("mlflow", "wandb") %}
    cfg = dataclasses.replace(cfg, experiment=f"{base.experiment}-{folder.name}")  # the study's trials together
{% endif %}
{% if ckpt %}
    if (out / "last.pt").is_file():
        cfg = dataclasses.replace(cfg, resume="auto")  # a killed trial goes on from its checkpoint
    elif out.exists():
        cfg = dataclasses.replace(cfg, overwrite=True)  # killed before its first checkpoint: start it again
{% else %}
    if out.exists():
        cfg = dataclasses.replace(cfg, overwrite=True)  # a killed trial starts again
{% endif %}
    print(f"trial {trial.number} ({name}): {trial.params}")
{% if ddp %}
    broadcast(cfg)  # the other ranks train it too
{% endif %}
    try:
        result = train(cfg, after_epoch=_Pruning(optuna, trial))
    except optuna.TrialPruned:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        print(f"trial {trial.number} pruned")
    except UserError as exc:
        trial.set_user_attr("reason", one_line(exc))
        # a loss gone NaN, a batch larger than the data, a model name misspelt: this trial's values, which another
        # trial need not share; the search goes on
        if isinstance(exc, TrainingDiverged) or _about(exc, trial.params):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            print(f"trial {trial.number} failed: {one_line(exc)}")
            return
        # the data, a flag shared by every trial: fix it and run the same command again
        trial.set_user_attr("stopped", True)  # not one of --trials: it runs again, with its values, in its folder
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        study.enqueue_trial(trial.params, user_attrs={"folder": name, "continues": trial.number})
        raise
{% if ckpt %}
    except SystemExit:  # stopped by a signal, saved where it stood
        print("to go on with the search (and this trial), run the same tune command again", file=sys.stderr)
        raise
{% endif %}
    else:
        study.tell(trial, result[f"best_{MONITOR}"])


def _about(exc: UserError, params: dict) -> bool:
    """Whether an error is about the trial's own values: its message names a searched option (by its flag) or a
    text value the trial tried (an unknown model's name). Messages name the flags they are about."""
    message = one_line(exc)
    words = [f"--{name.replace('_', '-')}" for name in params]
    words += [value for value in params.values() if isinstance(value, str) and value]
    return any(re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", message) for word in words)


def _report(optuna, study, folder: Path) -> dict:
    """trials.csv (and the same table printed), and best.yaml: the best trial's config, for `train --config`. A
    trial's figure is its best epoch's, which need not be the epoch of its model.pt: `weights` names the file of that
    epoch in the trial's folder, if one holds it."""
    rows, trials = [], study.get_trials(deepcopy=False)
    successor = {trial.user_attrs["continues"]: trial.number for trial in trials if "continues" in trial.user_attrs}
    for trial in trials:
        name = trial.user_attrs.get("folder", "")
        ran = name and trial.number not in successor  # else its figures are its successor's
        epochs = _metrics_rows(folder / name / "metrics.csv") if ran else []
        row = {"number": trial.number, "state": trial.state.name, "folder": name}
        row |= {f"param_{key}": value for key, value in trial.params.items()}
        best_epoch, weights = _best_epoch(folder / name, epochs) if epochs else ("", "")
        row |= {f"best_{MONITOR}": max((float(r[MONITOR]) for r in epochs), default=""), "best_epoch": best_epoch}
        row |= {"epochs": len(epochs), "weights": weights}
        if not name:
            row["reason"] = "killed before it started"
        elif trial.number in successor:
            row["reason"] = trial.user_attrs.get("reason", f"stopped; continued as trial {successor[trial.number]}")
        else:
            row["reason"] = trial.user_attrs.get("reason", "")
        rows.append(row)
    table = io.StringIO()
    writer = csv.DictWriter(table, list(dict.fromkeys(key for row in rows for key in row)), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(folder / "trials.csv", table.getvalue())
    print(table.getvalue(), end="")
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    complete = [t for t in complete if (folder / t.user_attrs["folder"] / "config.yaml").is_file()]  # not deleted
    if not rows:
        raise UserError("no trial started before --timeout; give it more seconds")
    if not complete:
        raise UserError(f"no trial has completed (see {folder / 'trials.csv'}); widen the search space or the epochs")
    best = max(complete, key=lambda trial: trial.value)
    name = best.user_attrs["folder"]
    config = yaml.safe_load((folder / name / "config.yaml").read_text(encoding="utf-8"))
    del config["output_dir"]  # a new run folder, not the trial's
{% if cookiecutter.tracker in ("mlflow", "wandb") %}
    config["experiment"] = config["experiment"].removesuffix(f"-{folder.name}")  # the project's, not the trials'
{% endif %}
    row = next(row for row in rows if row["number"] == best.number)
    if row["weights"]:
        weights = f"its weights: {name}/{row['weights']}"
    else:
        weights = f"no file holds its weights: {name}/model.pt is epoch {row['epochs']}'s"
    said = f"trial {best.number} ({name}), {MONITOR} {best.value:.4f} at epoch {row['best_epoch']} ({weights})"
    write_text(folder / "best.yaml", f"# the config of {said}\n" + yaml.safe_dump(config, sort_keys=False))
    again = f"{SCRIPT} train --config {shlex.quote(str(folder / 'best.yaml'))}"
    print(f"best: {said}; train it again: {again}")
    return {"trials": rows, "best": folder / "best.yaml"}


def _best_epoch(run: Path, epochs: list[dict]) -> tuple[int, str]:
    """The first epoch of the best MONITOR figure, and the file in `run` that holds its weights ("" when none does)."""
    best = max(range(len(epochs)), key=lambda index: float(epochs[index][MONITOR]))  # the first of equals
{% if ckpt %}
    if (run / "best.pt").is_file():
        return int(epochs[best]["epoch"]), "best.pt"
{% endif %}
    last = best == len(epochs) - 1 and (run / "model.pt").is_file()  # model.pt: the weights after the last epoch
    return int(epochs[best]["epoch"]), "model.pt" if last else ""


def _metrics_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))
