{% if cookiecutter.use_ema %}
"""Moving average of the weights (EMA): PyTorch's AveragedModel, evaluated every epoch and saved as ema.pt.

After every optimizer step, `ema = d * ema + (1 - d) * weights` with `d = min(decay, (1 + n) / (10 + n))` after `n`
updates, with PyTorch's own `torch.optim.swa_utils.AveragedModel`. The average is evaluated each epoch next to the
trained model (`ema_val_loss`, `ema_val_acc` in `metrics.csv`) and saved as `ema.pt`; it often generalises better
than the last weights{% if cookiecutter.use_checkpointing %}. Checkpoints carry it, so a resumed run continues the same average{% endif %}. BatchNorm
statistics are averaged like the weights (`use_buffers=True`), so the average is evaluated with statistics that
belong to it. The warm-up makes short runs average the steps they have (a fixed 0.999 would keep the first weights
for hundreds of steps): the decay reaches 0.9 after about 80 updates and 0.999 only after about 9,000; from then on
`--ema-decay 0.999` spans roughly the last 1000 steps.
"""

from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option
from . import Trick

FILES = {"ema.pt": "the moving average of the weights, a plain `state_dict` (`evaluate --weights .../ema.pt`)"}


@dataclass
class Options:
    ema_decay: float = option(0.999, "decay of the weights' moving average per optimizer step (0 turns it off)")
    off = {"ema_decay": 0.0}  # the values that switch it off

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
        return {f"ema_{name}": value for name, value in averaged.items() if name.startswith("val_")}

    def state(self) -> dict:
        return {"ema": self.average}

    def final_weights(self, model, training_pass, validate) -> dict:
        return {"ema.pt": self.average.module}  # the average as it was after the last epoch
{% endif %}
