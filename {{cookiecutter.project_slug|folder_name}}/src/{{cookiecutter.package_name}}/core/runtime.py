"""Process set-up: which GPUs are visible, which device to use, every random seed, and the `Runtime` the training loop
runs with."""

import contextlib
import os
import random
import re
import signal
import sys

import numpy as np
import torch

from .errors import DeviceError, UserError

# how schedulers, Ctrl-C and SLURM's warning before a time limit stop a job (Windows has no SIGUSR1)
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGUSR1") if hasattr(signal, name))

GPU_IDS = re.compile(r"\d+(,\d+)*")
DETERMINISTIC_CUBLAS = ":4096:8"  # what deterministic cuBLAS needs (CUDA >= 10.2)
NO_DETERMINISTIC_KERNEL = "does not have a deterministic implementation"


@contextlib.contextmanager
def explaining_nondeterministic_kernels():
    """--deterministic makes PyTorch refuse an operation that has no deterministic kernel (several CUDA backward
    passes): one line naming it and the way out, instead of a traceback."""
    try:
        yield
    except RuntimeError as exc:
        if NO_DETERMINISTIC_KERNEL not in str(exc):
            raise
        operation = str(exc).split(NO_DETERMINISTIC_KERNEL)[0].split()[-1]
        raise DeviceError(
            f"--deterministic: {operation} has no deterministic implementation on this device, so this model cannot "
            "train bitwise repeatably here; drop --deterministic (the run stays seeded)"
        ) from None


def gpu_ids(gpus: str) -> list[str]:
    """`--gpus` as a list of ids: empty for CPU only (`cpu`, `none` or nothing)."""
    ids = gpus.replace(" ", "")
    if ids.lower() in ("", "cpu", "none"):
        return []
    if not GPU_IDS.fullmatch(ids) or len(set(ids.split(","))) != len(ids.split(",")):
        raise UserError(f"--gpus {gpus!r} is not a list of distinct GPU ids; use e.g. --gpus 0, 0,1 or cpu")
    return ids.split(",")


def select_gpus(gpus: str, deterministic: bool = False) -> None:
    """Export `gpus` as CUDA_VISIBLE_DEVICES, and for --deterministic cuBLAS's fixed workspace: both
    are read once, when CUDA and cuBLAS start, so this runs before anything else."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids(gpus))
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", DETERMINISTIC_CUBLAS)


def no_visible_gpu(gpus: str) -> DeviceError:
    """--device cuda without a GPU to use, naming the --gpus answer that decided it."""
    if not gpu_ids(gpus):
        return DeviceError(f"--device cuda was asked for but --gpus {gpus!r} selects no GPU; pass e.g. --gpus 0")
    return DeviceError(f"--device cuda was asked for but no CUDA GPU is visible with --gpus {gpus}; check nvidia-smi")


def resolve_device(requested: str, gpus: str) -> torch.device:
    """`auto` picks the machine's accelerator (a CUDA or ROCm GPU, a Mac's MPS, an Intel XPU: what torch.accelerator
    finds) unless --gpus chose the CPU, else the CPU with one line saying so; one asked for by name and missing is
    one line."""
    if requested == "cpu" or (requested == "auto" and not gpu_ids(gpus)):
        return torch.device("cpu")
    found = torch.accelerator.current_accelerator(check_available=True)
    if found is not None and requested in ("auto", found.type):
        if (count := torch.accelerator.device_count()) > 1:
            print(f"{count} {found.type} devices visible: this single process trains on the first.", file=sys.stderr)
        return torch.device(found.type, 0)
    if requested == "cuda":
        raise no_visible_gpu(gpus)
    if requested != "auto":
        raise DeviceError(f"--device {requested} was asked for but this machine has none; pass --device auto or cpu")
    print("no GPU or other accelerator is available: running on the CPU.", file=sys.stderr)  # stdout: results only
    return torch.device("cpu")


def check_device(requested: str, gpus: str) -> None:
    """A device asked for by name that this machine lacks: `resolve_device`'s one line, said before a command writes
    anything (tune, before it opens its study), and without its notices."""
    found = torch.accelerator.current_accelerator(check_available=True)
    if requested not in ("auto", "cpu") and (found is None or found.type != requested):
        resolve_device(requested, gpus)


def seed_everything(seed: int, deterministic: bool) -> None:
    """Seed python, numpy and torch; trade cudnn.benchmark for repeatability on request."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:  # for train() called directly; the command line set it before CUDA started
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", DETERMINISTIC_CUBLAS)
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic


def seed_worker(worker_id: int) -> None:
    """DataLoader workers: derive numpy and python seeds from the seed torch gave this worker, and leave
    Ctrl-C, SIGTERM and SIGUSR1 to the main process (schedulers signal the whole process group), which stops the run
    at a resumable point and shuts the workers down itself."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


class Runtime:
    """How the training loop runs on this machine: on `device`, in one process, in the model's own precision. The loop
    and train() reach the device, the processes and the arithmetic of a step through these methods alone; a feature
    that changes how a step runs extends them (training/engine.py puts this repo's runtime together). An override that
    adds to a method calls super(); one that replaces it comes before the others among the bases."""

    is_main = True  # the process that prints, shows progress and writes the run's files

    def __init__(self, device: torch.device, cfg):
        self.device = device

    @classmethod
    def start(cls, cfg):
        """The runtime `cfg` asks for on this machine."""
        return cls(resolve_device(cfg.device, cfg.gpus), cfg)

    def settle(self, cfg):
        """`cfg` with what this runtime decides for it on its device, once the run folder is checked."""
        return cfg

    def shared(self, obj):
        """The main process's `obj`, in every process."""
        return obj

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model as the loop trains it."""
        return model

    def start_batch(self, model: torch.nn.Module, update: bool) -> None:
        """Before a batch's forward pass; `update`: the optimizer steps after this batch's backward."""

    def forward_pass(self):
        """The context of a forward pass."""
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self, optimizer: torch.optim.Optimizer, before_step) -> bool:
        """The optimizer step, after `before_step()` has seen the gradients as the loss defines them; False when the
        step was skipped."""
        before_step()
        optimizer.step()
        return True

    def total(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over the processes, in place."""
        return tensor
{% if cookiecutter.task == "multi_label" %}

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every process's rows of `tensor`, concatenated in rank order (each process may hold a different number)."""
        return tensor
{% endif %}

    def share_buffers(self, model: torch.nn.Module) -> None:
        """The main process's buffers (BatchNorm's statistics) in every process."""

    def barrier(self) -> None:
        """Wait here for every process."""

    def state(self) -> dict:
        """Objects with a `state_dict` that a run continued later needs as they were."""
        return {}
