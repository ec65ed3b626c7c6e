"""Checkpoints (T37): `last.pt` every epoch, `best.pt` by validation accuracy, and exact resume.

A checkpoint holds plain data only (tensors, numbers, strings, lists, dicts), so `torch.load(...,
weights_only=True)` reads it and no code is ever unpickled. Files are written to a temporary name and
renamed, so a crash mid-write leaves the previous checkpoint intact.
"""

import pickle
import random
import shlex
import signal
import sys
from pathlib import Path

import numpy as np
import torch

from . import files
from .config import saved_fields
{% if cookiecutter.use_distributed %}
from .distributed import barrier, gather, is_main, rank
{% endif %}
from .errors import ModelError, OutputError

# the console script, as the stop message tells the user to run it
SCRIPT = "{{ cookiecutter.project_slug }}"


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
    if torch.cuda.is_initialized():  # a GPU run: the state of the GPU it trains on, whatever else is visible
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_rng(state: dict, loader_generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    position, has_gauss, gauss = state["numpy_rest"]
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), position, has_gauss, gauss))
    random.setstate(state["python"])
    loader_generator.set_state(state["loader"])
    if "cuda" in state and torch.cuda.is_initialized():
        torch.cuda.set_rng_state(state["cuda"])


{% if cookiecutter.use_distributed %}
def save_checkpoints(out: Path, stateful: dict, loader_generator, metrics: list[dict], cfg) -> None:
    """Rank 0 writes last.pt (every rank's random state included) and copies it to best.pt on a new best.

    Called on every rank; returns once the files are complete, so any rank may read them afterwards.
    """
    rng = gather(rng_state(loader_generator))
    if is_main():
        _write(out, stateful, rng, metrics, cfg)
    barrier()


def _write(out: Path, stateful: dict, rng: list[dict], metrics: list[dict], cfg) -> None:
{% else %}
def save_checkpoints(out: Path, stateful: dict, loader_generator, metrics: list[dict], cfg) -> None:
    """Write last.pt; copy it to best.pt when the newest epoch has the best validation accuracy so far."""
    rng = [rng_state(loader_generator)]
{% endif %}
    state = {name: obj.state_dict() for name, obj in stateful.items()}
    state |= {"epoch": len(metrics), "metrics": metrics, "rng": rng, "config": saved_fields(cfg)}
    files.save(state, out / "last.pt")
    if metrics[-1]["val_acc"] >= max(row["val_acc"] for row in metrics):
        files.copy(out / "last.pt", out / "best.pt")


def load_checkpoint(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ModelError(f"checkpoint {path} does not exist; check --resume") from None
    except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise ModelError(f"checkpoint {path} cannot be read ({str(exc).splitlines()[0]})") from None


def find_checkpoint(resume: str | None, out: Path, quiet: bool = False) -> tuple[Path, dict] | None:
    """`--resume PATH` as given; `--resume auto`: the loadable checkpoint of the latest epoch in the output dir.
    Returns the path and its loaded contents."""
    if resume != "auto":
        return (Path(resume), load_checkpoint(Path(resume))) if resume else None
    latest = None
    for path in sorted(out.glob("*.pt")):  # best.pt before last.pt: last wins a tie
        try:
            state = load_checkpoint(path)
        except ModelError as exc:
            print(f"skipping {exc}")
            continue
        epoch = state.get("epoch")  # plain weights files have none
        if epoch is not None and (latest is None or epoch >= latest[1]["epoch"]):
            latest = path, state
    if latest is None and not quiet:
        print(f"no checkpoint in {out}: starting from scratch")
    return latest


def _holds_checkpoints(out: Path) -> bool:
    return any(candidate.is_file() for candidate in out.glob("*.pt"))  # a dangling link is no checkpoint


def check_continuation(out: Path, found: tuple[Path, dict] | None, cfg) -> None:
    """Before anything is written (--overwrite skips this): a run folder is only ever continued from its own newest
    checkpoint, and a finished run only with more --epochs; another run's checkpoint never takes over a folder."""
    finished = (out / "model.pt").exists()
    if found is None:
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
    if path.resolve().parent != out.resolve():
        if finished or _holds_checkpoints(out):
            raise OutputError(f"{out} holds another run; continue {path} into an empty --output-dir or its own folder")
        return
    newest = find_checkpoint("auto", out, quiet=True) if cfg.resume != "auto" else found
    if newest and state["epoch"] < newest[1]["epoch"]:
        raise OutputError(
            f"{path} is epoch {state['epoch']} but {out} went on to epoch {newest[1]['epoch']}; "
            f"continue from {newest[0]}, or pass --overwrite to branch off here"
        )
    if finished and state["epoch"] >= cfg.epochs:
        raise OutputError(f"{out} holds a finished run of {state['epoch']} epochs; pass more --epochs to continue it")


def resume(found: tuple[Path, dict] | None, stateful: dict, loader_generator, cfg) -> list[dict]:
    """Restore every stateful object and RNG stream; return the metrics rows of the epochs already done."""
    if found is None:
        return []
    path, state = found
    saved = state.get("config", {})
    mismatched = [key for key in ("model", "data", "batch_size") if saved.get(key) != getattr(cfg, key)]
    missing = [name for name in stateful if name not in state]
    if mismatched or missing:
        raise ModelError(f"{path} was written by a different run (differs in: {', '.join(mismatched + missing)})")
    for name, obj in stateful.items():
        try:
            obj.load_state_dict(state[name])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise ModelError(f"{path}: the saved {name} does not fit ({str(exc).splitlines()[0]})") from None
    # The LR of the next epoch, from the schedule: `--epochs` may have changed since the checkpoint.
    scheduler, optimizer = stateful["scheduler"], stateful["optimizer"]
    for group, base_lr, factor in zip(optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True):
        group["lr"] = base_lr * factor(scheduler.last_epoch)
{% if cookiecutter.use_distributed %}
    index = rank() if rank() < len(state["rng"]) else 0
    if index != rank():
        print(f"{path} was written by {len(state['rng'])} processes: random streams continue from rank 0's")
    restore_rng(state["rng"][index], loader_generator)
{% else %}
    restore_rng(state["rng"][0], loader_generator)
{% endif %}
    print(f"resumed from {path} after epoch {state['epoch']}")
    return state["metrics"]


class GracefulStop:
    """SIGTERM and SIGINT (how schedulers and Ctrl-C stop jobs) end the run at a resumable point.

{% if cookiecutter.use_distributed %}
    The current epoch ends and is saved first: all processes must agree on where they stop, and agreeing
    at every step would cost a collective per step. torchrun gives its workers 30 s after passing the
    signal on; an epoch that runs longer is killed and the previous epoch's checkpoint is where to resume.
    A second signal exits at once.
{% else %}
    The current step finishes and the partial epoch is dropped: resuming from the last checkpoint trains it
    again, exactly as the uninterrupted run would have. A second signal exits at once.
{% endif %}
    """

    def __init__(self):
        self.signal: int | None = None

    def __bool__(self) -> bool:
        return self.signal is not None

    def _request(self, number: int, frame) -> None:
        if self.signal is not None:
            raise SystemExit(128 + number)
        self.signal = number
        name = signal.Signals(number).name
        print(f"{name}: stopping at the next resumable point (send it again to stop now)", file=sys.stderr)

    def epochs(self, epochs):
        """Yield epochs with the signal handlers installed; stop yielding once a stop was asked for."""
        previous = {number: signal.signal(number, self._request) for number in (signal.SIGTERM, signal.SIGINT)}
        try:
            for epoch in epochs:
{% if cookiecutter.use_distributed %}
                if any(gather(self.signal is not None)):  # every rank stops at the same epoch
{% else %}
                if self:
{% endif %}
                    return
                yield epoch
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def exit_if_stopped(self, out: Path) -> None:
        """After a stop: say where the run can continue from, and exit with the conventional 128 + signal."""
{% if cookiecutter.use_distributed %}
        if self and not is_main():
            raise SystemExit(128 + self.signal)  # rank 0 says where to continue
{% endif %}
        if self:
            name = signal.Signals(self.signal).name
            last = out / "last.pt"
            saved = f"{last} holds the last completed epoch" if last.exists() else "nothing was saved yet"
            again = f"{SCRIPT} train --config {shlex.quote(str(out / 'config.yaml'))} --resume auto"
            print(f"stopped by {name}: {saved}; continue with: {again}", file=sys.stderr)
            raise SystemExit(128 + self.signal)
