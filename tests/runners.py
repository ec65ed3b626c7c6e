"""Running what a render contains: its command line and its own test suite, and what a training run produced."""

import contextlib
import csv
import dataclasses
import functools
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml


def run_in(project: Path, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    """Run `python args...` inside a rendered project with its src/ importable, as a user would."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, *args], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@functools.cache
def cpu_mixed_precision() -> str:
    """What a render's mixed precision trains in on this machine's CPU: bf16 where the CPU computes it natively, else
    fp32 (the render says so; emulated bf16 is ~8x slower). Asked in a subprocess: this process only imports torch."""
    probe = [sys.executable, "-c", "import torch; print(torch.ops.mkldnn._is_mkldnn_bf16_supported())"]
    return "bf16" if subprocess.run(probe, capture_output=True, text=True).stdout.strip() == "True" else "fp32"


def own_pytest_run() -> list[str]:
    """pytest options for running a render's own suite: no cache, and a temp root of its own. By default every
    pytest run of a user shares /tmp/pytest-of-<user> and deletes all but its 3 newest folders, so generated
    suites running side by side deleted each other's tmp_path mid-test (a two-rank test then waited forever for
    its deleted store file: the all-on suite's 600 s timeout in CI)."""
    # --timeout: a case that hangs fails with the stack where it hangs, instead of timing out the whole suite
    return ["-p", "no:cacheprovider", "--basetemp", tempfile.mkdtemp(prefix="suite-"), "--timeout", "300"]


def pytest_in_fork(
    forkserver, project: Path, args: list[str], log: Path, timeout: float, without_fcntl: bool = False
) -> tuple[int | None, str]:
    """`python -m pytest args` in a render, in a child of the fork server (torch already imported: seconds saved per
    suite): its exit code (None when it ran past `timeout` seconds and was killed) and its last 40 lines of output.
    `without_fcntl`: as on a system without fcntl (Windows), for the suite and the processes it starts."""
    import smoke_child  # the fork server has imported it

    child = forkserver.Process(target=smoke_child.pytest_in, args=(str(project), args, str(log), without_fcntl))
    child.start()
    try:
        child.join(timeout)
        code = None if child.is_alive() else child.exitcode
    finally:
        with contextlib.suppress(ProcessLookupError):  # the suite's session: its own processes end with it
            os.killpg(child.pid, signal.SIGKILL)
        child.join()
    output = log.read_text().strip() if log.exists() else ""
    return code, "\n".join(output.splitlines()[-40:]) if output else "no output"  # an internal error's traceback too


def epochs_trained(output: str) -> list[int]:
    """The epochs a run printed a result line for ("epoch 3  train_loss ..."): a resumed run must print
    exactly those after its checkpoint's epoch, which tells a resume from a restart that reproduces it."""
    return [int(line.split()[1]) for line in output.splitlines() if line.startswith("epoch ") and line[6:7].isdigit()]


@dataclasses.dataclass(frozen=True)
class Run:
    """What a smoke run produced, whoever ran it (smoke_child in a forked process, or a subprocess per command):
    the input of each trick's checks (tests/tricks.py)."""

    folder: Path  # the run's --output-dir
    log: str  # everything its commands printed, stdout and stderr
    model: str  # the model it trained
    device: str  # cpu, cuda, or auto (whatever the machine has)
    precision: str  # what it trained in: fp32, or the mixed precision it asked for (bf16 on a CPU that has it)
    commands: int  # train commands run into the folder (a second one resumes the first)
    checkpoint_epochs: list  # the epoch of last.pt after each command (none without last.pt)
    one_process_group: bool = False  # joined a process group of one, as torchrun would start it
    scaled: bool = False  # fp16 on CUDA: a GradScaler that may skip steps
    seen: dict | None = None  # smoke_child's report: hooks inside the run (None for runs in a subprocess)
    rows: list = dataclasses.field(init=False)  # metrics.csv
    saved: dict = dataclasses.field(init=False)  # config.yaml

    def __post_init__(self):
        with open(self.folder / "metrics.csv") as file:
            object.__setattr__(self, "rows", list(csv.DictReader(file)))
        object.__setattr__(self, "saved", yaml.safe_load((self.folder / "config.yaml").read_text()))
