"""Named combinations the slow, real way: a fresh virtual environment, a real install, the console script,
and the render's own test suite against the installed package."""

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from render import baked_project, package_of
from runners import own_pytest_run
from tricks import NAMED

pytestmark = pytest.mark.slow


def sh(*command, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


# All-on runs its whole suite, slow tests included: about 5 min alone on 2 cores, up to twice that beside the
# other worker, so it gets more than the default 600 s.
@pytest.mark.timeout(2700)  # the all-on suite, slow lane included, in one process
@pytest.mark.parametrize("name", NAMED)
def test_installed_render_runs_its_console_script_and_tests(name, cookies, tmp_path):
    project = baked_project(cookies, **NAMED[name])
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    # Reuse the dependencies installed here (torch is 5 GB) instead of downloading them again.
    site = sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    Path(site, "reuse-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    sh(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-build-isolation", project)
    installed = sh(python, "-c", f"import {package_of(project)} as p; print(p.__file__)").stdout
    assert installed.startswith(site), installed

    run = tmp_path / "run"
    script = venv / "bin" / project.name
    done = sh(script, "train", "--epochs", "1", "--max-steps-per-epoch", "2", "--output-dir", run, cwd=tmp_path)
    assert done.stdout.strip().splitlines()[-1].endswith(f": {run / 'model.pt'}")
    # -o pythonpath= : the tests must import the installed package, not src/. All-on holds every test there
    # is, slow ones included; the other two run the fast lane.
    lane = [] if name == "all-on" else ["-m", "not slow"]
    sh(python, "-m", "pytest", "-q", *own_pytest_run(), "-o", "pythonpath=", *lane, cwd=project, timeout=2600)
