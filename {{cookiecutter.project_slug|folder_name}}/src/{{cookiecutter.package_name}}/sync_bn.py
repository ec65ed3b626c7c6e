"""SyncBatchNorm (T22): BatchNorm statistics over the whole global batch instead of each GPU's share."""

import sys

import torch
from torch import nn


def is_distributed_cuda(device: torch.device) -> bool:
    """A CUDA process group of any size: with one process SyncBatchNorm computes what BatchNorm does, so a job
    behaves the same whether it runs on one GPU or several."""
    dist = torch.distributed
    return device.type == "cuda" and dist.is_available() and dist.is_initialized()


def convert_sync_bn(model: nn.Module, device: torch.device, enabled: bool = True) -> nn.Module:
    """Convert before any DDP wrap. SyncBatchNorm only trains on CUDA, so elsewhere BatchNorm stays."""
    if not enabled:
        return model
    if is_distributed_cuda(device):
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)
    print("SyncBatchNorm needs a distributed CUDA job: keeping BatchNorm for this run.", file=sys.stderr)
    return model
