"""Optimizer and learning-rate schedule."""

import math

import torch
from torch import nn

DEFAULT_LR = {"sgd": 0.05, "adamw": 1e-3}


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Trainable parameters only; biases and norm weights (ndim <= 1) get no weight decay (T36)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in trainable if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in trainable if p.ndim <= 1], "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, cfg) -> torch.optim.Optimizer:
    groups = parameter_groups(model, cfg.weight_decay)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0)
    return torch.optim.AdamW(groups, lr=cfg.lr)


def build_scheduler(optimizer: torch.optim.Optimizer, cfg) -> torch.optim.lr_scheduler.LRScheduler:
    """Stepped once per epoch. A LambdaLR factor keeps any per-group LR ratios intact."""
    if cfg.scheduler == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, cfg.step_size, cfg.gamma)
    if cfg.scheduler == "cosine":
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda epoch: warmup_cosine(epoch, cfg.warmup_epochs, cfg.epochs)
        )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1.0)


def warmup_cosine(epoch: int, warmup_epochs: int, epochs: int) -> float:
    """Linear warm-up to 1, then half a cosine towards 0 over the remaining epochs."""
    if epoch < warmup_epochs:
        return (epoch + 1) / (warmup_epochs + 1)
    return 0.5 * (1 + math.cos(math.pi * (epoch - warmup_epochs) / max(1, epochs - warmup_epochs)))
