"""A real mutation-testing tool in CI: a seeded sample of mutmut's own mutants of the all-on render's deterministic
modules, each run against that module's generated tests, must mostly be killed. The full run is
scripts/mutation-audit.sh without --sample (about 40 minutes on one core); its last figures are in
benchmarks/mutation.md."""

import json
import os
import subprocess
import sys

import pytest
from render import ROOT
from tricks import TRICKS

pytestmark = pytest.mark.slow
MODULES = ["metrics", "layouts", "config", "optim", "files"]  # the cheapest of the deterministic modules to test
SAMPLE, MIN_KILLED = 30, 85  # killed share (%) of the sample; the full run's shares are in benchmarks/mutation.md


@pytest.mark.timeout(1200)
def test_a_sample_of_mutmut_mutants_is_killed_by_the_generated_tests(tmp_path):
    script = ROOT / "scripts" / "mutation-audit.sh"
    # MODULE_TIMEOUT: a module that hangs fails naming itself, inside the limit below
    env = {**os.environ, "MUTATION_AUDIT_DIR": str(tmp_path), "PYTHON": sys.executable, "MODULE_TIMEOUT": "500"}
    arguments = [*MODULES, "--sample", str(SAMPLE), "--seed", "0", "--min-killed", str(MIN_KILLED)]
    done = subprocess.run(["bash", str(script), *arguments], env=env, capture_output=True, text=True, timeout=1100)
    table = (tmp_path / "table.md").read_text() if (tmp_path / "table.md").exists() else "no table"
    print(f"mutation audit sample ({SAMPLE} mutants of {', '.join(MODULES)}):\n{table}")
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    answers = json.loads((tmp_path / "render" / "allon" / ".cookiecutter.json").read_text())["cookiecutter"]
    assert [trick for trick in TRICKS if answers[trick] is not True] == []  # every trick of the registry audited
