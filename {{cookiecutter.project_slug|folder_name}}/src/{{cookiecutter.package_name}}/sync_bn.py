"""SyncBatchNorm (T22): BatchNorm statistics over the whole global batch instead of each GPU's share."""

import sys

import torch
from torch import nn


def is_distributed_cuda(device: torch.device) -> bool:
    dist = torch.distributed
    return device.type == "cuda" and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def convert_sync_bn(model: nn.Module, device: torch.device, enabled: bool = True) -> nn.Module:
    """Convert before any DDP wrap. SyncBatchNorm only trains on CUDA, so elsewhere BatchNorm stays."""
    if not enabled:
        return model
    if is_distributed_cuda(device):
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)
    print("SyncBatchNorm needs several CUDA processes: keeping BatchNorm for this run.", file=sys.stderr)
    return model
