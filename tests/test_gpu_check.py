"""scripts/gpu-check.sh on a machine without a GPU: the summary's reading of pytest's JUnit results (--self-test),
and the plan and CPU benchmark of --dry-run. What only a GPU can show runs when the check is lent one."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from tricks import TRICKS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[1]


def gpu_check(flag: str, out: Path, **env_changes: str) -> list[str]:
    env = {**os.environ, "OUT": str(out), "OMP_NUM_THREADS": "1", "BENCH_IMAGES": "128", **env_changes}
    done = subprocess.run(
        ["bash", "scripts/gpu-check.sh", flag], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout.splitlines()


def test_the_summary_counts_timeouts_missing_results_and_odd_skips_as_failures(tmp_path):
    assert gpu_check("--self-test", tmp_path)[-1] == "self-test: 0 wrong"


def path_without_a_c_compiler(folder: Path) -> str:
    """A PATH with every command of this one but cc and gcc (links in one folder): inductor's --compile cannot run."""
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for command in Path(directory).glob("*") if Path(directory).is_dir() else []:
            link = folder / command.name
            if command.name not in ("cc", "gcc") and not os.path.lexists(link) and os.access(command, os.X_OK):
                link.symlink_to(command)
    return str(folder)


def test_the_dry_run_plans_a_two_gpu_job_and_limits_above_the_smoke_and_benchmarks_both_loops(tmp_path):
    """Run where no C compiler is: the --compile run is skipped, saying why, instead of failing on the GPU."""
    env = {"PATH": path_without_a_c_compiler(tmp_path / "bin"), "CC": ""}
    (tmp_path / "out").mkdir()
    lines = gpu_check("--dry-run", tmp_path / "out", **env)
    assert "direct compile: SKIPPED: no C compiler ($CC, cc or gcc) on PATH, which inductor needs" in lines
    assert not [line for line in lines if line.startswith("direct compile (dry run")]
    lane = next(line for line in lines if line.startswith("lane (dry run): GPU_LANE=sample selects"))
    pytest_limit, smoke_limit = map(int, re.search(r"--timeout (\d+) \(smoke: (\d+) s\)", lane).groups())
    assert pytest_limit > smoke_limit  # else a stuck CUDA child outlives the test that started it
    two_gpus = [line for line in lines if line.startswith("direct gpus-0-1 (dry run, expecting exit 0)")]
    assert len(two_gpus) == 1 and "--gpus 0\\,1 --sync-bn" in two_gpus[0]
    for model in ("small_cnn", "resnet18"):  # the generated loop's rows ran (they once always failed)
        row = next(line for line in lines if line.startswith(f"benchmark {model} (fp32 on both sides"))
        assert re.search(r"bare \d+ img/s, generated \d+ img/s, generated/bare \d+\.\d{3}$", row), row
    # the GPU table's setting (small on a dry run): both loops' JSON said channels-last in, bf16 out
    row = next(line for line in lines if line.startswith("benchmark small_cnn at 32 px (bf16 autocast and channels"))
    assert re.search(r"bare \d+ img/s, generated \d+ img/s, generated/bare \d+\.\d{3}$", row), row
    assert lines[-1].startswith("result: OK")
    rendered = ROOT / "build" / "gpu-renders" / "all-on" / "my-project" / ".cookiecutter.json"
    answers = json.loads(rendered.read_text())["cookiecutter"]
    assert [trick for trick in TRICKS if answers[trick] is not True] == []  # every trick of the registry checked
