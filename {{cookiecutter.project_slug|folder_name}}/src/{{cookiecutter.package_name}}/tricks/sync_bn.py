{% if cookiecutter.use_sync_bn %}
"""SyncBatchNorm: BatchNorm statistics over the whole global batch instead of each GPU's share.

When training runs on several GPUs in several processes, BatchNorm layers become `SyncBatchNorm` before the model is
wrapped, so the batch statistics cover the whole global batch. It helps when each GPU sees only a few images
(detection-sized inputs, big models). On a CPU or in a single process BatchNorm stays, and the run says so once.
`--no-sync-bn` switches it off.
"""

import sys
from dataclasses import dataclass

from ..core.options import option
from . import Trick


@dataclass
class Options:
    sync_bn: bool = option(True, "BatchNorm becomes SyncBatchNorm when training on several GPUs")


def build(cfg, num_classes: int) -> "SyncBatchNorm | None":
    return SyncBatchNorm() if cfg.sync_bn else None


def is_distributed_cuda(device) -> bool:
    """A CUDA process group of any size: with one process SyncBatchNorm computes what BatchNorm does, so a job
    behaves the same whether it runs on one GPU or several."""
    import torch

    dist = torch.distributed
    return device.type == "cuda" and dist.is_available() and dist.is_initialized()


@dataclass
class SyncBatchNorm(Trick):
    order = -1  # first: freezing then finds the converted layers

    def prepare(self, model, device):
        return convert_sync_bn(model, device)


def convert_sync_bn(model, device):
    """Convert before any DDP wrap. SyncBatchNorm only trains on CUDA, so elsewhere BatchNorm stays."""
    import torch  # imported when a run starts, not for --help
    from torch import nn

    if is_distributed_cuda(device):
        if type(model).__module__.startswith("timm."):  # its BatchNormAct2d keeps its activation through timm's own
            from timm.layers import convert_sync_batchnorm

            return convert_sync_batchnorm(model)
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)
    dist = torch.distributed
    # one process: nothing to sync; several: said once, by rank 0
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 and dist.get_rank() == 0:
        print("SyncBatchNorm needs CUDA: each CPU process keeps BatchNorm over its own share.", file=sys.stderr)
    return model
{% endif %}
