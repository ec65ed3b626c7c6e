{% if cookiecutter.use_ema %}
"""Exponential moving average of the weights, with PyTorch's own torch.optim.swa_utils.AveragedModel.

After every optimizer step: ema = d * ema + (1 - d) * weights, with d = min(decay, (1 + n) / (10 + n)) after n
updates. The warm-up lets a short run average the steps it has (a fixed 0.999 would keep the first weights for
hundreds of steps). The average is evaluated each epoch next to the trained model and saved as ema.pt; it often
generalises better than the last weights.
"""

from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option
from . import Trick

FILES = ("ema.pt",)


@dataclass
class Options:
    ema_decay: float = option(0.999, "decay of the weights' moving average per optimizer step (0 turns it off)")

    def check(self) -> None:
        if not 0 <= self.ema_decay < 1:
            raise UserError(f"--ema-decay must be in [0, 1), got {self.ema_decay}")


def build(cfg, num_classes: int) -> "MovingAverage | None":
    """None when --ema-decay is 0."""
    return MovingAverage(cfg.ema_decay) if cfg.ema_decay else None


@dataclass
class MovingAverage(Trick):
    """PyTorch's AveragedModel with the warm-up decay, updated without waiting for the GPU: torch's own
    update_parameters reads its step counter on the host and copies it to the device on every step."""

    decay: float
    average: object = None  # the AveragedModel, of the plain model on its device: identical on every process

    def start(self, model, optimizer, scheduler):
        from torch.optim.swa_utils import AveragedModel  # torch is imported when a run starts, not for --help

        # use_buffers=True averages BatchNorm's running statistics like the weights, so the average is evaluated
        # with statistics that belong to it (no extra pass over the data); the counter lives beside the weights.
        self.average = AveragedModel(model, device=next(model.parameters()).device, use_buffers=True)
        return scheduler

    def after_step(self, model) -> None:
        import torch

        with torch.no_grad():
            averaged = [*self.average.module.parameters(), *self.average.module.buffers()]
            current = [tensor.detach() for tensor in (*model.parameters(), *model.buffers())]
            updates = self.average.n_averaged
            # 0 at the first update (a copy), then the warm-up; computed on the device: no host sync
            weight = torch.clamp((1 + updates) / (10 + updates), max=self.decay) * (updates > 0)
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
            self.average.n_averaged += 1

    def after_epoch(self, epoch: int, model, validate) -> dict:
        averaged = validate(self.average.module)
        return {"ema_val_loss": averaged["val_loss"], "ema_val_acc": averaged["val_acc"]}

    def state(self) -> dict:
        return {"ema": self.average}

    def final_weights(self, model, loader, validate) -> dict:
        return {"ema.pt": self.average.module}  # the average as it was after the last epoch
{% endif %}
