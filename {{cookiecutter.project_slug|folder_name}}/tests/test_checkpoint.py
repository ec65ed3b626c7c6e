import contextlib
import csv
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from {{ cookiecutter.package_name }} import checkpoint
from {{ cookiecutter.package_name }} import train as train_module
from {{ cookiecutter.package_name }}.checkpoint import SCRIPT
from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.errors import UserError


def metrics_without_time(run: Path) -> list[dict]:
    with open(run / "metrics.csv") as file:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(file)]


def epochs_trained(output: str) -> list[int]:
    """The epochs a run printed a result line for: a resumed run must start after its checkpoint's epoch."""
    return [int(line.split()[1]) for line in output.splitlines() if line.startswith("epoch ")]


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), key
        elif isinstance(a[key], dict):
            assert_same_state(a[key], b[key])
        else:
            assert a[key] == b[key], key


@pytest.mark.parametrize(
    ("layout", "workers"),
    [("synthetic", 0), pytest.param("synthetic", 2, marks=pytest.mark.slow), ("held out, balanced", 0)],
)
def test_resumed_run_equals_an_uninterrupted_one_bitwise(
    tiny_config, tmp_path, monkeypatch, image_folder, layout, workers
):
    cfg = replace(tiny_config, epochs=3, max_steps_per_epoch=3, deterministic=True, num_workers=workers)
    photos = image_folder / "train"  # class folders, held out by the run: 6 cats and (below) 2 dogs
    if layout != "synthetic":
        for image in sorted((photos / "dogs").iterdir())[2:]:
            image.unlink()
        cfg = replace(cfg, data=str(photos), image_size=16, batch_size=2, sampler="balanced", class_weights="auto")
    train_module.train(replace(cfg, output_dir=str(tmp_path / "straight")))

    interrupted = tmp_path / "interrupted"
    original, calls = train_module.train_one_epoch, []

    def killed_in_epoch_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(train_module, "train_one_epoch", killed_in_epoch_3)
    with pytest.raises(KeyboardInterrupt):
        train_module.train(replace(cfg, output_dir=str(interrupted)))
    assert torch.load(interrupted / "last.pt", weights_only=True)["epoch"] == 2
    if layout != "synthetic":  # new photos: only the run's own split.csv keeps its training and validation images
        for i in range(4):
            shutil.copy(photos / "cats" / "0.png", photos / "cats" / f"new{i}.png")

    # A new process, as after a crash: the saved config plus --resume auto.
    env = {**os.environ, "PYTHONPATH": str(Path(train_module.__file__).parents[1]), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "train"]
    command += ["--config", str(interrupted / "config.yaml"), "--resume", "auto"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # Resumed where it should: a restart from scratch would reproduce the deterministic run bit for bit too.
    assert f"resumed from {interrupted / 'last.pt'} after epoch 2" in done.stdout
    assert epochs_trained(done.stdout) == [3]

    straight = tmp_path / "straight"
    assert_same_state(torch.load(straight / "model.pt"), torch.load(interrupted / "model.pt"))
    last = [torch.load(run / "last.pt", weights_only=True) for run in (straight, interrupted)]
    assert_same_state(last[0]["optimizer"], last[1]["optimizer"])
{% if cookiecutter.use_ema %}
    assert_same_state(last[0]["ema"], last[1]["ema"])
{% endif %}
    assert metrics_without_time(straight) == metrics_without_time(interrupted)


def test_checkpoints_hold_plain_data_and_best_follows_val_acc(tiny_config, tmp_path):
    result = train_module.train(replace(tiny_config, epochs=2))
    run = Path(result["config"].output_dir)
    for name in ("last.pt", "best.pt"):
        assert torch.serialization.get_unsafe_globals_in_checkpoint(run / name) == []
        state = torch.load(run / name, map_location="cpu", weights_only=True)
        assert {"model", "optimizer", "scheduler", "epoch", "metrics", "rng", "config"} <= state.keys()
    best = torch.load(run / "best.pt", weights_only=True)
    assert best["metrics"][-1]["val_acc"] == max(row["val_acc"] for row in result["metrics"])
    assert not list(run.glob("*.tmp"))


def test_resume_refuses_a_checkpoint_of_another_model(tiny_config, tmp_path):
    train_module.train(replace(tiny_config, model="small_cnn"))
    other = replace(tiny_config, model="resnet18", resume=str(tmp_path / "run" / "last.pt"), epochs=2)
    with pytest.raises(UserError, match="different run .*model"):
        train_module.train(other)


def test_resume_names_what_a_checkpoint_of_another_set_of_tricks_lacks(tiny_config, tmp_path):
    train_module.train(tiny_config)
    state = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    del state["scheduler"]
    torch.save(state, tmp_path / "other.pt")
    with pytest.raises(UserError, match="differs in: scheduler"):
        train_module.train(replace(tiny_config, resume=str(tmp_path / "other.pt"), output_dir=str(tmp_path / "new")))


def test_resume_auto_without_checkpoints_starts_fresh(tiny_config, capsys):
    train_module.train(replace(tiny_config, resume="auto"))
    assert "starting from scratch" in capsys.readouterr().out


def test_evaluate_accepts_a_checkpoint(tiny_config, tmp_path, capsys):
    train_module.train(tiny_config)
    assert main(["evaluate", "--weights", str(tmp_path / "run" / "best.pt"), "--device", "cpu"]) == 0
    assert "accuracy" in capsys.readouterr().out


def test_resume_of_a_missing_or_truncated_checkpoint_exits_4(tiny_config, tmp_path, capsys):
    train_module.train(tiny_config)
    last = tmp_path / "run" / "last.pt"
    assert main(["train", "--config", str(tmp_path / "run" / "config.yaml"), "--resume", str(last) + "x"]) == 4
    assert "does not exist" in capsys.readouterr().err
    last.write_bytes(last.read_bytes()[:1000])
    assert main(["train", "--config", str(tmp_path / "run" / "config.yaml"), "--resume", str(last)]) == 4
    assert "cannot be read" in capsys.readouterr().err


def test_a_diverging_run_keeps_the_last_good_checkpoint(tiny_config, tmp_path, capsys, monkeypatch):
    train_module.train(tiny_config)
    last = tmp_path / "run" / "last.pt"
    good = last.read_bytes()
    nan_loss = lambda self, logits, target: logits.sum() * float("nan")  # noqa: E731
    monkeypatch.setattr(torch.nn.CrossEntropyLoss, "forward", nan_loss)
    args = ["train", "--config", str(tmp_path / "run" / "config.yaml"), "--resume", "auto", "--epochs", "2"]
    assert main(args) == 7
    assert "epoch 2: the training loss became NaN or infinite at step 1" in capsys.readouterr().err
    assert last.read_bytes() == good and torch.load(last, weights_only=True)["epoch"] == 1


def test_resume_with_more_epochs_follows_the_new_schedule(tiny_config, tmp_path):
    train_module.train(replace(tiny_config, lr=0.1))
    rows = train_module.train(replace(tiny_config, lr=0.1, epochs=3, resume="auto"))["metrics"]
    expected = [0.1, 0.1 * 0.75, 0.1 * 0.25]  # epoch 1 ran with epochs=1; then (1 + cos(pi * e / 3)) / 2
    assert [row["lr"] for row in rows] == pytest.approx(expected)


def snapshot(run: Path) -> dict:
    return {path: path.read_bytes() for path in sorted(run.rglob("*")) if path.is_file()}


def refused(args: list[str], capsys, code: int, message: str) -> None:
    assert main(args) == code
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]  # notices may come before it
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in err, err


SMOKE = ["train", "--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "8", "--device", "cpu", "--no-plots"]


def test_a_finished_run_is_only_continued_from_its_own_newest_checkpoint_with_more_epochs(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main([*SMOKE, "--output-dir", str(a)]) == 0 and main([*SMOKE, "--output-dir", str(b), "--seed", "1"]) == 0
    shutil.copyfile(b / "last.pt", b / "epoch1.pt")
    assert main([*SMOKE, "--output-dir", str(b), "--resume", "auto", "--epochs", "2", "--seed", "1"]) == 0
    runs = {run: snapshot(run) for run in (a, b)}
    # another run's checkpoint into a finished run
    refused([*SMOKE, "--output-dir", str(b), "--resume", str(a / "last.pt"), "--epochs", "3"], capsys, 5, "another run")
    # an earlier epoch of the run itself would replace its final weights with a branch
    refused([*SMOKE, "--resume", str(b / "epoch1.pt"), "--epochs", "3"], capsys, 5, "went on to epoch 2")
    # nothing left to train
    refused([*SMOKE, "--output-dir", str(a), "--resume", "auto"], capsys, 5, "pass more --epochs")
    # a mistyped checkpoint name: its folder (the default output dir) stays untouched
    refused([*SMOKE, "--resume", str(a / "lats.pt"), "--epochs", "2"], capsys, 4, "does not exist")
    # the checkpoints are gone: --resume auto must not quietly start the finished run again
    for name in ("last.pt", "best.pt"):
        (a / name).unlink()
    runs[a] = snapshot(a)
    refused([*SMOKE, "--output-dir", str(a), "--resume", "auto", "--epochs", "2"], capsys, 5, "holds a finished run")
    assert {run: snapshot(run) for run in (a, b)} == runs


def test_a_refused_resume_writes_nothing(tiny_config, tmp_path, capsys):
    train_module.train(tiny_config)
    run = tmp_path / "run"
    before = snapshot(run)
    other = ["--model", "resnet18"] if tiny_config.model != "resnet18" else ["--model", "small_cnn"]
    refused([*SMOKE, *other, "--output-dir", str(run), "--resume", "auto", "--epochs", "2"], capsys, 4, "different run")
    assert snapshot(run) == before
    assert main(["evaluate", "--weights", str(run / "model.pt"), "--device", "cpu"]) == 0  # config.yaml still fits


def test_an_unfinished_run_is_not_restarted_over_its_checkpoints(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*SMOKE, "--output-dir", str(run)]) == 0
    (run / "model.pt").unlink()  # as if stopped after epoch 1
    before = snapshot(run)
    refused([*SMOKE, "--output-dir", str(run), "--epochs", "2"], capsys, 5, "holds an unfinished run")
    assert snapshot(run) == before
    assert main([*SMOKE, "--output-dir", str(run), "--epochs", "2", "--resume", "auto"]) == 0


ENV = {**os.environ, "PYTHONPATH": str(Path(train_module.__file__).parents[1]), "OMP_NUM_THREADS": "1"}
MODULE = [sys.executable, "-m", "{{ cookiecutter.package_name }}"]


def start_training(run: Path, *extra: str, group: bool = False) -> subprocess.Popen:
    command = [*MODULE, "train", "--epochs", "3", "--device", "cpu", "--max-steps-per-epoch", "8", "--batch-size", "16"]
    command += ["--deterministic", "--output-dir", str(run), *extra]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    return subprocess.Popen(command, env=ENV, start_new_session=group, **pipes)


def continue_as_told(err: str) -> subprocess.CompletedProcess:
    """Run the command the stop message printed (through `python -m`: the console script may not be installed)."""
    told = err.split(f"continue with: {SCRIPT} ", 1)[1].splitlines()[0]
    return subprocess.run([*MODULE, *shlex.split(told)], env=ENV, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_sigterm_mid_epoch_stops_resumably_and_the_resumed_run_is_exact(tiny_config, tmp_path, workers):
    straight = replace(tiny_config, epochs=3, max_steps_per_epoch=8, deterministic=True, num_workers=workers)
    train_module.train(replace(straight, output_dir=str(tmp_path / "a")))

    run = tmp_path / "b"
    job = start_training(run, "--num-workers", str(workers))
    for line in job.stdout:  # wait for the end of epoch 1, then stop the job in the middle of epoch 2
        if line.startswith("epoch 1 "):
            job.send_signal(signal.SIGTERM)
            break
    out, err = job.communicate(timeout=120)
    assert job.returncode == 128 + signal.SIGTERM, err
    again = f"continue with: {SCRIPT} train --config {run / 'config.yaml'} --resume auto"
    assert f"stopped by SIGTERM: {run / 'last.pt'} holds the last completed epoch; {again}" in err
    saved = torch.load(run / "last.pt", weights_only=True)["epoch"]
    assert saved in (1, 2)  # 2 if epoch 2 ended first

    resumed = continue_as_told(err)  # the printed command continues this very run
    assert resumed.returncode == 0, resumed.stderr
    assert f"after epoch {saved}" in resumed.stdout and epochs_trained(resumed.stdout) == list(range(saved + 1, 4))
    assert_same_state(torch.load(tmp_path / "a" / "model.pt"), torch.load(run / "model.pt"))
{% if cookiecutter.use_ema %}
    assert_same_state(torch.load(tmp_path / "a" / "ema.pt"), torch.load(run / "ema.pt"))
{% endif %}
    assert metrics_without_time(tmp_path / "a") == metrics_without_time(run)


def wait_for_workers(pid: int, count: int, seconds: float = 60) -> None:
    """Until `pid` has `count` child processes (its DataLoader workers), read from Linux's /proc."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        children = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError):
                children += int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid
        if children >= count:
            time.sleep(0.3)  # and into their first batches
            return
        time.sleep(0.05)
    raise AssertionError(f"the run did not start {count} data-loading workers within {seconds} s")


@pytest.mark.slow
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_whole_process_group_stops_once_without_a_traceback(tmp_path, number):
    """As `timeout`, SLURM and Ctrl-C do: the signal reaches the data-loading workers too."""
    args = ["--num-workers", "2", "--epochs", "5", "--max-steps-per-epoch", "40"]
    job = start_training(tmp_path / "run", *args, group=True)
    for line in job.stdout:
        if line.startswith("epoch 1 "):
            wait_for_workers(job.pid, 2)  # epoch 2's workers are loading batches (a fixed sleep missed them under load)
            os.killpg(job.pid, number)
            break
    out, err = job.communicate(timeout=120)
    assert job.returncode == 128 + number, err
    name = signal.Signals(number).name
    assert err.count(f"{name}: stopping at the next resumable point") == 1 and err.count(f"stopped by {name}") == 1
    assert "Traceback" not in err and "DataLoader worker" not in err, err


@pytest.mark.slow
def test_a_second_signal_stops_at_once(tmp_path):
    job = start_training(tmp_path / "run", "--epochs", "50", "--max-steps-per-epoch", "40")
    for line in job.stdout:
        if line.startswith("epoch 1 "):
            job.send_signal(signal.SIGINT)
            job.send_signal(signal.SIGINT)
            break
    job.communicate(timeout=120)
    assert job.returncode == 128 + signal.SIGINT


def test_a_gpu_run_keeps_the_random_state_of_its_own_gpu_only(monkeypatch):
    """One state for the GPU in use, not one per visible GPU: resuming where fewer GPUs are visible still works."""
    restored = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # a GPU run
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": torch.tensor([7], dtype=torch.uint8))
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: pytest.fail("saved every visible GPU's state"))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device="cuda": restored.append(state))
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: pytest.fail("restored several GPUs' states"))
    generator = torch.Generator()
    state = checkpoint.rng_state(generator)
    checkpoint.restore_rng(state, generator)
    assert torch.equal(state["cuda"], torch.tensor([7], dtype=torch.uint8)) and restored == [state["cuda"]]


def test_a_cpu_run_keeps_no_gpu_random_state():
    assert "cuda" not in checkpoint.rng_state(torch.Generator())  # nothing initialised CUDA in this process
