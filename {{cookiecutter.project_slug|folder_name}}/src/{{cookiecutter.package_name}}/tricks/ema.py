{% if cookiecutter.use_ema %}
"""Exponential moving average of the weights, with PyTorch's own torch.optim.swa_utils.AveragedModel.

After every optimizer step: ema = d * ema + (1 - d) * weights, with d = min(decay, (1 + n) / (10 + n)) after n
updates. The warm-up lets a short run average the steps it has (a fixed 0.999 would keep the first weights for
hundreds of steps). The average is evaluated each epoch next to the trained model and saved as ema.pt; it often
generalises better than the last weights.
"""

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel


class WarmedUpAverage(AveragedModel):
    """PyTorch's AveragedModel with the warm-up decay, updated without waiting for the GPU: torch's own
    update_parameters reads its step counter on the host and copies it to the device on every step."""

    def __init__(self, model: nn.Module, decay: float):
        # use_buffers=True averages BatchNorm's running statistics like the weights, so the average is evaluated
        # with statistics that belong to it (no extra pass over the data); the counter lives beside the weights.
        super().__init__(model, device=next(model.parameters()).device, use_buffers=True)
        self.decay = decay

    @torch.no_grad()
    def update_parameters(self, model: nn.Module) -> None:
        averaged = [*self.module.parameters(), *self.module.buffers()]
        current = [tensor.detach() for tensor in (*model.parameters(), *model.buffers())]
        updates, decay = self.n_averaged, self.decay
        # 0 at the first update (a copy), then the warm-up; computed on the device: no host sync
        weight = torch.clamp((1 + updates) / (10 + updates), max=decay) * (updates > 0)
        by_dtype = {}
        for pair in zip(averaged, current, strict=True):
            by_dtype.setdefault(pair[0].dtype, []).append(pair)
        for dtype, pairs in by_dtype.items():
            mine, theirs = [list(group) for group in zip(*pairs, strict=True)]
            if not dtype.is_floating_point:  # counters such as num_batches_tracked: the latest value
                torch._foreach_copy_(mine, theirs)
                continue
            torch._foreach_mul_(mine, weight.to(dtype))
            torch._foreach_add_(mine, torch._foreach_mul(theirs, (1 - weight).to(dtype)))
        self.n_averaged += 1


def build_ema(model: nn.Module, decay: float) -> WarmedUpAverage | None:
    """None when --ema-decay is 0."""
    return WarmedUpAverage(model, decay) if decay else None
{% endif %}
