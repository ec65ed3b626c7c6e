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
import os
import sys
{% if cookiecutter.use_checkpointing %}
from pathlib import Path
{% endif %}

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import Sampler

from .errors import DeviceError, UserError
from .runtime import Runtime, no_visible_gpu


def launched() -> bool:
    """True inside a worker started by torchrun (or by `launch`)."""
    return "LOCAL_RANK" in os.environ


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
class ShardSampler(Sampler):
    """Every index exactly once across ranks, no padding: evaluation sums stay exact."""

    def __init__(self, dataset):
        self.indices = list(range(len(dataset)))[rank() :: world_size()]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


class DataParallel(Runtime):
    """The loop's runtime in a worker of a data-parallel job: DDP's model, gradients all-reduced once per optimizer
    step, sums over every rank, rank 0 alone writing. Outside a job, the plain runtime."""

    @classmethod
    def start(cls, cfg):
        device = setup(cfg.device, cfg.gpus, cfg.dist_timeout)  # None when not launched: one process
        if cfg.batch_size % world_size():
            raise UserError(f"--batch-size {cfg.batch_size} is global and must divide by the {world_size()} processes")
        return cls(device, cfg) if device else super().start(cfg)

    @property
    def is_main(self) -> bool:
        return is_main()

    def shared(self, obj):
        return broadcast(obj)

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return wrap(model, self.device)

    def start_batch(self, model: torch.nn.Module, update: bool) -> None:
        sync_gradients(model, update)  # the inner batches of a group skip DDP's all-reduce

    def total(self, tensor: torch.Tensor) -> torch.Tensor:
        return all_reduce(tensor)
{% if cookiecutter.task == "multi_label" %}

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        if not is_distributed():
            return tensor
        # all_gather takes equal shapes: each rank's rows padded to the longest, then cut back to its own count
        counts = [torch.zeros((), dtype=torch.long, device=tensor.device) for _ in range(world_size())]
        dist.all_gather(counts, torch.tensor(len(tensor), device=tensor.device))
        longest = int(max(counts))
        padded = tensor.new_zeros((longest, *tensor.shape[1:]))
        padded[: len(tensor)] = tensor
        parts = [torch.empty_like(padded) for _ in counts]
        dist.all_gather(parts, padded)
        return torch.cat([part[: int(count)] for part, count in zip(parts, counts, strict=True)])
{% endif %}

    def share_buffers(self, model: torch.nn.Module) -> None:
        broadcast_buffers(model)

    def barrier(self) -> None:
        barrier()
{% endif %}
