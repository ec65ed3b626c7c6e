"""Mixed precision (T38): autocast in bf16 or fp16 on the device in use; a GradScaler only for fp16 on CUDA."""

import contextlib
import sys

import torch

from .errors import DeviceError

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(precision: str, device: torch.device) -> str:
    """The precision this device can train in, or a clear refusal."""
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise DeviceError("this GPU cannot compute in bf16; use --precision fp16 (or fp32)")
    if precision == "fp16" and device.type != "cuda":
        # CPUs have no loss scaling and slow fp16 kernels; bf16 is their mixed precision.
        print("fp16 mixed precision needs a CUDA GPU: using bf16 on the CPU.", file=sys.stderr)
        return "bf16"
    return precision


def autocast(precision: str, device: torch.device):
    """Autocast for the device actually in use: a bare autocast("cuda") silently does nothing on a CPU."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision])


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """fp16 gradients underflow without loss scaling on CUDA; bf16 has float32's range and needs none."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16" and device.type == "cuda")
