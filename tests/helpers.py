"""Helpers for the template's tests: baking renders and running what they contain."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # noqa: F401 (re-exported for the tests)

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "{{cookiecutter.project_slug}}"
CONTEXT = json.loads((ROOT / "cookiecutter.json").read_text())
SYSTEM_TEMP = Path(tempfile.gettempdir())  # read before conftest redirects this process's temp dir
CHOICES = {key: value for key, value in CONTEXT.items() if isinstance(value, list) and not key.startswith("_")}


def bake(cookies, **answers):
    """Render with the given answers; unknown keys would be silently ignored by cookiecutter."""
    unknown = set(answers) - set(CONTEXT)
    assert not unknown, f"not in cookiecutter.json: {unknown}"
    return cookies.bake(extra_context=answers)


def baked_project(cookies, **answers) -> Path:
    result = bake(cookies, **answers)
    assert result.exit_code == 0, result.exception
    return Path(result.project_path)


def run_in(project: Path, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    """Run `python args...` inside a rendered project with its src/ importable, as a user would."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, *args], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def package_of(project: Path) -> str:
    return next((project / "src").iterdir()).name


def last_output_dir(cookies) -> Path:
    """pytest-cookies bakes into <root>/bakeNN, one new folder per bake."""
    return Path(str(cookies._output_factory.__self__)) / f"bake{cookies._counter - 1:02d}"
