"""Every file a run writes goes through `replacing`: the content goes to a new temporary file beside the target
(created exclusively under a random name, never through a link), is flushed to disk, and is renamed over the
target. A crash leaves the old file or the new one, never half of one; a symlink planted in a run folder is
replaced, not followed."""

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import torch

UMASK = os.umask(0)
os.umask(UMASK)  # read once: temporary files start private, the written files get the usual permissions


@contextlib.contextmanager
def replacing(path: Path, mode: str = "wb"):
    """A file object to write `path`'s new content into; it replaces `path` when the block ends without error."""
    path = Path(path)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(descriptor, 0o666 & ~UMASK)
    os.close(descriptor)  # reopened by name, so that `file.name` is a path libraries can write to
    try:
        text = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
        with open(temporary, mode, **text) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_text(path: Path, text: str) -> None:
    with replacing(path, "w") as file:
        file.write(text)


def save(obj, path: Path) -> None:
    """torch.save, written whole or not at all."""
    with replacing(path) as file:
        torch.save(obj, file)


def copy(source: Path, path: Path) -> None:
    with open(source, "rb") as original, replacing(path) as file:
        shutil.copyfileobj(original, file)
