"""The answers of one of the template tests' named renders (all-on, all-off, defaults) as `key=value` words for
cookiecutter's command line, read from the registry of tricks (tests/tricks.py): a new trick joins every script
that renders one of them without an edit there."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from tricks import NAMED  # noqa: E402 (the tests' folder is no package)

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in NAMED:
        sys.exit(f"usage: {Path(__file__).name} {'|'.join(NAMED)}")
    print(" ".join(f"{key}={value}" for key, value in NAMED[sys.argv[1]].items()))
