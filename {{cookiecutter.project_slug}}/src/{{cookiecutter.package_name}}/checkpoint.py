"""Checkpoints (T37): `last.pt` every epoch, `best.pt` by validation accuracy, and exact resume.

A checkpoint holds plain data only (tensors, numbers, strings, lists, dicts), so `torch.load(...,
weights_only=True)` reads it and no code is ever unpickled. Files are written to a temporary name and
renamed, so a crash mid-write leaves the previous checkpoint intact.
"""

import dataclasses
import os
import pickle
import random
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import torch

{% if cookiecutter.use_distributed %}
from .distributed import barrier, gather, is_main, rank
{% endif %}
from .errors import ModelError


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
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict, loader_generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    position, has_gauss, gauss = state["numpy_rest"]
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), position, has_gauss, gauss))
    random.setstate(state["python"])
    loader_generator.set_state(state["loader"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def atomic_save(obj, path: Path) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        torch.save(obj, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


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
    state |= {"epoch": len(metrics), "metrics": metrics, "rng": rng, "config": dataclasses.asdict(cfg)}
    atomic_save(state, out / "last.pt")
    if metrics[-1]["val_acc"] >= max(row["val_acc"] for row in metrics):
        shutil.copyfile(out / "last.pt", out / "best.pt.tmp")
        os.replace(out / "best.pt.tmp", out / "best.pt")


def load_checkpoint(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ModelError(f"checkpoint {path} does not exist; check --resume") from None
    except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise ModelError(f"checkpoint {path} cannot be read ({str(exc).splitlines()[0]})") from None


def find_checkpoint(resume: str | None, out: Path) -> Path | None:
    """`--resume PATH` as given; `--resume auto`: the loadable checkpoint of the latest epoch in the output dir."""
    if resume != "auto":
        return Path(resume) if resume else None
    latest, latest_epoch = None, 0
    for path in sorted(out.glob("*.pt")):  # best.pt before last.pt: last wins a tie
        try:
            epoch = load_checkpoint(path).get("epoch")
        except ModelError as exc:
            print(f"skipping {exc}")
            continue
        if epoch is not None and epoch >= latest_epoch:  # plain weights files have no epoch
            latest, latest_epoch = path, epoch
    if latest is None:
        print(f"no checkpoint in {out}: starting from scratch")
    return latest


def resume(path: Path | None, stateful: dict, loader_generator, cfg) -> list[dict]:
    """Restore every stateful object and RNG stream; return the metrics rows of the epochs already done."""
    if path is None:
        return []
    state = load_checkpoint(path)
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
        print(f"{signal.Signals(number).name}: stopping at the next resumable point (send it again to stop now)")

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
            print(f"stopped by {name}: {saved}; continue with --resume auto", file=sys.stderr)
            raise SystemExit(128 + self.signal)
