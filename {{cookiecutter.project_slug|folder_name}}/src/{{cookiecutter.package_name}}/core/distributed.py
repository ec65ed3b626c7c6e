{% if cookiecutter.use_distributed %}
"""Data-parallel training with DistributedDataParallel, launched by torchrun.

`torchrun --nproc-per-node=N -m {{ cookiecutter.package_name }} train ...` starts N workers and sets RANK,
WORLD_SIZE and LOCAL_RANK for each. The short form `train --gpus 0,1` (or `--device cpu --nproc 2`) starts
the same workers through PyTorch's own launcher, torch.distributed.run. Rank 0 alone prints, shows
progress bars and writes files; every rank computes the same, exactly reduced metrics.
"""

import contextlib
{% if cookiecutter.use_checkpointing %}
import dataclasses
{% endif %}
import datetime
{% if cookiecutter.use_checkpointing %}
import functools
{% endif %}
import json
import logging
import os
import shlex
import signal
import socket
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend
from torch.distributed.run import get_args_parser, run
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import Sampler

from .errors import DeviceError, UserError, first_line, one_line
from .runtime import {{ "STOP_SIGNALS, " if cookiecutter.use_checkpointing }}gpu_ids, no_visible_gpu

{% if cookiecutter.use_checkpointing %}
STOPPED = {128 + number for number in STOP_SIGNALS}  # workers stopped by a signal
{% endif %}
# Set by `launch` for its workers: the folder where each says why it stopped, for the launcher to say it once.
REPORTS = "{{ cookiecutter.package_name | upper }}_WORKER_REPORTS"
# the console script, as the launcher's one line names it
SCRIPT = "{{ cookiecutter.project_slug }}"


def launched() -> bool:
    """True inside a worker started by torchrun (or by `launch`)."""
    return "LOCAL_RANK" in os.environ


{% if cookiecutter.use_checkpointing %}
def continue_after_restart(cfg):
    """Under `torchrun --max-restarts K`, torchrun starts the workers again after one fails: they continue from the
    newest checkpoint of the run folder, as --resume auto would. That folder must be named: a default one is new
    on every start."""
    restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    may_restart = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) > 0
    if may_restart and not cfg.output_dir and cfg.resume in (None, "auto"):
        raise UserError("torchrun --max-restarts restarts into the same run only with --output-dir: give one")
    if not restarts:
        return cfg
    print(f"restart {restarts} by torchrun: continuing from the newest checkpoint")  # rank 0 alone prints
    output_dir = cfg.output_dir or str(Path(cfg.resume).parent)
    # how the first start began (--init-from, --overwrite) is done: a restart only continues
    return dataclasses.replace(cfg, resume="auto", output_dir=output_dir, init_from=None, overwrite=False)


{% endif %}
def workers_wanted(cfg) -> int:
    """--nproc when given, else one worker per --gpus id when training on GPUs, else one. On GPUs, never more
    workers than visible GPUs: the extra ones would die in CUDA with 'invalid device ordinal'."""
    cuda = cfg.device in ("auto", "cuda") and torch.cuda.is_available()
    workers = cfg.nproc or ((len(gpu_ids(cfg.gpus)) or 1) if cuda else 1)
    if cuda and workers > torch.cuda.device_count():
        raise DeviceError(
            f"{workers} workers need {workers} GPUs but {torch.cuda.device_count()} is visible with --gpus {cfg.gpus}; "
            "pass ids that nvidia-smi lists, fewer --nproc, or --device cpu"
        )
    return workers


def launch(workers: int, argv: list[str], package: str) -> None:
    """Run this same command in `workers` processes on this machine, through torch.distributed.run."""
    print(f"starting {workers} workers with torch.distributed.run")
    one_machine = ["--standalone", "--local-addr", "127.0.0.1"]  # workers reach the agent over loopback
    launcher = get_args_parser().parse_args([*one_machine, f"--nproc-per-node={workers}", "-m", package])
    launcher.training_script_args = argv  # set apart so torchrun's parser never reads our flags
    # The workers import this very package, wherever it was imported from here.
    here = str(Path(__file__).resolve().parents[2])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    # The agent logs each worker it stops and the first failure: the one line below says what happened instead.
    agent_log = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    level = agent_log.level
    with tempfile.TemporaryDirectory(prefix="worker-reports-") as reports:
        os.environ[REPORTS] = reports
        agent_log.setLevel(logging.CRITICAL)
        try:
            with _stores_on_loopback():
                run(launcher)
        except ChildFailedError as exc:
{% if cookiecutter.use_checkpointing %}
            # A signal to the workers: they saved, said where to continue and left together, the agent stopping (by
            # SIGTERM) those still exiting once the first had exited.
            codes = {failure.exitcode for failure in exc.failures.values()}
            stopped = codes & STOPPED
            if len(stopped) == 1 and codes <= stopped | {-signal.SIGTERM}:
                raise SystemExit(stopped.pop()) from None
{% endif %}
            raise _job_failure(exc.failures, Path(reports), argv) from None
        except SignalException as exc:  # the workers got it too and said where to continue
            raise SystemExit(128 + exc.sigval) from None
        finally:
            agent_log.setLevel(level)
            del os.environ[REPORTS]


def worker_failed(exc: Exception) -> int:
    """A worker's error: under `launch`, handed to the launcher, which says once for the whole job why it stopped
    (every rank often meets the same bad flag); under torchrun, one line with the rank. Returns the exit code."""
    lost = lost_connection(exc) or lost_connection(exc.__context__)  # a UserError raised because a peer died too
    if isinstance(exc, UserError):
        message, code = one_line(exc), exc.exit_code
    else:
        message, code = f"lost the connection to the other workers ({first_line(exc)})", 1
    if REPORTS in os.environ:
        report = Path(os.environ[REPORTS]) / f"rank{os.environ['RANK']}.json"
        written = report.with_suffix(".tmp")  # renamed: the launcher never reads half a report
        written.write_text(json.dumps({"message": message, "exit_code": code, "lost": lost}))
        written.replace(report)
    else:
        print(f"error (rank {os.environ['RANK']}): {message}", file=sys.stderr)
    return code


def lost_connection(exc: BaseException | None) -> bool:
    """Whether `exc` is a collective that failed because another worker is gone (killed, or failed itself)."""
    if isinstance(exc, dist.DistError):  # NCCL's errors, the store's
        return True
    return isinstance(exc, RuntimeError) and "gloo/transport" in str(exc)  # gloo raises plain RuntimeErrors


{% if cookiecutter.use_checkpointing %}
def note_run_folder(out: Path) -> None:
    """Under `launch`, rank 0 leaves the run folder's name to the launcher, which names its checkpoint when a worker
    dies."""
    if REPORTS in os.environ and is_main():
        (Path(os.environ[REPORTS]) / "run_folder").write_text(str(out))


{% endif %}
def _job_failure(failures: dict, reports: Path, argv: list[str]) -> UserError:
    """The one error of a job whose workers failed, with the exit code of its cause: a worker's own message (rank
    0's first), else a worker that died unexplained (killed, or a traceback of its own), else one stopped by SIGTERM
    (the agent's, once another had failed), else one that lost its connection to the others."""
    said = {rank: json.loads(path.read_text()) for rank in failures if (path := reports / f"rank{rank}.json").exists()}
    order = list(failures)  # as the agent found them

    def blame(rank: int) -> tuple[int, int]:
        report, exitcode = said.get(rank), failures[rank].exitcode
        if report:
            return (3, order.index(rank)) if report["lost"] else (0, rank)
        stopped = exitcode in (-signal.SIGTERM, 128 + signal.SIGTERM)  # as the agent stops the others, or saved first
        return (2 if stopped else 1), order.index(rank)

    cause = min(failures, key=blame)
    failure, report = failures[cause], said.get(cause)
    if report and not report["lost"]:
        error = UserError(report["message"])
        error.exit_code = report["exit_code"]
        return error
    if failure.exitcode < 0:
        what, code = f"was killed by {failure.signal_name()}", 128 - failure.exitcode
    elif report:
        what, code = report["message"], report["exit_code"]
    else:
        what, code = f"exited with code {failure.exitcode} (its output is above)", failure.exitcode
    error = UserError(f"worker rank {cause} {what}, and the job stopped; {_how_to_continue(argv, reports)}")
    error.exit_code = code
    return error


def _how_to_continue(argv: list[str], reports: Path) -> str:
    command = next((arg for arg in argv if not arg.startswith("-")), "train")
    if command == "tune":  # the study is in its folder: the same command goes on with it
        return f"the same command continues the search: {SCRIPT} {shlex.join(argv)}"
{% if cookiecutter.use_checkpointing %}
    noted = reports / "run_folder"
    out = Path(noted.read_text()) if noted.exists() else None
    if out and (out / "last.pt").exists():
        config = shlex.quote(str(out / "config.yaml"))
        return f"continue with: {SCRIPT} train --config {config} --resume auto"
    return "nothing was saved yet, run it again"
{% else %}
    return "run it again"
{% endif %}


class LoopbackTCPStore(dist.TCPStore):
    """A TCPStore whose server listens on 127.0.0.1 alone: torch's own binds every interface, which would let
    anyone on the network talk to an unauthenticated store while a one-machine job runs."""

    def __init__(self, host_name, port, *args, **kwargs):
        if kwargs.get("is_master") and "master_listen_fd" not in kwargs:
            listener = socket.create_server(("127.0.0.1", port), backlog=512)
            host_name, port = listener.getsockname()
            kwargs["master_listen_fd"] = listener.detach()  # the store owns the socket from here on
        super().__init__(host_name, port, *args, **kwargs)


@contextlib.contextmanager
def _stores_on_loopback():
    """While torchrun's agent runs in this process, the stores it hosts are LoopbackTCPStores."""
    modules = (dist, c10d_rendezvous_backend)
    originals = [module.TCPStore for module in modules]
    for module in modules:
        module.TCPStore = LoopbackTCPStore
    try:
        yield
    finally:
        for module, original in zip(modules, originals, strict=True):
            module.TCPStore = original


def setup(requested_device: str, gpus: str, timeout_seconds: int) -> torch.device | None:
    """Join the process group of a launched worker: NCCL on CUDA, gloo on CPUs. None when not launched."""
    if not launched():
        return None
    if requested_device not in ("auto", "cpu", "cuda"):  # NCCL and gloo: CUDA GPUs and CPUs
        raise DeviceError(f"several processes train on CUDA GPUs or CPUs, not on {requested_device}: drop --nproc")
    cuda = requested_device != "cpu" and torch.cuda.is_available()
    if requested_device == "cuda" and not cuda:
        raise no_visible_gpu(gpus)
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if dist.is_initialized():  # joined already: tune's ranks train every trial in the group they joined once
        return device
    timeout = datetime.timedelta(seconds=timeout_seconds)  # a dead peer ends the job instead of hanging it
    store, rank, world = next(dist.rendezvous("env://", timeout=timeout))
    # The workers torchrun restarts (--max-restarts) meet under keys of their own: the agent's store still holds
    # the addresses of the workers before them, and gloo would try to connect to those.
    store = dist.PrefixStore(f"start{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)
    backend, device_id = ("nccl", device) if cuda else ("gloo", None)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout, device_id=device_id)
    if not is_main():
        sys.stdout = open(os.devnull, "w")  # rank 0 alone prints; errors still reach stderr
    print(f"distributed: world size {world_size()}, backend {dist.get_backend()}")
    return device


def teardown(wait: bool = True) -> None:
    """Every rank leaves together, once rank 0 has written its files: a rank's exit can never cut them short
    (`wait=False`: a stop, after which each rank has saved what it had). The groups are freed here, not at the
    interpreter's exit, where gloo's threads have aborted a finished worker."""
    if dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()
{% if cookiecutter.use_checkpointing %}
        _cpu_group.cache_clear()
{% endif %}


def is_distributed() -> bool:
    return dist.is_initialized()


def is_main() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


@contextlib.contextmanager
def local_main_first():
    """Local rank 0 runs the block first (a download), then the other ranks of its machine: they find the files."""
    first = int(os.environ.get("LOCAL_RANK", "0")) == 0
    if not first:
        barrier()
    try:
        yield
    finally:
        if first:  # also when it failed: the others then try, and say why themselves
            barrier()


def all_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """Sum over ranks, in place; a no-op in a single process."""
    if dist.is_initialized():
        dist.all_reduce(tensor)
    return tensor


def broadcast(obj):
    """Rank 0's `obj` on every rank (one output dir, one set of statistics)."""
    if not dist.is_initialized():
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def broadcast_buffers(module: torch.nn.Module) -> None:
    """Rank 0's buffers on every rank: BatchNorm's running statistics follow each rank's own batches."""
    if dist.is_initialized():
        for buffer in module.buffers():
            dist.broadcast(buffer, src=0)


def gather(obj) -> list:
    """Every rank's `obj`, in rank order, on every rank."""
    if not dist.is_initialized():
        return [obj]
    objects = [None] * world_size()
    dist.all_gather_object(objects, obj)
    return objects


def wrap(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DDP{{ " after any SyncBatchNorm conversion" if cookiecutter.use_sync_bn else "" }}; device_ids only on CUDA (a CPU device is refused)."""
    if not dist.is_initialized():
        return model
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


{% if cookiecutter.use_checkpointing %}
@functools.cache
def _cpu_group(world: dist.ProcessGroup) -> dist.ProcessGroup:
    """One gloo group per process group, for every run in it: tune's trials would each leave one open otherwise."""
    return dist.new_group(backend="gloo")


class Agreement:
    """Numbers that every rank acts on at the same step, without a step ever waiting for the others: each step sends
    this rank's numbers (their maximum over the ranks is taken in the background, on the CPU) and receives the maxima
    of those sent the step before."""

    def __init__(self):
        self.group = _cpu_group(dist.group.WORLD)  # CPU tensors, whatever the training backend
        self.sending = None

    def exchange(self, numbers: list[int]) -> list[int]:
        received = [0] * len(numbers)
        if self.sending:
            work, maxima = self.sending
            work.wait()
            received = maxima.tolist()
        maxima = torch.tensor(numbers, dtype=torch.int64)
        self.sending = dist.all_reduce(maxima, dist.ReduceOp.MAX, group=self.group, async_op=True), maxima
        return received

    def drain(self) -> None:
        """Wait for the numbers in flight: before the process group ends."""
        if self.sending:
            self.sending[0].wait()
            self.sending = None


{% endif %}
def sync_gradients(model: torch.nn.Module, now: bool) -> None:
    """Before a forward: whether its backward all-reduces gradients. False on the inner batches of gradient
    accumulation, which then add up locally; this is the flag DDP's own no_sync() sets."""
    wrapped = getattr(model, "_orig_mod", model)  # under torch.compile
    if isinstance(wrapped, DistributedDataParallel):
        wrapped.require_backward_grad_sync = now


class ShardSampler(Sampler):
    """Every index exactly once across ranks, no padding: evaluation sums stay exact."""

    def __init__(self, dataset):
        self.indices = list(range(len(dataset)))[rank() :: world_size()]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)
{% endif %}
