{% if cookiecutter.use_checkpointing %}
"""Continuing a run: which checkpoint a run goes on from (`--resume PATH|auto`), what a resume may change and what
it refuses, and the state it restores, to the step of an epoch.
"""

import csv
import dataclasses
from pathlib import Path

import torch

from ..config import saved_fields
from ..config.checkpointing import RESUME_MAY_CHANGE
{% if cookiecutter.use_distributed %}
from ..core.distributed import rank, world_size
{% endif %}
from ..core.errors import ModelError, OutputError, first_line, state_dict_mismatch
from ..core.run_folder import refuse_if_busy
from ..reports.metrics import stopped_early
from ..tricks import OFF
from .checkpoint_file import CHANGES, CHANGES_COLUMNS, RESUME_FROM, load_checkpoint, restore_rng
from .engine import Progress

FITTING = "resume with the flags the run was trained with, or start anew from its weights with --init-from"


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
    mid_epoch = "progress" in state
    # a trick's sums of an epoch so far: at an epoch's end there are none, and a checkpoint may lack them (one saved
    # before the trick kept its own)
    if not mid_epoch:
        stateful = {name: obj for name, obj in stateful.items() if name in state or not getattr(obj, "epoch_sums", 0)}
    # what a run of this train writes, of the kind it writes: a hand-made or foreign file is refused here, in one line
    kinds = {"config": dict, "metrics": list, "rng": list, **dict.fromkeys(stateful, dict)}
    unusable = [key for key, kind in kinds.items() if not isinstance(state.get(key), kind)]
    if "metrics" not in unusable and state["epoch"] != len(state["metrics"]):  # one row per epoch done
        unusable.append("metrics")
    if mid_epoch and not _usable_progress(state["progress"]):
        unusable.append("progress")
    history = state.get("changes", [])  # none in a checkpoint of a run never changed
    if not isinstance(history, list) or any(not isinstance(row, dict) or [*row] != CHANGES_COLUMNS for row in history):
        unusable.append("changes")
    if unusable and set(unusable) <= set(stateful):  # a trick's state the run did not have: its settings say why
        resume_changes(path, state, cfg)
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
    # a setting the checkpoint lacks belongs to a trick the project gained after the run: off (its others unchanged)
    saved = {name: OFF.get(name, value) for name, value in now.items() if name not in saved} | saved
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
{% endif %}
