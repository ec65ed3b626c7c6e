{% if cookiecutter.use_freezing %}
"""Freezing layers: no gradients, no optimizer slot, and BatchNorm statistics kept as they are.

`--freeze features.0 "layer1.*"` freezes every parameter whose name starts with a pattern (a module name) or matches
it as a glob. Frozen parameters get no gradient and no optimizer slot (so weight decay and momentum cannot move
them), and BatchNorm layers inside frozen modules stay in eval mode, keeping their running statistics. A pattern that
matches nothing is an error listing the model's top-level modules, and so is freezing every parameter; the start of
the run prints how many parameters are frozen and trainable. Use it to fine-tune only the head of a pretrained model
(`--model resnet18 --pretrained --freeze conv1 bn1 layer1 layer2 layer3 layer4`).
"""

import types
from dataclasses import dataclass

from ..core.errors import ModelError
from ..core.options import option
from . import Trick


@dataclass
class Options:
    freeze: list[str] | None = option(
        None, "freeze parameters whose name starts with or glob-matches a pattern", metavar="PATTERN"
    )


def build(cfg, num_classes: int) -> "Freezing | None":
    return Freezing(cfg.freeze) if cfg.freeze else None


def _stay_in_eval(module, mode: bool = True):
    return module


@dataclass
class Freezing(Trick):
    patterns: list[str]

    def prepare(self, model, device):
        freeze(model, self.patterns)
        return model


def freeze(model, patterns: list[str]) -> None:
    """Freeze every parameter whose name starts with (or glob-matches) one of `patterns`."""
    from torch.nn.modules.batchnorm import _BatchNorm  # every kind of BatchNorm layer

    from ..models import check_patterns, matches_any  # torch is imported when a run starts, not for --help

    check_patterns(model, patterns, "--freeze")
    if all(matches_any(name, patterns) for name, _ in model.named_parameters()):
        raise ModelError(f"--freeze {' '.join(patterns)} would freeze every parameter: nothing would train")
    for name, parameter in model.named_parameters():
        if matches_any(name, patterns):
            parameter.requires_grad_(False)
    for name, module in model.named_modules():
        parameters = list(module.parameters())
        frozen = not any(p.requires_grad for p in parameters) if parameters else matches_any(name, patterns)
        if isinstance(module, _BatchNorm) and frozen:
            # requires_grad=False does not stop running-statistics updates, and a plain .eval() is undone
            # by the next model.train(): pin this layer to eval mode for good.
            module.eval()
            module.train = types.MethodType(_stay_in_eval, module)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"frozen parameters: {frozen:,}; trainable: {trainable:,}")
{% endif %}
