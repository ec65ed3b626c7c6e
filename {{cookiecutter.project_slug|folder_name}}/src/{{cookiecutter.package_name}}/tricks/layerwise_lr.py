{% if cookiecutter.use_layerwise_lr %}
"""Layer-wise learning rates: parameters matching a pattern train at --lr times its multiplier (`--lr-mult fc=10`).

`--lr-mult fc=10 layer4=2` gives matching parameters (first matching pattern wins) a learning rate of `--lr` times
the multiplier; all others use `--lr`. Each group keeps its ratio through the schedule, and `metrics.csv` logs every
group's rate as `lr[PATTERN]`. A pattern whose parameters all go to an earlier pattern{{ ' or are frozen' if cookiecutter.use_freezing else '' }} sets no rate and is
refused. Use a large multiplier for a freshly initialised head on top of a pretrained backbone.
"""

import math
from dataclasses import dataclass

from ..core.errors import ModelError, UserError
from ..core.options import option
from . import Trick


@dataclass
class Options:
    lr_mult: list[str] | None = option(
        None, "learning-rate multiplier of matching parameters, e.g. fc=10", metavar="PATTERN=MULT"
    )
    off = {"lr_mult": None}  # the values that switch it off

    def check(self) -> None:
        parse_lr_mults(self.lr_mult)  # refuse malformed PATTERN=MULT items before anything starts


def parse_lr_mults(items: list[str] | None) -> dict[str, float]:
    """["fc=10", "layer4=2"] -> {"fc": 10.0, "layer4": 2.0}."""
    mults = {}
    for item in items or []:
        pattern, _, value = item.partition("=")
        if pattern in mults:
            raise UserError(f"--lr-mult gives {pattern!r} two rates; give it one")
        try:
            mults[pattern] = float(value)
        except ValueError:
            mults[pattern] = -1.0
        if not pattern or not 0 < mults[pattern] < math.inf:
            raise UserError(f"--lr-mult {item!r} must be PATTERN=MULT with a positive number, e.g. fc=10")
    return mults


def build(cfg, num_classes: int) -> "LayerwiseLR | None":
    """None without --lr-mult."""
    mults = parse_lr_mults(cfg.lr_mult)
    return LayerwiseLR(mults, cfg.lr) if mults else None


@dataclass
class LayerwiseLR(Trick):
    mults: dict[str, float]  # pattern -> multiplier, in the order given: the first that matches wins
    lr: float  # --lr
    optimizer: object = None

    def param_groups(self, model, groups: list[dict]) -> list[dict]:
        """Each group split by the pattern each parameter matches first, into groups with their own rate."""
        from ..models import check_patterns, name_matches  # torch is imported when a run starts, not for --help

        check_patterns(model, self.mults, "--lr-mult")
        names = {id(parameter): name for name, parameter in model.named_parameters()}
        split: dict[tuple, list] = {}
        for group in groups:
            for parameter in group["params"]:
                pattern = next((pattern for pattern in self.mults if name_matches(names[id(parameter)], pattern)), None)
                split.setdefault((pattern, group["weight_decay"]), []).append(parameter)
        unused = [pattern for pattern in self.mults if pattern not in {pattern for pattern, _ in split}]
        if unused:
            why = "is {{ 'frozen or ' if cookiecutter.use_freezing else '' }}taken by an earlier pattern"
            raise ModelError(f"--lr-mult {unused[0]!r} sets no rate: each parameter it matches {why}; drop it")
        return [
            {"params": params, "weight_decay": decay, "lr": self.lr * mult, "lr_mult": mult, "lr_pattern": pattern}
            for (pattern, decay), params in split.items()
            for mult in [self.mults.get(pattern, 1.0)]
        ]

    def start(self, model, optimizer, scheduler):
        self.optimizer = optimizer
        return scheduler

    def after_epoch(self, epoch: int, model, validate) -> dict:
        """The epoch's base rate, whichever group comes first, and that of each pattern."""
        first = self.optimizer.param_groups[0]
        rates = {"lr": first["lr"] / first["lr_mult"]}
        for group in self.optimizer.param_groups:
            if group["lr_pattern"] is not None:
                rates[f"lr[{group['lr_pattern']}]"] = group["lr"]
        return rates
{% endif %}
