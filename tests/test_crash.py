"""Crash safety: a training run killed with SIGKILL at any moment, checkpoint writes included, leaves a
checkpoint that `--resume auto` loads, and the resumed run continues after that checkpoint's epoch and
finishes. The timed kills fire after the first checkpoint exists, so each one exercises a real resume."""

import csv
import random
import signal
import time
from pathlib import Path

import pytest
import smoke_child
import torch
from render import package_of
from runners import epochs_trained

pytestmark = pytest.mark.slow
EPOCHS = 4
TIMED_KILLS = 16  # SIGKILL at a random moment of epochs 2 to 4, whatever this machine's speed
SAVE_KILLS = 4  # SIGKILL halfway through the n-th torch.save (last.pt after each epoch), or as the plots start


def start(forkserver, project: Path, argv: list[str], log: Path, die_in_save=None):
    child = forkserver.Process(
        target=smoke_child.train_until_killed,
        args=(str(project / "src"), package_of(project), argv, str(log), die_in_save),
    )
    child.start()
    return child


def kill_points() -> list[tuple[str, float | int]]:
    rng = random.Random(6)
    # "after": the kill's moment as a fraction of the epochs left once the first last.pt appeared
    return [("after", round(rng.uniform(0.0, 0.9), 2)) for _ in range(TIMED_KILLS)] + [
        ("in save", n) for n in [*range(1, SAVE_KILLS + 1), "plots"]
    ]


def saved_epoch(run: Path) -> int:
    """The newest epoch a loadable checkpoint holds, as `--resume auto` picks it (0: none)."""
    epochs = [0]
    for path in run.glob("*.pt"):
        try:
            epochs.append(torch.load(path, weights_only=True).get("epoch", 0))
        except Exception:  # a half-written file: --resume auto skips it too
            continue
    return max(epochs)


@pytest.mark.parametrize(("how", "when"), kill_points())
def test_killed_run_resumes_and_finishes(default_project, forkserver, tmp_path, how, when):
    run = tmp_path / "run"
    argv = ["train", "--epochs", str(EPOCHS), "--max-steps-per-epoch", "20", "--batch-size", "32"]
    argv += ["--device", "cpu", "--output-dir", str(run)]
    if how == "after":
        child = start(forkserver, default_project, argv, tmp_path / "killed.log")
        deadline = time.monotonic() + 120
        while not (run / "last.pt").exists() and child.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(run / "metrics.csv") as file:  # written before last.pt
            epoch_seconds = float(next(csv.DictReader(file))["seconds"])
        time.sleep(when * (EPOCHS - 1) * epoch_seconds)
        child.kill()
    else:
        child = start(forkserver, default_project, argv, tmp_path / "killed.log", die_in_save=when)
    child.join(120)
    assert child.exitcode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-2000:]  # killed mid-run
    saved = saved_epoch(run)
    assert saved >= 1 or how == "in save"  # a timed kill always leaves a checkpoint to resume from

    resumed = start(forkserver, default_project, [*argv, "--resume", "auto"], tmp_path / "resumed.log")
    resumed.join(120)
    log = (tmp_path / "resumed.log").read_text()
    assert resumed.exitcode == 0, log[-3000:]
    # It continued after the checkpoint's epoch: no epoch trained again, none skipped.
    assert (f"after epoch {saved}" in log) if saved else ("starting from scratch" in log), log[-3000:]
    assert epochs_trained(log) == list(range(saved + 1, EPOCHS + 1)), log[-3000:]
    assert torch.load(run / "last.pt", weights_only=True)["epoch"] == EPOCHS
    assert torch.load(run / "model.pt", weights_only=True)
    assert len((run / "metrics.csv").read_text().splitlines()) == EPOCHS + 1
