"""Optimizer and learning-rate schedule."""

import math

import torch
from torch import nn

DEFAULT_LR = {"sgd": 0.05, "adamw": 1e-3}


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Trainable parameters only; biases and norm weights (ndim <= 1) get no weight decay."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in trainable if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in trainable if p.ndim <= 1], "weight_decay": 0.0},
    ]


def learning_rates(optimizer: torch.optim.Optimizer) -> dict[str, float]:
    return {"lr": optimizer.param_groups[0]["lr"]}


def build_optimizer(model: nn.Module, cfg, tricks=()) -> torch.optim.Optimizer:
    groups = parameter_groups(model, cfg.weight_decay)
    for trick in tricks:
        groups = trick.param_groups(model, groups)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0)
    return torch.optim.AdamW(groups, lr=cfg.lr)


def build_scheduler(optimizer: torch.optim.Optimizer, cfg) -> torch.optim.lr_scheduler.LambdaLR:
    """Stepped once per epoch. A factor of the epoch alone: per-group LR ratios survive{% if cookiecutter.use_checkpointing %}, and a resumed
    run can recompute the LR of any epoch{% endif %}."""
    if cfg.scheduler == "step":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: cfg.gamma ** (epoch // cfg.step_size))
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


class L1Penalty(nn.Module):
    """The training loss plus L1 x the sum of |w| over the weights: conv and linear kernels (ndim > 1, as
    for weight decay), trainable ones only. Keeps the epoch's penalty on the device for the metrics."""

    def __init__(self, loss: nn.Module, model: nn.Module, strength: float):
        super().__init__()
        self.loss, self.strength = loss, strength
        self.weights = [parameter for parameter in model.parameters() if parameter.requires_grad and parameter.ndim > 1]
        self.total, self.count = torch.zeros(()), 0

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        penalty = self.strength * sum(weight.abs().sum() for weight in self.weights)
        self.total, self.count = self.total.to(penalty.device) + penalty.detach(), self.count + 1
        return self.loss(logits, targets) + penalty

    def epoch_mean(self) -> float:
        """The mean penalty of the steps since the last call (one host sync per epoch)."""
        mean = self.total.item() / max(self.count, 1)
        self.total, self.count = torch.zeros(()), 0
        return mean
