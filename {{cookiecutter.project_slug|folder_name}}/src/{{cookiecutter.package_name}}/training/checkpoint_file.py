{% if cookiecutter.use_checkpointing %}
"""The checkpoint file: what `last.pt` and `best.pt` hold (weights, optimizer and schedule, every random stream, the
metrics so far, the class names, the changes of resumes), written whole and read back safely.

A checkpoint holds plain data only (tensors, numbers, strings, lists, dicts), so `torch.load(...,
weights_only=True)` reads it and no code is ever unpickled. Files are written to a temporary name and
renamed, so a crash mid-write leaves the previous checkpoint intact.
"""

import csv
import dataclasses
import io
import random
from pathlib import Path

import numpy as np
import torch

from ..config import saved_fields
from ..core import files
{% if cookiecutter.use_distributed %}
from ..core.distributed import barrier, gather, is_main
{% endif %}
from ..core.errors import ModelError, load_failure
from ..reports.metrics import MONITOR
from .engine import Progress

RESUME_FROM = "resume from the last.pt or best.pt of a run"
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
    if not mid_epoch and metrics[-1][MONITOR] > max((row[MONITOR] for row in metrics[:-1]), default=-1.0):
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
{% endif %}
