"""Files written whole, and folders one command at a time writes into.

Every file a run writes goes through `replacing`: the content goes to a new temporary file beside the target
(created exclusively under a random name, never through a link), is flushed to disk, and is renamed over the
target. A crash leaves the old file or the new one, never half of one; a symlink planted in a run folder is
replaced, not followed. `hold` gives a command a folder to itself."""

import contextlib
import errno
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from .errors import OutputError, first_line

with warnings.catch_warnings():  # where the system has no file locks, filelock falls back, as documented, and says so
    warnings.filterwarnings("ignore", "only soft file lock is available")
    from filelock import FileLock, Timeout

UMASK = os.umask(0)
os.umask(UMASK)  # read once: temporary files start private, the written files get the usual permissions


# what to do, by the reason a write failed (errno names: EDQUOT is missing on some systems)
ADVICE = {
    **dict.fromkeys(("ENOSPC", "EFBIG", "EDQUOT"), "free some space or pick a folder on another disk"),
    "ENOENT": "create the missing folder or pick another",
    **dict.fromkeys(("ENOTDIR", "EEXIST"), "a file stands where the path needs a folder; move it or pick another"),
    "EISDIR": "a folder stands in its place; move it or pick another name",
    **dict.fromkeys(("EACCES", "EPERM", "EROFS"), "pick a writable folder"),
}


def cannot_write(path: Path, exc: OSError) -> OutputError:
    """A full disk, a missing or read-only folder, a file in the way: one line that names the file and what to do."""
    # another reason, or none (torch's failed write, often a full disk): the general advice
    advice = ADVICE.get(errno.errorcode.get(exc.errno), "free some space or pick a writable folder")
    return OutputError(f"cannot write {path} ({exc.strerror or exc}); {advice}")


LOCK_FILE = ".lock"  # in each folder a command writes into; left in place, so that the next one shares it


def hold(folder: Path) -> FileLock | None:
    """This process's hold on `folder`, or None while another process has it: train, tune and export take turns in a
    folder. The system lets go of a hold when its process ends, however it ends; filelock does this alike on Linux,
    macOS and Windows, and with a lock file's presence where a system has no file locks."""
    path = Path(folder) / LOCK_FILE
    try:
        if path.is_symlink():
            path.unlink()  # planted: replaced, not followed
        lock = FileLock(path, thread_local=False)
        lock.acquire(blocking=False)
    except Timeout:
        return None
    except OSError as exc:
        raise cannot_write(path, exc) from None
    return lock


def held_elsewhere(folder: Path) -> bool:
    """Whether another process holds `folder`, found without leaving a lock file in a folder that has none (or
    replacing a link that stands there: `hold` never leaves one)."""
    path = Path(folder) / LOCK_FILE
    if path.is_symlink() or not path.exists():
        return False
    lock = hold(folder)
    if lock is None:
        return True
    unlock(lock)
    return False


def unlock(lock: FileLock) -> None:
    """Let go of a hold at once. Dropping it is not enough in a process that goes on: DataLoader workers forked while
    it was held share it, and persistent ones can outlive the run."""
    lock.release(force=True)


@contextlib.contextmanager
def replacing(path: Path, mode: str = "wb", suffix: str = ""):
    """A file object to write `path`'s new content into; it replaces `path` when the block ends without error.
    `suffix` ends the temporary file's name, for libraries that read a file's kind from it."""
    path = Path(path)
    try:
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp" + suffix)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    os.close(descriptor)  # reopened by name, so that `file.name` is a path libraries can write to
    os.chmod(temporary, 0o666 & ~UMASK)  # by name: Windows has no fchmod
    try:
        text = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
        with open(temporary, mode, **text) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise cannot_write(path, exc) from None
        raise


def own_folder(path: Path, replace_link: bool = True) -> Path:
    """A folder a command writes into, created where missing. A link planted in the place of a folder the command
    names itself is replaced by a real folder, not followed (it could point anywhere)."""
    path = Path(path)
    try:
        if replace_link and path.is_symlink():
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    return path


def write_text(path: Path, text: str) -> None:
    with replacing(path, "w") as file:
        file.write(text)


def save(obj, path: Path) -> None:
    """torch.save, written whole or not at all."""
    import torch  # here: the command line imports this module, and its --help must not wait seconds for torch

    with replacing(path) as file:
        try:
            torch.save(obj, file)
        except RuntimeError as exc:  # how torch's writer reports a failed write: a full disk, a file-size limit
            raise OSError(f"the write failed: {first_line(exc)}") from None


def share(source: Path, path: Path) -> None:
    """`path` with `source`'s content, without writing it again: a second name for the same file (files are only
    ever replaced, never written into, so replacing one leaves the other as it was), or a copy where the disk has
    no hard links."""
    temporary = path.parent / f".{path.name}.{os.urandom(8).hex()}.tmp"
    try:
        os.link(source, temporary)
    except OSError:
        with open(source, "rb") as original, replacing(path) as file:
            shutil.copyfileobj(original, file)
        return
    try:
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise cannot_write(path, exc) from None
