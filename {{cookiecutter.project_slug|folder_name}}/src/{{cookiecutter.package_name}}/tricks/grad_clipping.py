{% if cookiecutter.use_grad_clipping %}
"""Gradient clipping: the total gradient norm clipped before each optimizer step, and logged per epoch as grad_norm.

`--clip-grad-norm 1.0` rescales the gradients when their total norm exceeds the limit, which tames loss spikes from
outliers or high learning rates; `--clip-grad-norm-type` is the p of the norm (`inf` for the largest element). The
gradients clipped are those the optimizer steps on: the mean of an accumulation group{% if cookiecutter.use_amp %}, unscaled first under fp16{% endif %}.
The mean norm before clipping over the epoch's steps is logged as `grad_norm` in `metrics.csv`: if it is always far
above the limit, the limit is too low.
"""

import math
from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option
from . import Trick


@dataclass
class Options:
    clip_grad_norm: float = option(1.0, "clip the gradient norm to this value (0 turns it off)")
    clip_grad_norm_type: float = option(2.0, "the p of the clipped p-norm (inf for the max norm)")
    off = {"clip_grad_norm": 0.0}  # the values that switch it off

    def check(self) -> None:
        if not 0 <= self.clip_grad_norm < math.inf:
            raise UserError(f"--clip-grad-norm must be a finite number, not negative, got {self.clip_grad_norm}")
        if not self.clip_grad_norm_type > 0:  # the p of a p-norm; inf passes
            raise UserError(
                f"--clip-grad-norm-type must be positive (2 for the L2 norm, inf for the largest value), "
                f"got {self.clip_grad_norm_type}"
            )


def build(cfg, num_classes: int) -> "GradClipping | None":
    """None when --clip-grad-norm is 0."""
    return GradClipping(cfg.clip_grad_norm, cfg.clip_grad_norm_type) if cfg.clip_grad_norm else None


@dataclass
class GradClipping(Trick):
    """Clips with `torch.nn.utils.clip_grad_norm_`; the norms stay on the device until the epoch ends."""

    max_norm: float
    norm_type: float
    epoch_sums = True  # state() is the epoch's running sums: none to restore at an epoch's end
    norm: object = None  # the norm of the step about to be taken
    norm_sum: object = None  # over the steps taken this epoch
    steps: int = 0

    def before_step(self, model) -> None:
        from torch import nn  # torch is imported when a run starts, not for --help

        self.norm = nn.utils.clip_grad_norm_(model.parameters(), self.max_norm, self.norm_type)

    def after_step(self, model) -> None:
        self.norm_sum = self.norm if self.norm_sum is None else self.norm_sum + self.norm
        self.steps += 1

    def after_epoch(self, epoch: int, model, validate) -> dict:
        mean = self.norm_sum.item() / self.steps if self.steps else 0.0  # the same on every process
        self.norm_sum, self.steps = None, 0
        return {"grad_norm": mean}

    def state(self) -> dict:
        return {"grad_clipping": self}  # a checkpoint mid-epoch keeps the epoch's sums

    def state_dict(self) -> dict:
        return {"norm_sum": self.norm_sum, "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        import torch

        norm_sum, steps = state["norm_sum"], state["steps"]
        if type(steps) is not int or steps < 0 or (norm_sum is None) != (steps == 0):
            raise ValueError(f"{steps!r} steps with a norm sum of {norm_sum!r}")
        if norm_sum is not None and not (isinstance(norm_sum, torch.Tensor) and norm_sum.ndim == 0):
            raise ValueError(f"the norm sum is {norm_sum!r}, not a number")
        self.norm_sum, self.steps = norm_sum, steps
{% endif %}
