"""Crash safety: a training run killed with SIGKILL at any moment, checkpoint writes included, leaves a
checkpoint that `--resume auto` loads, and the resumed run continues after that checkpoint's epoch and
finishes. The kills land at named points (an optimizer step, halfway through a file's write, the plots), never
after a number of seconds: the same moment of the run whatever the machine's load."""

import random
import signal
from pathlib import Path

import pytest
import smoke_child
import torch
from render import package_of
from runners import epochs_trained

pytestmark = [pytest.mark.slow, pytest.mark.processes]
EPOCHS = 4
STEPS = 10  # optimizer steps per epoch (--max-steps-per-epoch)
STEP_KILLS = 16  # SIGKILL as a random optimizer step of epochs 2 to 4 begins: epoch 1's checkpoint exists then
SAVE_KILLS = 4  # SIGKILL halfway through the n-th torch.save (last.pt after each epoch), or as the plots start


def start(forkserver, project: Path, argv: list[str], log: Path, point: str = "", n: int = 0):
    child = forkserver.Process(
        target=smoke_child.train_until_killed,
        args=(str(project / "src"), package_of(project), argv, str(log), point, n),
    )
    child.start()
    return child


def finish(child, timeout: float = 120) -> None:
    """Wait for a run to end; one still running after `timeout` seconds is killed (and fails the test's checks)."""
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()


def kill_points() -> list[tuple[str, int]]:
    rng = random.Random(6)
    steps = sorted(rng.sample(range(STEPS + 1, EPOCHS * STEPS + 1), STEP_KILLS))
    return [("step", n) for n in steps] + [("save", n) for n in range(1, SAVE_KILLS + 1)] + [("plots", 0)]


def saved_epoch(run: Path) -> int:
    """The newest epoch a loadable checkpoint holds, as `--resume auto` picks it (0: none)."""
    epochs = [0]
    for path in run.glob("*.pt"):
        try:
            epochs.append(torch.load(path, weights_only=True).get("epoch", 0))
        except Exception:  # a half-written file: --resume auto skips it too
            continue
    return max(epochs)


@pytest.mark.parametrize(("point", "n"), kill_points())
def test_killed_run_resumes_and_finishes(default_project, forkserver, tmp_path, point, n):
    run = tmp_path / "run"
    argv = ["train", "--epochs", str(EPOCHS), "--max-steps-per-epoch", str(STEPS), "--batch-size", "32"]
    argv += ["--device", "cpu", "--output-dir", str(run)]
    child = start(forkserver, default_project, argv, tmp_path / "killed.log", point, n)
    finish(child)
    assert child.exitcode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-2000:]  # killed mid-run
    saved = saved_epoch(run)
    assert saved >= 1 or point == "save"  # a kill in epoch 2 or later always leaves a checkpoint to resume from

    resumed = start(forkserver, default_project, [*argv, "--resume", "auto"], tmp_path / "resumed.log")
    finish(resumed)
    log = (tmp_path / "resumed.log").read_text()
    assert resumed.exitcode == 0, log[-3000:]
    # It continued after the checkpoint's epoch: no epoch trained again, none skipped.
    assert (f"after epoch {saved}" in log) if saved else ("starting from scratch" in log), log[-3000:]
    assert epochs_trained(log) == list(range(saved + 1, EPOCHS + 1)), log[-3000:]
    assert torch.load(run / "last.pt", weights_only=True)["epoch"] == EPOCHS
    assert torch.load(run / "model.pt", weights_only=True)
    assert len((run / "metrics.csv").read_text().splitlines()) == EPOCHS + 1
