{% if cookiecutter.use_distributed %}
import contextlib
import csv
{% if cookiecutter.use_checkpointing %}
import dataclasses
{% endif %}
import os
import shlex
import signal
{% if cookiecutter.use_checkpointing %}
import socket
{% endif %}
import subprocess
import sys
{% if cookiecutter.use_checkpointing %}
import textwrap
{% endif %}
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import CRITERION, plain_runtime
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core import distributed, launcher
from {{ cookiecutter.package_name }}.core.errors import DataError, TrainingDiverged, UserError
from {{ cookiecutter.package_name }}.data import loaders, samplers, sources
from {{ cookiecutter.package_name }}.models import build_model
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.engine import evaluate, train_one_epoch

CPU = torch.device("cpu")


@pytest.mark.parametrize(("world", "size"), [(2, 10), (3, 10), (4, 3)])
def test_validation_shards_cover_every_image_exactly_once(monkeypatch, world, size):
    shards = []
    for rank in range(world):
        monkeypatch.setattr(distributed, "rank", lambda rank=rank: rank)
        monkeypatch.setattr(distributed, "world_size", lambda: world)
        shards.append(list(distributed.ShardSampler(range(size))))
    assert sorted(index for shard in shards for index in shard) == list(range(size))


def test_balanced_sampling_gives_each_rank_its_own_share_of_one_global_draw(monkeypatch):
    targets = [0] * 30 + [1] * 6 + [2]
{% if cookiecutter.task == "multi_label" %}
    targets = torch.eye(3)[targets]  # one label each, as multi-hot rows
{% endif %}
    monkeypatch.setattr(samplers, "rank", lambda: 0)
    monkeypatch.setattr(samplers, "world_size", lambda: 1)
    whole = list(samplers.BalancedSampler(targets, torch.Generator().manual_seed(0)))
    shares = []
    for rank in range(2):  # every rank's loader generator starts from the same seed and moves in step
        monkeypatch.setattr(samplers, "rank", lambda rank=rank: rank)
        monkeypatch.setattr(samplers, "world_size", lambda: 2)
        shares.append(list(samplers.BalancedSampler(targets, torch.Generator().manual_seed(0))))
    assert len(shares[0]) == len(shares[1]) == 19  # 37 draws padded to 38: equal steps on both ranks
    assert [index for pair in zip(*shares, strict=True) for index in pair][:37] == whole
    assert shares[0] != shares[1]


@pytest.mark.parametrize(
    ("answers", "cuda", "expected"),
    [
        ({"gpus": "0,1,2"}, True, 3),
        ({"gpus": "0,1,2"}, False, 1),
        ({"gpus": "0,1", "device": "cpu"}, True, 1),
        ({"gpus": "0,1", "device": "mps"}, True, 1),  # GPUs count for CUDA only
        ({"gpus": "", "device": "cpu", "nproc": 2}, False, 2),
        ({"gpus": "cpu"}, True, 1),
    ],
)
def test_one_worker_per_gpu_id_or_as_many_as_nproc(monkeypatch, answers, cuda, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4 if cuda else 0)
    assert launcher.workers_wanted(TrainConfig(**answers)) == expected


@pytest.mark.parametrize("answers", [{"gpus": "0,1"}, {"gpus": "0", "nproc": 2}])
def test_more_workers_than_visible_gpus_is_one_clear_error(monkeypatch, answers):
    """On a one-GPU machine, rank 1 would die in CUDA with 'invalid device ordinal' after a raw traceback."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(UserError, match="2 workers need 2 GPUs but 1 is visible with --gpus 0"):
        launcher.workers_wanted(TrainConfig(**answers))


def test_a_global_batch_must_divide_by_the_world(tiny_config, monkeypatch):
    monkeypatch.setattr(distributed, "world_size", lambda: 3)
    with pytest.raises(UserError, match="--batch-size 16 is global and must divide by the 3 processes"):
        train_module.train(tiny_config)


def test_two_cpu_workers_through_the_launcher(tiny_config, tmp_path, capfd):
    run = tmp_path / "two"
    args = ["train", "--device", "cpu", "--nproc", "2", "--epochs", "2", "--max-steps-per-epoch", "2"]
    assert main([*args, "--batch-size", "8", "--num-workers", "0", "--output-dir", str(run)]) == 0
    out = capfd.readouterr().out
    assert out.count("distributed: world size 2, backend gloo") == 1  # rank 0 alone prints
    with open(run / "metrics.csv") as file:
        assert [row["epoch"] for row in csv.DictReader(file)] == ["1", "2"]
    assert not any(key.startswith("module.") for key in torch.load(run / "model.pt", weights_only=True))


@pytest.mark.slow
def test_a_user_error_under_nproc_is_said_once_with_the_workers_own_exit_code(tmp_path, capfd):
    """Every rank meets the same bad --data: one line, as a single process says it, not one per rank."""
    bad = ["train", "--device", "cpu", "--data", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "run")]
    alone = main(bad)
    said = capfd.readouterr().err
    assert main([*bad, "--nproc", "2"]) == alone == DataError.exit_code
    assert capfd.readouterr().err == said


# Imported by Python as it starts each worker (sitecustomize, from PYTHONPATH): rank 1 SIGKILLs itself as its
# second epoch begins, once the first is saved, as a machine that runs out of memory kills a process.
DIES_IN_EPOCH_2 = """
import os
import signal

if os.environ.get("RANK") == "1":
    from {{ cookiecutter.package_name }}.training import train

    training, epochs = train.train_one_epoch, []

    def dying(*args, **kwargs):
        epochs.append(len(epochs) + 1)
        if len(epochs) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return training(*args, **kwargs)

    train.train_one_epoch = dying
"""


@pytest.mark.slow
@pytest.mark.parametrize("command", ["train", "tune"])
def test_a_worker_killed_outright_ends_the_job_with_one_line_naming_it_and_how_to_go_on(
    tmp_path, monkeypatch, capfd, command
):
    """Not the surviving rank's gloo traceback (it only saw a connection break), nor a message said to be above."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(DIES_IN_EPOCH_2)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    out, script = tmp_path / command, "{{ cookiecutter.project_slug }}"
    args = [command, "--device", "cpu", "--nproc", "2", "--model", "small_cnn", "--epochs", "2", "--batch-size", "8"]
    args += ["--max-steps-per-epoch", "1", "--num-workers", "0", "--no-plots", "--output-dir", str(out)]
    if command == "tune":
        pytest.importorskip("optuna")
        (tmp_path / "space.yaml").write_text("lr: [0.05]\n")
        args += ["--space", str(tmp_path / "space.yaml"), "--trials", "1"]
        again = f"the same command continues the search: {script} {shlex.join(args)}"
    else:
{% if cookiecutter.use_checkpointing %}
        config = shlex.quote(str(out / "config.yaml"))
        again = f"continue with: {script} train --config {config} --resume auto"
{% else %}
        again = "run it again"
{% endif %}
    assert main(args) == 128 + signal.SIGKILL
    err = capfd.readouterr().err
    assert [line for line in err.splitlines() if "error" in line.lower()] == [
        f"error: worker rank 1 was killed by SIGKILL, and the job stopped; {again}"
    ], err[-3000:]
    assert "Traceback" not in err and "[rank0]" not in err, err[-3000:]
{% if cookiecutter.use_checkpointing %}
    if command == "train":  # the checkpoint named to continue from: the epoch rank 1 finished before it died
        assert torch.load(out / "last.pt", weights_only=True)["epoch"] == 1
{% endif %}
{% if cookiecutter.use_checkpointing %}


# Each worker's random streams made its own (every rank is seeded alike, so a stream restored onto the wrong rank
# would go unseen), and with $STOP_AFTER a stop asked for on rank 1 after that many batches, as SIGTERM asks for it.
OWN_STREAMS = """
import os

if "RANK" in os.environ:
    import random
    import signal

    import numpy as np
    import torch

    from {{ cookiecutter.package_name }}.training import checkpoint, train

    rank, seed_everything = int(os.environ["RANK"]), train.seed_everything

    def own_streams(seed, deterministic):
        seed_everything(seed, deterministic)
        for _ in range(rank):
            torch.rand(1), np.random.rand(), random.random()

    train.seed_everything = own_streams
    if rank == 1 and os.environ.get("STOP_AFTER"):
        after_batch, steps = checkpoint.Checkpoints.after_batch, []

        def stopping(self, progress, update):
            steps.append(progress.step)
            if len(steps) == int(os.environ["STOP_AFTER"]):
                self.stop._request(signal.SIGTERM, None)
            return after_batch(self, progress, update)

        checkpoint.Checkpoints.after_batch = stopping
"""


def _same_streams(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[key], b[key]) if torch.is_tensor(a[key]) else a[key] == b[key] for key in a
    )


@pytest.mark.slow
def test_two_ranks_stopped_mid_epoch_keep_their_own_state_and_resume_to_the_uninterrupted_run(
    tmp_path, monkeypatch, capfd
):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(OWN_STREAMS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    args = ["train", "--device", "cpu", "--nproc", "2", "--model", "small_cnn", "--epochs", "2", "--batch-size", "8"]
    args += ["--max-steps-per-epoch", "4", "--accumulate-steps", "2", "--num-workers", "0", "--no-plots"]
    args += ["--deterministic"]
    straight, run = tmp_path / "straight", tmp_path / "stopped"
    assert main([*args, "--output-dir", str(straight)]) == 0
    monkeypatch.setenv("STOP_AFTER", "5")  # in step 1 of epoch 2: the ranks agree on a stop a step later, at step 2
    with pytest.raises(SystemExit) as stopped:
        main([*args, "--output-dir", str(run)])
    assert stopped.value.code == 128 + signal.SIGTERM, capfd.readouterr().err[-3000:]
    state = torch.load(run / "last.pt", weights_only=True)
    assert state["epoch"] == 1 and [own["step"] for own in state["progress"]] == [2, 2]
    progress, streams = state["progress"], state["rng"]
    assert not torch.equal(progress[0]["loss_sum"], progress[1]["loss_sum"])  # each rank's own batches
    assert not _same_streams(streams[0], streams[1])

    monkeypatch.delenv("STOP_AFTER")
    capfd.readouterr()
    assert main(["train", "--config", str(run / "config.yaml"), "--resume", "auto", "--nproc", "2"]) == 0
    assert f"resumed from {run / 'last.pt'} at step 2 of epoch 2" in capfd.readouterr().out
    ends = [torch.load(folder / "last.pt", weights_only=True) for folder in (straight, run)]
    assert all(_same_streams(a, b) for a, b in zip(ends[0]["rng"], ends[1]["rng"], strict=True))  # rank by rank
    (weights, rows), (expected, expected_rows) = weights_and_metrics(run), weights_and_metrics(straight)
    assert rows == expected_rows and all(torch.equal(weights[key], expected[key]) for key in expected)
{% endif %}


def _lost_then_explained() -> UserError:
    """A UserError raised because a collective failed: tune's other ranks, once rank 0 is gone."""
    try:
        raise RuntimeError("[gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:1: Connection reset by peer")
    except RuntimeError:
        try:
            raise UserError("rank 0 stopped the search; its message says why") from None
        except UserError as exc:
            return exc


STOPPED = ", and the job stopped; {{ 'nothing was saved yet, run it again' if cookiecutter.use_checkpointing else 'run it again' }}"
GLOO = RuntimeError("[gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:1: Connection reset by peer")


@pytest.mark.parametrize(
    ("exits", "said", "line", "code"),
    [
        # every rank met the same bad flag: it is said once, with the workers' exit code
        ({0: 3, 1: 3}, {0: DataError("no data"), 1: DataError("no data")}, "no data", 3),
        # rank 1 met it, and the agent stopped rank 0 before rank 0 said anything
        ({0: -signal.SIGTERM, 1: 3}, {1: DataError("no data")}, "no data", 3),
        # rank 1 was killed outright; rank 0 lost its connection to it
        ({0: 1, 1: -signal.SIGKILL}, {0: GLOO}, f"worker rank 1 was killed by SIGKILL{STOPPED}", 137),
        # rank 0 was killed; rank 1 found it gone and said so
        (
            {1: 2, 0: -signal.SIGKILL},
            {1: _lost_then_explained()},
            f"worker rank 0 was killed by SIGKILL{STOPPED}",
            137,
        ),
        # rank 1 crashed with a traceback of its own, and the agent stopped rank 0 (which saved on SIGTERM)
        ({0: 143, 1: 1}, {}, f"worker rank 1 exited with code 1 (its output is above){STOPPED}", 1),
    ],
)
def test_a_failed_job_says_once_why_with_the_exit_code_of_its_cause(monkeypatch, exits, said, line, code):
    """However the agent found the workers, and in whichever order they ended."""

    def failed(arguments):
        for rank, exc in said.items():  # as each worker's main() hands its error over
            monkeypatch.setenv("RANK", str(rank))
            assert launcher.worker_failed(exc) == getattr(exc, "exit_code", 1)
        failures = {rank: ProcessFailure(rank, 1000 + rank, exitcode, "<N/A>") for rank, exitcode in exits.items()}
        raise ChildFailedError("train", failures)

    monkeypatch.setattr(launcher, "run", failed)
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # launch() extends it: undone after the test
    with pytest.raises(UserError) as failure:
        launcher.launch(2, ["train"], "{{ cookiecutter.package_name }}")
    assert (str(failure.value), failure.value.exit_code) == (line, code)
    assert launcher.REPORTS not in os.environ


def _model() -> nn.Module:
    torch.manual_seed(0)  # no BatchNorm: halves of a batch on two ranks must add up to the whole batch
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(16, 5))


def _batches() -> list:
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(2, 8, 3, 8, 8, generator=generator)
{% if cookiecutter.task == "multi_label" %}
    targets = torch.randint(0, 2, (2, 8, 5), generator=generator).float()  # multi-hot rows of 5 classes
{% else %}
    targets = torch.randint(0, 5, (2, 8), generator=generator)
{% endif %}
    return list(zip(images, targets, strict=True))


def _epoch(model, batches) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    train_one_epoch(model, batches, CRITERION(), optimizer, plain_runtime())


@pytest.fixture
def one_rank_group(tmp_path):
    """A real process group of one rank: DDP's hooks run in this process, without a launcher."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


{% if cookiecutter.use_checkpointing %}
def test_every_run_in_a_process_group_agrees_over_one_cpu_group(one_rank_group):
    """tune trains many runs in one process group: a gloo group each would leave sockets and threads open."""
    assert distributed.Agreement().group is distributed.Agreement().group


{% endif %}
def test_each_split_of_a_distributed_job_gets_its_sampler(one_rank_group, monkeypatch):
    dataset, generator = sources.{{ "SyntheticTags" if cookiecutter.task == "multi_label" else "SyntheticImages" }}(10, seed=0), torch.Generator()
    train = samplers._sampler("train", dataset, TrainConfig(seed=5), generator)
    assert isinstance(train, torch.utils.data.DistributedSampler) and train.shuffle
    assert train.dataset is dataset and train.seed == 5  # every rank shuffles alike, each epoch anew
    val = samplers._sampler("val", dataset, TrainConfig(), generator)
    assert isinstance(val, distributed.ShardSampler) and list(val) == list(range(10))  # one rank: every image once
    balanced = samplers._sampler("train", dataset, TrainConfig(sampler="balanced"), generator)
    assert isinstance(balanced, samplers.BalancedSampler) and balanced.generator is generator
    monkeypatch.setattr(samplers, "world_size", lambda: 3)  # three ranks share one draw of the ten images
    assert len(samplers.BalancedSampler(dataset.targets, generator)) == 4


def test_accumulation_all_reduces_once_per_group_not_per_batch(one_rank_group):
    model = distributed.wrap(_model(), CPU)
    all_reduces = []

    def counting_hook(state, bucket):
        all_reduces.append(bucket.index())
        done = torch.futures.Future()
        done.set_result(bucket.buffer())
        return done

    model.register_comm_hook(None, counting_hook)
    batches = [(images[:4], targets[:4]) for images, targets in _batches() for _ in range(2)]  # 4 batches
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    train_one_epoch(model, batches, CRITERION(), optimizer, plain_runtime(), accumulate_steps=2)
    assert all_reduces == [0, 0]  # one bucket, reduced at the end of each group of 2 batches


def test_a_rank_stops_when_its_own_or_another_ranks_loss_diverged_naming_its_own_step(monkeypatch):
    broken = _model()
    broken[-1].bias.data.fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match="^the training loss became NaN or infinite at step 1; "):
        _epoch(broken, _batches())

    def another_rank_diverged(totals):
        totals[-1] = 1.0  # the summed "diverged" flag: this rank's own loss stayed finite
        return totals

    monkeypatch.setattr(distributed, "all_reduce", another_rank_diverged)
    with pytest.raises(TrainingDiverged, match="^the training loss became NaN or infinite in another process; "):
        _epoch(_model(), _batches())


def _rank_trains_on_its_half(rank: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        model = _model()
        _epoch(distributed.wrap(model, CPU), [(images[rank::2], targets[rank::2]) for images, targets in _batches()])
        torch.save(model.state_dict(), f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_ranks_on_half_batches_take_the_steps_of_one_process_on_whole_batches(tmp_path):
    torch.multiprocessing.spawn(_rank_trains_on_its_half, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=2)
    reference = _model()
    initial = {key: value.clone() for key, value in reference.state_dict().items()}
    _epoch(reference, _batches())
    ranks = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=True) for rank in (0, 1)]
    for key, value in reference.state_dict().items():
        assert not torch.equal(value, initial[key]), key  # the steps did move the weights
        assert torch.equal(ranks[0][key], ranks[1][key]), key  # gradients were averaged across the ranks
        torch.testing.assert_close(ranks[0][key], value, rtol=1e-5, atol=1e-6, msg=key)


def _validation(folder: str) -> dict:
    """The figures of one fixed model on the validation images of `folder`: global batch 2, one image per rank."""
    cfg = TrainConfig(data=folder, image_size=16, batch_size=2, num_workers=0, mean=[0.5] * 3, std=[0.5] * 3)
    torch.manual_seed(0)
    model = build_model("small_cnn", 2)
    return evaluate(model, loaders.build_data(cfg, CPU, train=False).val, plain_runtime(), num_classes=2)


def _rank_validates_its_share(rank: int, store: str, folder: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        figures = _validation(folder)
        if rank == 0:
            torch.save(figures, f"{out}/figures.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_ranks_validate_to_the_figures_of_one_process(image_folder, tmp_path):
    """5 validation images on 2 ranks: the figures equal those of a single process (no image counted twice to even
    out the ranks, every rank's share counted)."""
    (image_folder / "val" / "dogs" / "2.png").unlink()
    args = (str(tmp_path / "store"), str(image_folder), str(tmp_path))
    torch.multiprocessing.spawn(_rank_validates_its_share, args=args, nprocs=2)
    together, alone = torch.load(tmp_path / "figures.pt", weights_only=True), _validation(str(image_folder))
{% if cookiecutter.task == "multi_label" %}
    assert len(together["targets"]) == len(alone["targets"]) == 5  # each image once, in the ranks' order
    assert torch.equal(together["targets"].sum(0), alone["targets"].sum(0))
    assert together["val_map"] == pytest.approx(alone["val_map"]) and together["val_acc"] == alone["val_acc"]
{% else %}
    assert int(alone["confusion"].sum()) == 5 and torch.equal(together["confusion"], alone["confusion"])
    assert together["val_acc"] == alone["val_acc"]
{% endif %}
    assert together["val_loss"] == pytest.approx(alone["val_loss"], rel=1e-6)


def listening_addresses(root_pid: int) -> set[str]:
    """Local addresses of the listening TCP sockets of a process and its descendants, read from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grown = {root_pid}, True
    while grown:
        children = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree, grown = tree | children, bool(children)
    inodes = set()
    for pid in tree:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state, inode = line.split()[1], line.split()[3], line.split()[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                addresses.add(local.split(":")[0])
    return addresses


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1 as /proc writes them


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads listening sockets from Linux's /proc")
def test_a_one_machine_job_listens_on_loopback_only(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(train_module.__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "train", "--device", "cpu"]
    command += ["--nproc", "2", "--epochs", "2", "--max-steps-per-epoch", "40", "--batch-size", "8"]
    command += ["--output-dir", str(tmp_path)]
    job = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = set()
    while job.poll() is None and not (tmp_path / "model.pt").exists():
        seen |= listening_addresses(job.pid)
        time.sleep(0.2)
    assert job.wait(timeout=300) == 0, job.stderr.read()
    assert seen and seen <= LOOPBACK, f"listening beyond loopback: {seen - LOOPBACK}"


@pytest.mark.parametrize(("local_rank", "order"), [("0", ["download", "barrier"]), ("1", ["barrier", "download"])])
def test_local_rank_0_downloads_first_and_the_others_wait_for_it(monkeypatch, local_rank, order):
    """Every rank downloading torchvision's files at once races on the same paths on the first run."""
    events = []
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    monkeypatch.setattr(distributed, "barrier", lambda: events.append("barrier"))
    with distributed.local_main_first():
        events.append("download")
    assert events == order
{% if cookiecutter.use_checkpointing %}


def test_workers_restarted_by_torchrun_continue_from_the_newest_checkpoint_of_their_run(monkeypatch, capsys):
    for name in ("TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"):
        monkeypatch.delenv(name, raising=False)
    cfg = TrainConfig(output_dir="runs/a", init_from="weights.pt", overwrite=True)
    assert distributed.continue_after_restart(cfg) is cfg  # not under torchrun --max-restarts
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "3")
    assert distributed.continue_after_restart(cfg) is cfg  # the first start: as given
    with pytest.raises(UserError, match="^torchrun --max-restarts restarts into the same run only with --output-dir"):
        distributed.continue_after_restart(TrainConfig())  # a folder named by the time: another one each start
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    continued = dataclasses.replace(cfg, init_from=None, overwrite=False, resume="auto")  # how it began is done
    assert distributed.continue_after_restart(cfg) == continued
    assert "restart 2 by torchrun: continuing from the newest checkpoint" in capsys.readouterr().out
    resumed = TrainConfig(resume="runs/b/last.pt")  # its folder: the one that run continues in
    assert distributed.continue_after_restart(resumed) == TrainConfig(resume="auto", output_dir="runs/b")


def test_a_restarted_worker_trains_on_from_its_runs_checkpoint_not_anew(tiny_config, monkeypatch, capsys):
    """train() itself under torchrun's restart count: the run of the first start goes on after its last epoch, even
    though that start was told --overwrite."""
    first = train_module.train(tiny_config)
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "2")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    capsys.readouterr()
    again = train_module.train(dataclasses.replace(tiny_config, epochs=2, overwrite=True))
    out = capsys.readouterr().out
    assert "restart 1 by torchrun: continuing from the newest checkpoint" in out and "resumed from" in out
    assert again["metrics"][0] == first["metrics"][0]  # epoch 1 as the first start trained it, its time included


@pytest.mark.parametrize(
    ("codes", "exit_code"), [([143, 143], 143), ([138, 138], 138), ([-signal.SIGTERM, 143], 143), ([143, 1], 1)]
)
def test_workers_stopped_by_a_signal_end_the_launcher_with_their_code_not_as_a_failure(monkeypatch, codes, exit_code):
    """A scheduler that signals one worker of `--nproc 2`: every worker saves and exits 128 + signal."""
    failures = {rank: ProcessFailure(rank, 1000 + rank, code, "<N/A>") for rank, code in enumerate(codes)}

    def failed(arguments):
        raise ChildFailedError("train", failures)

    monkeypatch.setattr(launcher, "run", failed)
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # launch() extends it: undone after the test
    stop = 1 not in codes  # rank 0 stopped by the agent as it exited after rank 1: a stop too
    with pytest.raises(SystemExit if stop else UserError) as stopped:
        launcher.launch(2, ["train"], "{{ cookiecutter.package_name }}")
    if stop:
        assert stopped.value.code == exit_code
    else:  # rank 1 failed, and rank 0 saved when the agent then stopped it: rank 1 is why
        assert stopped.value.exit_code == exit_code and str(stopped.value).startswith("worker rank 1 exited with")


# SLURM, without SLURM: the commands slurm.sbatch uses, as small scripts on PATH that run the job's "nodes" here.
SHIMS = {
    "sbatch": """
        # Runs the batch script here, in the background, with the allocation's variables; prints its process id.
        export SLURM_JOB_ID=4242 SLURM_JOB_NODELIST="node[1-2]" SLURM_JOB_NUM_NODES=2
        export SLURM_RESTART_COUNT=${SLURM_RESTART_COUNT:-0}
        bash "$@" > "$SHIM_LOG/job-$SLURM_RESTART_COUNT.out" 2>&1 &
        echo $!
    """,
    "srun": """
        # One task per node, all on this machine, each in a process group of its own (SLURM's cgroup of the step).
        # Like srun, a SIGTERM to it kills the tasks at once: the batch script must signal the step (scancel).
        [[ $1 == --kill-on-bad-exit=1 ]] && shift
        tasks=()
        for ((node = 0; node < SLURM_JOB_NUM_NODES; node++)); do
            SLURM_NODEID=$node SLURM_PROCID=$node setsid "$@" &
            tasks+=($!)
        done
        echo "${tasks[*]}" > "$SHIM_LOG/step-0"
        trap 'for task in "${tasks[@]}"; do kill -KILL -- "-$task" 2>/dev/null; done' TERM
        status=0
        for task in "${tasks[@]}"; do
            while true; do
                wait "$task" && code=0 || code=$?
                if ((code > 128)) && kill -0 "$task" 2>/dev/null; then continue; fi  # a trap interrupted the wait
                ((code == 0)) || status=$code
                break
            done
        done
        exit "$status"
    """,
    "scancel": """
        # --signal=SIG JOB.0: the signal to every process of the job's step 0, as SLURM delivers it.
        [[ $1 == --signal=* && $2 == "$SLURM_JOB_ID.0" ]] || { echo "scancel shim: unexpected $*" >&2; exit 1; }
        for task in $(cat "$SHIM_LOG/step-0"); do kill -s "${1#--signal=}" -- "-$task"; done
    """,
    "scontrol": """
        # The allocation's host names, and a requeue (recorded: the test submits the requeued job itself).
        case "$1 $2" in
            "show hostnames") for ((node = 0; node < SLURM_JOB_NUM_NODES; node++)); do echo localhost; done ;;
            "requeue $SLURM_JOB_ID") echo "$SLURM_JOB_ID" >> "$SHIM_LOG/requeued" ;;
            *) echo "scontrol shim: unexpected $*" >&2; exit 1 ;;
        esac
    """,
}


@pytest.fixture
def slurm(tmp_path) -> dict:
    """The environment of a machine whose PATH has the SLURM shims (and this Python as `python`)."""
    shims, log = tmp_path / "shims", tmp_path / "log"
    shims.mkdir()
    log.mkdir()
    for name, body in SHIMS.items():
        (shims / name).write_text("#!/usr/bin/env bash\nset -uo pipefail\n" + textwrap.dedent(body).lstrip())
        (shims / name).chmod(0o755)
    (shims / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # a link would leave the venv
    (shims / "python").chmod(0o755)
    return {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", "SHIM_LOG": str(log)}


def free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


def weights_and_metrics(run: Path) -> tuple:
    """The final weights and the metrics rows without their seconds: what an interrupted job must reproduce."""
    rows = [line.rsplit(",", 1)[0] for line in (run / "metrics.csv").read_text().splitlines()]
    return torch.load(run / "model.pt", weights_only=True), rows


@pytest.mark.slow
def test_a_slurm_job_warned_before_its_time_limit_requeues_and_resumes_exactly(slurm, tmp_path):
    script = Path(__file__).parents[1] / "scripts" / "slurm.sbatch"
    source = str(Path(train_module.__file__).parents[2])
    env = {**slurm, "PYTHONPATH": source, "OMP_NUM_THREADS": "1", "RUN_DIR": str(tmp_path / "run")}
    env["PORT"] = str(free_port())
    log, run, straight = Path(slurm["SHIM_LOG"]), tmp_path / "run", tmp_path / "straight"
    # Epochs long enough that the warning, sent once epoch 2 has saved its step 5, lands inside epoch 2.
    flags = ["--device", "cpu", "--epochs", "2", "--max-steps-per-epoch", "40", "--batch-size", "16"]
    flags += ["--deterministic", "--no-plots", "--checkpoint-every", "5"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    train = ["-m", "{{ cookiecutter.package_name }}", "train", *flags]
    done = subprocess.run(
        [*torchrun, *train, "--output-dir", str(straight)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]

    def submit(**extra) -> int:
        command = ["sbatch", str(script), *flags]
        submitted = subprocess.run(command, cwd=tmp_path, env=env | extra, capture_output=True, text=True, check=True)
        return int(submitted.stdout)

    job, deadline = submit(), time.monotonic() + 300
    while not _in_epoch_2(run / "last.pt") and _alive(job) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(job, signal.SIGUSR1)  # what --signal=B:USR1@120 sends the batch script before the time limit
    while _alive(job) and time.monotonic() < deadline:
        time.sleep(0.1)
    first = (log / "job-0.out").read_text()
    assert (log / "requeued").read_text() == "4242\n", first[-3000:]
    state = torch.load(run / "last.pt", weights_only=True)
    assert state["epoch"] == 1 and "progress" in state and not (run / "model.pt").exists(), first[-3000:]

    requeued = submit(SLURM_RESTART_COUNT="1")  # as SLURM starts the requeued job: the same job id
    while _alive(requeued) and time.monotonic() < deadline + 300:
        time.sleep(0.1)
    second = (log / "job-1.out").read_text()
    step = state["progress"][0]["step"]
    assert f"resumed from {run / 'last.pt'} at step {step} of epoch 2" in second, second[-3000:]
    assert (log / "requeued").read_text() == "4242\n"  # finished: not requeued again
    (weights, rows), (expected, expected_rows) = weights_and_metrics(run), weights_and_metrics(straight)
    assert rows == expected_rows and all(torch.equal(weights[key], expected[key]) for key in expected)


def _in_epoch_2(last: Path) -> bool:
    """Whether `last` is a mid-epoch checkpoint of epoch 2 (written by renaming: never read half-written)."""
    if not last.exists():
        return False
    state = torch.load(last, weights_only=True)
    return state["epoch"] == 1 and "progress" in state


def _alive(pid: int) -> bool:
    """Whether the shim's background job still runs (reaped here: it is not this process's child)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
{% endif %}
{% endif %}
