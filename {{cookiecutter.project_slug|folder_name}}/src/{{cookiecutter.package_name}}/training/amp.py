{% if cookiecutter.use_amp %}
"""Mixed precision: autocast in bf16 or fp16 on the device in use; a GradScaler only for fp16 on an accelerator."""

import contextlib
import dataclasses
import sys

import torch

from ..core.errors import DeviceError
from ..core.runtime import Runtime

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(precision: str, device: torch.device) -> str:
    """The precision this device can train in, or a clear refusal."""
    if precision == "bf16" and device.type == "cuda" and not native_bf16(device):
        name = torch.cuda.get_device_name(device)
        raise DeviceError(f"{name} has no native bf16 (it needs compute capability 8.0 or later); use --precision fp16")
    if precision == "fp16" and device.type == "cpu":
        # CPUs have no loss scaling and slow fp16 kernels; bf16 is their mixed precision.
        print("fp16 mixed precision needs a GPU or another accelerator: using bf16 on the CPU.", file=sys.stderr)
        precision = "bf16"
    if precision == "bf16" and device.type == "cpu" and not native_cpu_bf16():
        print(CPU_FP32_NOTICE, file=sys.stderr)
        return "fp32"
    return precision


CPU_FP32_NOTICE = "this CPU has no native bf16 (it would train about 8x slower than in fp32): using fp32."


def native_cpu_bf16() -> bool:
    """bf16 in the CPU's instructions (AVX-512 or AMX on x86, BF16 on Arm) as oneDNN, autocast's CPU backend, finds
    them. Without, bf16 is emulated: resnet18 trained about 8 times slower than in fp32 on an AVX2 CPU."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN emulates bf16 too
        return False


def native_bf16(device: torch.device) -> bool:
    """bf16 in hardware: Ampere (compute capability 8) or later. torch.cuda.is_bf16_supported() also says yes
    for older GPUs that emulate it, far slower than fp16."""
    return torch.cuda.get_device_capability(device)[0] >= 8


def autocast(precision: str, device: torch.device):
    """Autocast for the device actually in use: a bare autocast("cuda") silently does nothing on a CPU."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision])


def scaled_step(scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer) -> bool:
    """The optimizer step through the scaler; False when fp16's scaler skipped it for inf/NaN gradients. Told by a
    hook on the optimizer's step: reading the scale would wait for the GPU twice more per step."""
    stepped = []
    hook = optimizer.register_step_post_hook(lambda *_: stepped.append(True))
    try:
        scaler.step(optimizer)
    finally:
        hook.remove()
    scaler.update()
    return bool(stepped)


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """fp16 gradients underflow without loss scaling; bf16 has float32's range and needs none."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16" and device.type != "cpu")


class MixedPrecision(Runtime):
    """The loop's forward passes in `--precision` (that of the device, `resolve_precision`), fp16's losses scaled."""

    def __init__(self, device: torch.device, cfg):
        super().__init__(device, cfg)
        self.precision, self.scaler = cfg.precision, make_scaler(cfg.precision, device)  # as given, until settled

    def settle(self, cfg):
        self.precision = resolve_precision(cfg.precision, self.device)
        self.scaler = make_scaler(self.precision, self.device)
        return dataclasses.replace(super().settle(cfg), precision=self.precision)

    def forward_pass(self):
        return autocast(self.precision, self.device)

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, before_step) -> bool:
        self.scaler.unscale_(optimizer)  # the true gradients from here on (the step would unscale them anyway)
        before_step()
        return scaled_step(self.scaler, optimizer)  # False when fp16's scaler skipped the step: inf/NaN gradients

    def state(self) -> dict:
        return super().state() | {"scaler": self.scaler}
{% endif %}
