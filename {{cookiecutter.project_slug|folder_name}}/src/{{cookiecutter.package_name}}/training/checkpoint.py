{% if cookiecutter.use_checkpointing %}
"""Checkpoints: `last.pt` every epoch and, with --checkpoint-every or on a stop signal, in the middle of one;
`best.pt` by validation accuracy; and exact resume from either.

A checkpoint holds plain data only (tensors, numbers, strings, lists, dicts), so `torch.load(...,
weights_only=True)` reads it and no code is ever unpickled. Files are written to a temporary name and
renamed, so a crash mid-write leaves the previous checkpoint intact.
"""

import contextlib
import csv
import dataclasses
import functools
import io
import random
import shlex
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ..core import files
from ..core.config import CHECKPOINT_EVERY, RESUME_MAY_CHANGE, saved_fields
{% if cookiecutter.use_distributed %}
from ..core.distributed import Agreement, barrier, gather, is_distributed, is_main, rank, world_size
{% endif %}
from ..core.errors import ModelError, OutputError, first_line, load_failure, state_dict_mismatch
from ..core.run_folder import refuse_if_busy
from ..core.runtime import STOP_SIGNALS
from ..data.pipeline import start_epoch
from ..reports.metrics import stopped_early
from .engine import Progress

# the console script, as the stop message tells the user to run it
SCRIPT = "{{ cookiecutter.project_slug }}"
RESUME_FROM = "resume from the last.pt or best.pt of a run"
FITTING = "resume with the flags the run was trained with, or start anew from its weights with --init-from"
REPEAT_SECONDS = 1.0  # the same signal again within this: the same request (a second one later stops at once)
_STOPS: list["GracefulStop"] = []  # the stop requests being caught (GracefulStop.caught), innermost last
CHANGES = "changes.csv"  # what resumes changed, from which epoch and step: config.yaml holds the latest values
CHANGES_COLUMNS = ["epoch", "step", "setting", "before", "after"]


def rng_state(loader_generator: torch.Generator) -> dict:
    """Every random stream a run draws from; dropping any one of them breaks bitwise resume."""
    _, keys, position, has_gauss, gauss = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": torch.from_numpy(keys.astype(np.int64)),  # numpy's own state is refused by weights_only
        "numpy_rest": [int(position), int(has_gauss), float(gauss)],
        "python": random.getstate(),
        "loader": loader_generator.get_state(),
    }
    accelerator = _started_accelerator()
    if accelerator is not None:  # its state on the device the run trains on, whatever else is visible
        state[accelerator.type] = torch.get_device_module(accelerator).get_rng_state()
    return state


def _started_accelerator() -> torch.device | None:
    """The accelerator (cuda, xpu, ...) this process has started, else None: asking starts none, so a CPU run keeps
    no accelerator state. MPS, which has no lazy start, counts as started wherever it is available."""
    found = torch.accelerator.current_accelerator()  # what torch was built for; does not start it
    if found is None:
        return None
    module = torch.get_device_module(found)
    started = getattr(module, "is_initialized", module.is_available)  # MPS has no lazy start
    return found if started() else None


def restore_rng(state: dict, loader_generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    position, has_gauss, gauss = state["numpy_rest"]
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), position, has_gauss, gauss))
    random.setstate(state["python"])
    loader_generator.set_state(state["loader"])
    accelerator = _started_accelerator()
    if accelerator is not None and accelerator.type in state:
        torch.get_device_module(accelerator).set_rng_state(state[accelerator.type])


def save_checkpoints(
    out: Path, stateful: dict, loader, metrics: list[dict], cfg, progress: Progress | None = None, changes=()
):
    """last.pt after an epoch, or in the middle of one with the epoch's `progress` (and no best.pt then); with the
    `changes` resumes made to the config, which changes.csv then shows."""
    rng = rng_state(loader.order)
    if progress:  # the generator as the epoch started: the resumed epoch draws the same order, then skips its start
        rng["loader"] = loader.sampler.epoch_start
    own = {"rng": rng, "progress": progress and _on_cpu(dataclasses.asdict(progress))}
{% if cookiecutter.use_distributed %}
    every = gather(own)  # each rank's own random streams and sums; rank 0 writes them all
    if is_main():
        _write(out, stateful, every, metrics, cfg, changes)
    barrier()  # the files are complete when this returns: any rank may read them afterwards
{% else %}
    _write(out, stateful, [own], metrics, cfg, changes)
{% endif %}


def _write(out: Path, stateful: dict, ranks: list[dict], metrics: list[dict], cfg, changes: list[dict]) -> None:
    """Write last.pt; after an epoch, make it best.pt too when that epoch has the best validation accuracy so far.
    The checkpoint holds the history of changes (a resume into a new folder carries it); changes.csv is written
    from it afterwards, whole (a kill in between leaves it to the next checkpoint)."""
    state = {name: _on_cpu(obj.state_dict()) for name, obj in stateful.items()}  # loads on any machine
    rng = [own["rng"] for own in ranks]
    state |= {"epoch": len(metrics), "metrics": metrics, "rng": rng, "config": saved_fields(cfg), "changes": changes}
    mid_epoch = ranks[0]["progress"] is not None
    if mid_epoch:
        state["progress"] = [own["progress"] for own in ranks]
    files.save(state, out / "last.pt")
    if not mid_epoch and metrics[-1]["val_acc"] > max((row["val_acc"] for row in metrics[:-1]), default=-1.0):
        files.share(out / "last.pt", out / "best.pt")  # one file under two names: not written twice
    if changes:
        table = io.StringIO()
        writer = csv.DictWriter(table, CHANGES_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(changes)
        try:
            files.write_text(out / CHANGES, table.getvalue())  # a planted link is replaced, not followed
        except OSError as exc:
            raise files.cannot_write(out / CHANGES, exc) from None


def _on_cpu(state):
    """A copy of a state_dict's tensors on the CPU, nested dicts and lists included."""
    if isinstance(state, torch.Tensor):
        return state.cpu()
    if isinstance(state, dict):
        return {key: _on_cpu(value) for key, value in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_on_cpu(value) for value in state)
    return state


class ClassNames:
    """The class names, kept in every checkpoint: resumed onto data whose classes changed (a folder renamed, added
    or removed), every class would go on training under another one's index."""

    def __init__(self, names: list[str]):
        self.names = list(names)

    def state_dict(self) -> dict:
        return {"names": self.names}

    def load_state_dict(self, state: dict) -> None:
        if state["names"] != self.names:
            raise ModelError(
                f"the checkpoint was trained on the classes {state['names']}, but the data has {self.names}; "
                "restore the data's classes, or train into a new --output-dir"
            )


def load_checkpoint(path: Path) -> dict:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ModelError(f"checkpoint {path} does not exist; check --resume") from None
    except Exception as exc:  # noqa: BLE001 (a cut-short or foreign file raises all kinds: OSError, KeyError, ...)
        raise ModelError(f"checkpoint {path} cannot be read ({load_failure(exc)})") from None
    if not isinstance(state, dict) or "epoch" not in state:
        weights = isinstance(state, dict) and all(isinstance(key, str) for key in state)
        what = "weights without training state" if weights else f"a {type(state).__name__}"
        raise ModelError(f"{path} is no checkpoint ({what}); {RESUME_FROM}")
    if type(state["epoch"]) is not int or state["epoch"] < 0:
        raise ModelError(f"{path} has no usable epoch; {RESUME_FROM}")
    return state


def find_checkpoint(resume: str | None, out: Path, quiet: bool = False) -> tuple[Path, dict] | None:
    """`--resume PATH` as given; `--resume auto`: the loadable checkpoint of the latest epoch in the output dir.
    Returns the path and its loaded contents."""
    if resume != "auto":
        return (Path(resume), load_checkpoint(Path(resume))) if resume else None
    latest = None
    for path in (out / "best.pt", out / "last.pt"):  # last wins a tie
        if not path.is_file():
            continue
        try:
            state = load_checkpoint(path)
        except ModelError as exc:  # a write cut short, say: the other one may still serve
            print(f"skipping {exc}")
            continue
        if latest is None or state["epoch"] >= latest[1]["epoch"]:
            latest = path, state
    if latest is None and not quiet and not (out / "model.pt").exists():  # a finished run: check_continuation says
        print(f"no checkpoint in {out}: starting from scratch")
    return latest


def _holds_checkpoints(out: Path) -> bool:
    return any(candidate.is_file() for candidate in out.glob("*.pt"))  # a dangling link is no checkpoint


def check_continuation(out: Path, found: tuple[Path, dict] | None, cfg) -> None:
    """Before anything is written: a run folder is only ever continued from its own newest checkpoint, and a
    finished run only with more --epochs; another run's checkpoint never takes over a folder (--overwrite replaces
    it), and a checkpoint is never cut back to fewer epochs than it holds, nor resumed with none left to train."""
    try:
        _check_continuation(out, found, cfg)
    except OutputError:
        refuse_if_busy(out)  # a live run writing there is the reason to give
        raise


def _check_continuation(out: Path, found: tuple[Path, dict] | None, cfg) -> None:
    if (out / CHANGES).is_dir() and not (out / CHANGES).is_symlink() and not cfg.overwrite:
        raise OutputError(f"{out / CHANGES} is a folder, where the run keeps its changes; move it away")
    finished = (out / "model.pt").exists()
    if found is None:
        if cfg.overwrite:
            return
        if finished and cfg.resume == "auto":
            unreadable = any((out / name).is_file() for name in ("last.pt", "best.pt"))
            lacks = "checkpoints that can be read" if unreadable else "last.pt or best.pt"
            raise OutputError(
                f"{out} holds a finished run but no {lacks} to continue it from; "
                "pass --overwrite to replace it, or another --output-dir"
            )
        if finished:
            raise OutputError(
                f"{out} holds a finished run; pass --resume auto with more --epochs to continue it, "
                "--overwrite to replace it, or another --output-dir"
            )
        if _holds_checkpoints(out):
            raise OutputError(
                f"{out} holds an unfinished run; pass --resume auto to continue it, "
                "--overwrite to replace it, or another --output-dir"
            )
        return
    path, state = found
    own = path.resolve().parent == out.resolve() and not cfg.overwrite
    _refuse_if_done(path, state, cfg, ended=finished or not own)
    if not own:
        if not cfg.overwrite and (finished or _holds_checkpoints(out)):
            raise OutputError(f"{out} holds another run; continue {path} into an empty --output-dir or its own folder")
        return
    newest = find_checkpoint("auto", out, quiet=True) if cfg.resume != "auto" else found
    if newest and _reached(state) < _reached(newest[1]):
        raise OutputError(
            f"{path} is epoch {state['epoch']} but {out} went on to epoch {_begun(newest[1])}; "
            f"continue from {newest[0]}, or pass --overwrite to branch off here"
        )
    if finished and state["epoch"] < (recorded := _epochs_recorded(out)):  # its newer checkpoint cannot be read
        raise OutputError(
            f"{path} is epoch {state['epoch']} but {out} went on to epoch {recorded} (its metrics.csv); "
            "pass --overwrite to branch off here, or another --output-dir"
        )


def _epochs_recorded(out: Path) -> int:
    try:
        return len((out / "metrics.csv").read_text(encoding="utf-8").splitlines()) - 1
    except (OSError, UnicodeDecodeError):
        return 0


def _reached(state: dict) -> tuple[int, bool]:
    return state["epoch"], "progress" in state


def _begun(state: dict) -> int:
    return state["epoch"] + ("progress" in state)  # a mid-epoch checkpoint is partway through the next epoch


def _refuse_if_done(path: Path, state: dict, cfg, ended: bool) -> None:
    """Never fewer --epochs than a checkpoint holds, nor none left to train where its run has ended: a finished
    run, a run into a new folder (it would hold a model.pt alone) or one that --overwrite clears. The final weights
    would be of epochs that config.yaml and metrics.csv do not hold."""
    least = _begun(state) + (ended and "progress" not in state)
    if cfg.epochs < least:
        what = f"is partway through epoch {least}" if "progress" in state else f"is the end of epoch {state['epoch']}"
        raise OutputError(f"{path} {what}; pass --epochs {least} or more to continue it")
    if ended and "progress" not in state and _stopped_early(state, cfg.patience):
        raise OutputError(
            f"{path} stopped early after epoch {state['epoch']} (--patience {cfg.patience}); "
            "pass a larger --patience to continue it"
        )


def _stopped_early(state: dict, patience: int) -> bool:
    try:
        return stopped_early(state["metrics"], patience)
    except (KeyError, TypeError):  # a hand-made checkpoint: resume() names what it lacks
        return False


def resume(found: tuple[Path, dict] | None, stateful: dict, loader_generator, cfg) -> tuple[list[dict], list[dict]]:
    """Restore every stateful object and RNG stream; return the metrics rows of the epochs already done, and the
    changes made to the config by the resumes so far, this one's (resume_changes) last."""
    if found is None:
        return [], []
    path, state = found
    # what a run of this train writes, of the kind it writes: a hand-made or foreign file is refused here, in one line
    kinds = {"config": dict, "metrics": list, "rng": list, **dict.fromkeys(stateful, dict)}
    unusable = [key for key, kind in kinds.items() if not isinstance(state.get(key), kind)]
    if "metrics" not in unusable and state["epoch"] != len(state["metrics"]):  # one row per epoch done
        unusable.append("metrics")
    mid_epoch = "progress" in state
    if mid_epoch and not _usable_progress(state["progress"]):
        unusable.append("progress")
    history = state.get("changes", [])  # none in a checkpoint of a run never changed
    if not isinstance(history, list) or any(not isinstance(row, dict) or [*row] != CHANGES_COLUMNS for row in history):
        unusable.append("changes")
    if unusable:
        raise ModelError(f"{path} has no usable {', '.join(unusable)}; {RESUME_FROM}")
    changes = resume_changes(path, state, cfg)
    processes = len(state["progress"]) if mid_epoch else None
{% if cookiecutter.use_distributed %}
    if processes and processes != world_size():  # each process's share of the epoch's images depends on their number
{% else %}
    if processes and processes != 1:  # each process's share of the epoch's images depends on their number
{% endif %}
        raise ModelError(f"{path} was saved mid-epoch by {processes} processes: resume it with {processes} processes")
    for name, obj in stateful.items():
        try:
            obj.load_state_dict(state[name])
        except (AttributeError, IndexError, KeyError, RuntimeError, TypeError, ValueError) as exc:
            why = state_dict_mismatch(exc) if name == "model" else first_line(exc)
            raise ModelError(f"{path}: the saved {name} does not fit this run ({why}); {FITTING}") from None
    # The LR of the next epoch, from the schedule: `--epochs` may have changed since the checkpoint.
    scheduler, optimizer = stateful["scheduler"], stateful["optimizer"]
    for group, base_lr, factor in zip(optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True):
        group["lr"] = base_lr * factor(scheduler.last_epoch)
{% if cookiecutter.use_distributed %}
    index = rank() if rank() < len(state["rng"]) else 0
    if index != rank():
        print(f"{path} was written by {len(state['rng'])} processes: random streams continue from rank 0's")
{% else %}
    index = 0
{% endif %}
    try:
        restore_rng(state["rng"][index], loader_generator)
    except (AttributeError, IndexError, KeyError, RuntimeError, TypeError, ValueError) as exc:
        raise ModelError(f"{path}: its random streams cannot be restored ({first_line(exc)}); {RESUME_FROM}") from None
    print(f"resumed from {path} {_position(state)}")
    if changes:
        said = ", ".join(f"{change['setting']} {change['before']} -> {change['after']}" for change in changes)
        print(f"changed from step {changes[0]['step']} of epoch {changes[0]['epoch']} on: {said} (see {CHANGES})")
    return state["metrics"], history + changes


def resume_changes(path: Path, state: dict, cfg) -> list[dict]:
    """The saved settings this resume changes, each a row of changes.csv (from which epoch and step, before, after).
    Only RESUME_MAY_CHANGE may change (not the epoch's length mid-epoch); any other is refused in one line, naming
    each with its two values: the checkpoint's weights, optimizer state and metrics were made with the saved ones."""
    saved, now = state["config"], saved_fields(cfg)
    mid_epoch = "progress" in state
    may_change = RESUME_MAY_CHANGE - ({"max_steps_per_epoch"} if mid_epoch else set())
    changed = [name for name, value in now.items() if saved.get(name) != value and name != "split"]
    # the split is its images: the run's own split.csv is the same split wherever its folder has gone
    before = _split_held(saved.get("split"), saved.get("output_dir"), path.parent)
    if before != _split_held(now["split"], now["output_dir"], Path(now["output_dir"] or path.parent)):
        changed.append("split")
    kept = [f"{name} {_shown(saved.get(name))}, now {_shown(now[name])}" for name in changed if name not in may_change]
    if kept:
        where = "" if (path.parent / "config.yaml").is_file() else "; with no config.yaml beside it, give its flags"
        raise ModelError(
            f"{path} was written by a different run or with settings a resume keeps (differs in: {'; '.join(kept)})"
            f"; put them back, or start a new run in another --output-dir{where}"
        )
    epoch, step = state["epoch"] + 1, (state["progress"][0]["step"] + 1 if mid_epoch else 1)
    return [
        {"epoch": epoch, "step": step, "setting": name, "before": _shown(saved.get(name)), "after": _shown(now[name])}
        for name in changed
    ]


def _split_held(split: str | None, run_folder: str | None, folder_now: Path) -> list | str | None:
    """What a split names: the rows of its file, in any order (none: the data's own split). A run's own split.csv,
    named or not (None), is read where its folder is now, and so is a named file that is gone: the run kept a copy."""
    own = folder_now / "split.csv"
    named = [] if split is None or (run_folder and Path(split) == Path(run_folder, "split.csv")) else [Path(split)]
    for path in [*named, own]:
        try:
            with open(path, newline="", encoding="utf-8") as file:
                return sorted(map(tuple, csv.reader(file)))
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError, csv.Error):
            return str(path)
    return None


def _shown(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def _position(state: dict) -> str:
    if "progress" in state:
        return f"at step {state['progress'][0]['step']} of epoch {state['epoch'] + 1}"
    return f"after epoch {state['epoch']}"


def _usable_progress(progress) -> bool:
    """A list of one entry per process, each with every sum of an epoch's Progress and a step count."""
    fields = {field.name for field in dataclasses.fields(Progress)}
    return (
        isinstance(progress, list)
        and bool(progress)
        and all(isinstance(own, dict) and own.keys() == fields for own in progress)
        and all(all(torch.is_tensor(value) or type(value) is int for value in own.values()) for own in progress)
        and all(type(own["step"]) is int and own["step"] > 0 for own in progress)
    )


def resumed_progress(found: tuple[Path, dict] | None, device: torch.device) -> Progress | None:
    """Where the epoch that a mid-epoch checkpoint stopped in stands, on this process (resume() checked it); None
    after a whole epoch."""
    if found is None or "progress" not in found[1]:
        return None
{% if cookiecutter.use_distributed %}
    saved = found[1]["progress"][rank()]
{% else %}
    saved = found[1]["progress"][0]
{% endif %}
    return Progress(**{key: value.to(device) if torch.is_tensor(value) else value for key, value in saved.items()})


class Checkpoints:
    """The checkpoints of a run: after each epoch, and in the middle of one every --checkpoint-every (optimizer steps
    or minutes) and at the step a stop signal arrives. A mid-epoch checkpoint is written after an optimizer step, so
    a signal inside a group of --accumulate-steps batches lets the group finish first."""

    def __init__(self, out: Path, stateful: dict, loader, metrics: list[dict], cfg, resumed: Progress | None, changes):
        self.out, self.stateful, self.loader, self.metrics, self.cfg = out, stateful, loader, metrics, cfg
        self.changes = changes  # every resume's so far: each checkpoint holds them, changes.csv shows them
        self.stop = _STOPS[-1] if _STOPS else GracefulStop()  # train()'s: a signal as it started stops it at once
        self.resumed, self.saved, self.stopped = resumed, None, False
        every = CHECKPOINT_EVERY.fullmatch(str(cfg.checkpoint_every)) if cfg.checkpoint_every else None
        count, minutes = every.groups() if every else (None, None)
        self.every_steps = int(count) if count and not minutes else None
        self.every_seconds = int(count) * 60 if minutes else None
        self.steps, self.clock, self.due = 0, time.monotonic(), False
{% if cookiecutter.use_distributed %}
        self.agreement = Agreement() if is_distributed() else None  # every rank saves and stops at the same step
{% endif %}

    def epochs(self, epochs):
        """The epochs to train, with the stop signals caught; none more once a stop was asked for, and none at all
        when the restored epochs stopped early (the run was cut short after that, before its final files)."""
        if self.resumed is None and stopped_early(self.metrics, self.cfg.patience):  # a partway epoch is finished
            epochs = range(0)
{% if cookiecutter.use_distributed %}
        try:
            yield from self.stop.epochs(epochs)
        finally:
            if self.agreement:
                self.agreement.drain()
{% else %}
        return self.stop.epochs(epochs)
{% endif %}

    def start_epoch(self, epoch: int) -> Progress | None:
        """Before each epoch: where a resumed epoch stands (None: from its start), and the loader set to match."""
        progress, self.resumed = self.resumed, None
        steps = min(len(self.loader), self.cfg.max_steps_per_epoch or len(self.loader))
        if progress and progress.step > steps:  # a hand-made checkpoint: the flags that make the epoch were checked
            raise ModelError(f"the checkpoint stopped at step {progress.step} of an epoch of {steps} steps; {FITTING}")
        start_epoch(self.loader, epoch, progress.step if progress else 0)
        return progress

    def after_step(self, progress: Progress, update: bool) -> bool:
        """After each batch: save when a checkpoint is due or a stop was asked for; True to stop the epoch here."""
        self.steps += update
        timed = self.every_seconds is not None and time.monotonic() - self.clock >= self.every_seconds
        if timed:
            self.clock = time.monotonic()
{% if cookiecutter.use_distributed %}
        if self.agreement:  # a signal to any rank stops them all at one step, as if each had received it
            number, timed = self.agreement.exchange([self.stop.signal or 0, timed])
            self.stop.adopt(number)
            stop = bool(number)
        else:
            stop = bool(self.stop)
{% else %}
        stop = bool(self.stop)
{% endif %}
        self.due |= stop or timed or (self.every_steps is not None and self.steps >= self.every_steps)
        if not (update and self.due):
            return False
        save_checkpoints(self.out, self.stateful, self.loader, self.metrics, self.cfg, progress, self.changes)
        self.saved = f"step {progress.step} of epoch {len(self.metrics) + 1}"
        self.steps, self.clock, self.due, self.stopped = 0, time.monotonic(), False, bool(stop)
        return self.stopped

    def save_epoch(self) -> None:
        save_checkpoints(self.out, self.stateful, self.loader, self.metrics, self.cfg, changes=self.changes)
        self.saved, self.steps, self.clock = "the last completed epoch", 0, time.monotonic()

    def exit_if_stopped(self) -> None:
        self.stop.exit_if_stopped(self.out, self.saved)


class GracefulStop:
    """SIGTERM, SIGINT and SIGUSR1 (how schedulers, Ctrl-C and SLURM's warning before a time limit stop jobs) end
    the run at a resumable point: the current optimizer step finishes and a mid-epoch checkpoint is written, from
    which the resumed run continues exactly as the uninterrupted one would have. A second signal exits at once.
{% if cookiecutter.use_distributed %}
    Every process stops at the same step: they agree on it in the background, one step after the signal.
{% endif %}
    """

    def __init__(self):
        self.signal: int | None = None
        self.since = 0.0  # when it came

    def __bool__(self) -> bool:
        return self.signal is not None

    def _request(self, number: int, frame) -> None:
        if self.signal is not None:
            if number == self.signal and time.monotonic() - self.since < REPEAT_SECONDS:
                return  # one request delivered twice: to the process group, and passed on by a launcher
            raise SystemExit(128 + number)
        self.signal, self.since = number, time.monotonic()
        name = signal.Signals(number).name
        fresh_line = "\n" if sys.stderr.isatty() else ""  # not after the ^C a terminal echoes behind the progress bar
        print(f"{fresh_line}{name}: stopping at the next resumable point (send it again to stop now)", file=sys.stderr)

{% if cookiecutter.use_distributed %}
    def adopt(self, number: int) -> None:
        """Another rank's signal (0: none): this rank stops as if it had received it."""
        if number and self.signal is None:
            self.signal, self.since = number, time.monotonic()

{% endif %}
    @contextlib.contextmanager
    def caught(self):
        """The stop signals are requests to this object while the block runs; the handlers before it, after."""
        previous = {number: signal.signal(number, self._request) for number in STOP_SIGNALS}
        _STOPS.append(self)
        try:
            yield previous
        finally:
            _STOPS.pop()
            for number, handler in previous.items():
                signal.signal(number, handler)

    def epochs(self, epochs):
        """Yield epochs with the signal handlers installed; stop yielding once a stop was asked for."""
        with self.caught():
            for epoch in epochs:
{% if cookiecutter.use_distributed %}
                self.adopt(max(gather(self.signal or 0)))  # every rank stops at the same epoch
{% endif %}
                if self:
                    return
                yield epoch
{% if cookiecutter.use_distributed %}
            self.adopt(max(gather(self.signal or 0)))  # and after the last one: all save their results, or none
{% endif %}

    def exit_if_stopped(self, out: Path, saved: str | None = None) -> None:
        """After a stop: say where the run can continue from (`saved`: what last.pt holds, if this run wrote it), and
        exit with the conventional 128 + signal."""
{% if cookiecutter.use_distributed %}
        if self and not is_main():
            raise SystemExit(128 + self.signal)  # rank 0 says where to continue
{% endif %}
        if self:
            name = signal.Signals(self.signal).name
            last = out / "last.pt"
            again = f"continue with: {SCRIPT} train --config {shlex.quote(str(out / 'config.yaml'))} --resume auto"
            if saved:
                said = f"{last} holds {saved}; {again}"
            elif last.exists():  # stopped as it started: the checkpoint it would have continued from
                said = f"{last} is as it was; {again}"
            else:  # the command may hold what config.yaml does not (--resume PATH, --init-from)
                said = "nothing was saved yet; run the same command again"
            print(f"stopped by {name}: {said}", file=sys.stderr)
            raise SystemExit(128 + self.signal)


def catching_stop_signals(function):
    """Stop signals are requests for the whole of a run, not only its epochs: one that comes while the run starts
    stops it at its first resumable point, the start of the epoch loop, saying so; one that comes while it writes its
    final files lets it finish them, then says so. A caller's own handler (tune's, between trials) then gets it, and
    a request the caller had not acted on yet is this run's from its start."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        stop = GracefulStop()
        if _STOPS and _STOPS[-1]:  # tune's, asked for as the trial was set up
            stop.signal, stop.since = _STOPS[-1].signal, _STOPS[-1].since
        with stop.caught() as previous:
            result = function(*args, **kwargs)
        if stop:  # the epochs were done: exit_if_stopped ends the run otherwise
            name = signal.Signals(stop.signal).name
{% if cookiecutter.use_distributed %}
            if is_main():
                print(f"{name} came as the run wrote its final files: they are complete", file=sys.stderr)
{% else %}
            print(f"{name} came as the run wrote its final files: they are complete", file=sys.stderr)
{% endif %}
            handler = previous[stop.signal]
            if callable(handler) and handler is not signal.default_int_handler:  # a KeyboardInterrupt: not now
                handler(stop.signal, None)
        return result

    return call
{% endif %}
