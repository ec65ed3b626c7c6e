"""Exponential moving average of the weights, with PyTorch's own torch.optim.swa_utils.AveragedModel.

After every optimizer step: ema = d * ema + (1 - d) * weights, with d = min(decay, (1 + n) / (10 + n)) after n
updates. The warm-up lets a short run average the steps it has (a fixed 0.999 would keep the first weights for
hundreds of steps). The average is evaluated each epoch next to the trained model and saved as ema.pt; it often
generalises better than the last weights.
"""

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel


def warmed_up_decay(decay: float):
    """AveragedModel's `multi_avg_fn`: one update of a group of tensors of one device and dtype."""

    @torch.no_grad()
    def update(averaged: list[torch.Tensor], current: list[torch.Tensor], updates: torch.Tensor) -> None:
        if not averaged[0].is_floating_point():  # counters such as num_batches_tracked: the latest value
            torch._foreach_copy_(averaged, current)
            return
        weight = torch.clamp((1 + updates) / (10 + updates), max=decay).to(averaged[0].dtype)  # stays on the device
        torch._foreach_mul_(averaged, weight)
        torch._foreach_add_(averaged, torch._foreach_mul(current, 1 - weight))

    return update


def build_ema(model: nn.Module, decay: float) -> AveragedModel | None:
    """None when --ema-decay is 0. BatchNorm policy: use_buffers=True averages the running statistics like
    the weights, so the average is evaluated with statistics that belong to it (no extra pass over the data)."""
    if not decay:
        return None
    return AveragedModel(model, multi_avg_fn=warmed_up_decay(decay), use_buffers=True)
