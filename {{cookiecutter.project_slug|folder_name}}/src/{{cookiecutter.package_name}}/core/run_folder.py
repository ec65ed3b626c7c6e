"""The output dir of a training run: never a folder of other files, one run at a time, and a clean start on
--overwrite.

A folder is a run's when it holds the files every run writes at its start (MARKERS); an empty or new folder becomes
one. The run holds the folder while it lives (`files.hold`, let go by the system when the process ends, however it
ends), so a second run into the same folder stops with one line instead of mixing its files in.
"""

import functools
import os
import shutil
from pathlib import Path

from .errors import OutputError
from .files import LOCK_FILE, FileLock, cannot_write, held_elsewhere, hold, unlock

MARKERS = ("classes.txt", "answers.json")  # a run writes both before its first step; a user's folder has neither
OWN_FILES = [  # what --overwrite removes: the run's files, and what evaluate and features wrote beside them
    *("config.yaml", "class_counts.csv", "split.csv", "metrics.csv", "per_class.csv", "confusion_matrix.csv"),
    *("model.pt", "learning_curves.png", "confusion_matrix.png", "profile", "eval-*-*", "features_*.npy"),
    *("*.onnx", "*.onnx.data", "*.onnx.json", "*.pt2", "*.pt2.json"),  # export's
    *("*.torchscript.pt", "*.torchscript.pt.json"),
{% if cookiecutter.task == "multi_label" %}
    *("precision_recall.csv", "precision_recall.png", "*_thresholds.csv"),
{% endif %}
{% if cookiecutter.use_checkpointing %}
    *("last.pt", "best.pt", "changes.csv"),
{% endif %}
{% if cookiecutter.tracker in ("tensorboard", "wandb") %}
    "{{ cookiecutter.tracker }}",  # its log folder
{% endif %}
    *MARKERS,  # last: a removal cut short leaves a folder that is still recognised as a run's
]
_HELD: dict[Path, FileLock] = {}  # run folder -> its hold, in this process
BUSY = "another training run is writing into {}; wait for it to end or pick another --output-dir"


class RunFolder:
    """Checked when the run is set up (before anything is written); claimed once the run is sure to start."""

    def __init__(self, path: Path, overwrite: bool, own_files=()):
        """`own_files`: what the run writes besides OWN_FILES (the tricks' files), removed on --overwrite too."""
        self.path, self.overwrite, self.own_files = Path(path), overwrite, list(own_files)
        self.seen = _listing(self.path)
        self.as_checked = _state(self.path)  # what the checks before the claim read
        visible = sorted(name for name in self.seen if not name.startswith("."))  # .DS_Store and the like
        if visible and not all(marker in self.seen for marker in MARKERS):
            refuse_if_busy(self.path)  # a run starting there has not written them all yet
            named = ", ".join(visible[:3]) + (", ..." if len(visible) > 3 else "")
            raise OutputError(
                f"--output-dir {self.path} holds files that no training run wrote ({named}); "
                "pick an empty or new folder"
            )

    def claim(self) -> None:
        """Create and lock the folder, clear what a killed write left behind, and on --overwrite the old run."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise cannot_write(self.path, exc) from None
        lock = hold(self.path)
        if lock is None:
            raise OutputError(BUSY.format(self.path))
        if _state(self.path) != self.as_checked:  # another run ended there while this one was being set up
            unlock(lock)
            raise OutputError(f"another training run wrote into {self.path} as this one started; run it again")
        _HELD[self.path.resolve()] = lock
        old = [*self.path.glob(".*.tmp"), *self.path.glob(".*.tmp.*")]  # writes cut short by a kill
        if self.overwrite:
            patterns = [*self.own_files, *OWN_FILES]  # the markers last
            old += [path for pattern in patterns for path in sorted(self.path.glob(pattern))]
        try:
            for path in old:
                _remove(path)
        except OSError as exc:
            raise OutputError(f"cannot clear {path} ({exc.strerror}); check the folder's permissions") from None


def refuse_if_busy(path: Path) -> None:
    """Before refusing a folder for the files it holds: when a live run holds it, that is what to say."""
    if held_elsewhere(path):
        raise OutputError(BUSY.format(path))


def releasing_run_folders(function):
    """The run folders a call claims are released when it returns or raises: a caller that goes on (a test, a
    notebook) does not keep them locked."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        held_before = set(_HELD)
        try:
            return function(*args, **kwargs)
        finally:
            for folder in set(_HELD) - held_before:
                unlock(_HELD.pop(folder))

    return call


def _state(path: Path) -> dict[str, tuple]:
    """Each entry of the folder with its kind, size and time of change (the lock file aside): a checkpoint, a metrics
    row or a model.pt that appeared or changed shows."""
    found = {}
    for name in _listing(path) - {LOCK_FILE}:
        try:
            info = os.stat(path / name, follow_symlinks=False)
        except OSError:  # gone meanwhile: that is a change too
            continue
        found[name] = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino)
    return found


def _listing(path: Path) -> set[str]:
    try:
        return set(os.listdir(path))
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise OutputError(f"cannot write to output dir {path} ({exc.strerror}); pick another --output-dir") from None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
