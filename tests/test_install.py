"""Named combinations the slow, real way: a fresh virtual environment, a real install and the console script. Their
own test suites run once, in the render (test_bake.py): installed, the same tests would run the same code again."""

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from render import baked_project, package_of
from tricks import NAMED

pytestmark = pytest.mark.slow


def sh(*command, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


# all-on also starts a two-process job: its workers must import the installed package (distributed.py puts it on
# their path), so it runs in the lane of multi-process tests
@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.processes] * (n == "all-on")) for n in NAMED])
def test_installed_render_runs_its_console_script(name, cookies, tmp_path):
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
    done = sh(script, "evaluate", "--weights", run / "model.pt", "--device", "cpu", cwd=tmp_path)
    assert done.stdout.startswith("mAP " if NAMED[name].get("task") == "multi_label" else "accuracy "), done.stdout
    if name == "all-on":
        job = ["train", "--nproc", "2", "--device", "cpu", "--epochs", "1", "--max-steps-per-epoch", "2"]
        done = sh(script, *job, "--no-plots", "--output-dir", tmp_path / "job", cwd=tmp_path)
        assert done.stdout.strip().splitlines()[-1].endswith(f": {tmp_path / 'job' / 'model.pt'}"), done.stdout
