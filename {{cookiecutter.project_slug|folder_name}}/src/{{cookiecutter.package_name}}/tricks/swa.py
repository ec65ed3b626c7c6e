{% if cookiecutter.use_swa %}
"""Stochastic weight averaging (SWA): the mean of the weights of the last epochs, with torch.optim.swa_utils.

From epoch `--swa-start` on, the weights after each epoch join an equal average (`AveragedModel`); after it, the
learning rate anneals to `--swa-lr` over `--swa-anneal-epochs` epochs and stays there, as `SWALR` anneals it (cosine).
When the run ends, the average's BatchNorm statistics are recomputed with `update_bn` on the training data (averaged
weights need statistics of their own; a layer kept in eval mode keeps its own), the average is evaluated and saved as
`swa.pt`, and a line gives its validation figures. Averaging the weights along the end of training finds wider minima,
which often generalise better (Izmailov et al., 2018). By default `--swa-start` is the first epoch of the last quarter
of `--epochs`, and at least the last two epochs are averaged; it is saved in `config.yaml` like every automatic value.
`--swa-start 0` turns SWA off; a run that ends before `--swa-start` (an early stop) writes no `swa.pt`, and a line says
so. The learning rate of every epoch, SWA's included, comes from the one schedule{% if cookiecutter.use_checkpointing %},
so a resumed run goes on with the same rates and the same average{% endif %}.
"""

import math
from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option
from . import Trick

FILES = {"swa.pt": "the stochastic weight average, BatchNorm statistics recomputed, a plain `state_dict`"}


@dataclass
class Options:
    swa_start: int | None = option(
        None, "the first epoch whose weights join the weight average, SWA (auto: the last quarter's; 0 turns it off)"
    )
    swa_lr: float | None = option(None, "the learning rate SWA anneals to and keeps (auto: a tenth of --lr)")
    swa_anneal_epochs: int = option(1, "epochs over which the learning rate anneals to --swa-lr")
    off = {"swa_start": 0}  # the values that switch it off

    def resolve(self) -> dict:
        """The automatic start: the first epoch of the last quarter, averaging two epochs at least."""
        return {"swa_start": max(1, self.epochs - max(2, self.epochs // 4) + 1)} if self.swa_start is None else {}

    def check(self) -> None:
        if self.swa_start is not None and self.swa_start < 0:
            raise UserError(f"--swa-start must be an epoch (0 turns SWA off), got {self.swa_start}")
        if self.swa_anneal_epochs < 1:
            raise UserError(f"--swa-anneal-epochs must be at least 1, got {self.swa_anneal_epochs}")
        if self.swa_lr is not None and not 0 < self.swa_lr < math.inf:
            raise UserError(f"--swa-lr must be a positive number, got {self.swa_lr}")


def build(cfg, num_classes: int) -> "WeightAverage | None":
    """None with --swa-start 0."""
    start = cfg.swa_start if cfg.swa_start is not None else Options.resolve(cfg)["swa_start"]
    # a share of --lr, so that each parameter group keeps its multiplier (a resolved config has --lr set)
    share = cfg.swa_lr / cfg.lr if cfg.swa_lr is not None and cfg.lr else 0.1
    return WeightAverage(start, share, cfg.swa_anneal_epochs) if start else None


def _keep() -> None:
    pass


def annealed(factor, start: int, share: float, anneal_epochs: int):
    """The schedule's factor of each epoch's learning rate, taken over by SWA: from epoch `start` on, SWALR's cosine
    from the factor of epoch `start` to `share`, reached after `anneal_epochs` epochs. LambdaLR's epoch 0 is the
    rate of the first epoch."""

    def swa_factor(epoch: int) -> float:
        if epoch < start:
            return factor(epoch)
        t = min(1.0, (epoch - start + 1) / anneal_epochs)
        alpha = (1 - math.cos(math.pi * t)) / 2
        return (1 - alpha) * factor(start - 1) + alpha * share

    return swa_factor


@dataclass
class WeightAverage(Trick):
    start_epoch: int
    lr_share: float  # --swa-lr as a share of --lr
    anneal_epochs: int
    average: object = None  # the AveragedModel, of the plain model on its device
    last_epoch: int | None = None  # the last epoch this process trained

    def start(self, model, optimizer, scheduler):
        from torch.optim.swa_utils import AveragedModel  # torch is imported when a run starts, not for --help

        self.average = AveragedModel(model)  # an equal average; buffers are recomputed at the end
        scheduler.lr_lambdas = [
            annealed(factor, self.start_epoch, self.lr_share, self.anneal_epochs) for factor in scheduler.lr_lambdas
        ]
        return scheduler

    def after_epoch(self, epoch: int, model, validate) -> dict:
        self.last_epoch = epoch
        if epoch >= self.start_epoch:
            self.average.update_parameters(model)
        return {}

    def state(self) -> dict:
        return {"swa": self.average}

    def final_weights(self, model, training_pass, validate) -> dict:
        from torch.nn.modules.batchnorm import _BatchNorm
        from torch.optim.swa_utils import update_bn

        if not self.average.n_averaged.item():
            ended = f" (it ended with epoch {self.last_epoch})" if self.last_epoch else ""
            print(f"SWA: the run trained no epoch from --swa-start {self.start_epoch} on{ended}; no swa.pt")
            return {}
        self.average.train()
        # update_bn starts every BatchNorm layer's statistics afresh; one kept in eval mode for good keeps its own
        in_eval = [layer for layer in self.average.modules() if isinstance(layer, _BatchNorm) and not layer.training]
        for layer in in_eval:
            layer.reset_running_stats = _keep
        update_bn(training_pass(), self.average, device=next(self.average.parameters()).device)
        for layer in in_eval:
            del layer.reset_running_stats
        figures = validate(self.average.module)
        last = self.start_epoch + self.average.n_averaged.item() - 1
        span = f"epoch {last}" if last == self.start_epoch else f"epochs {self.start_epoch} to {last}"
{% set monitor = "val_map" if cookiecutter.task == "multi_label" else "val_acc" %}
        said = f"{{ monitor }} {figures['{{ monitor }}']:.4f}"
        print(f"SWA val_loss {figures['val_loss']:.4g}  {said} (weights of {span} averaged)")
        return {"swa.pt": self.average.module}
{% endif %}
