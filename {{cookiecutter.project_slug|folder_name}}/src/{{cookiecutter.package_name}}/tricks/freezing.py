{% if cookiecutter.use_freezing %}
"""Freezing layers by name: no gradients, no optimizer slot, and BatchNorm statistics kept as they are."""

import types

from torch import nn

from ..core.errors import ModelError
from ..models import check_patterns, matches_any

BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d{{ ", nn.SyncBatchNorm" if cookiecutter.use_sync_bn else "" }})


def _stay_in_eval(module: nn.Module, mode: bool = True) -> nn.Module:
    return module


def freeze(model: nn.Module, patterns: list[str] | None) -> None:
    """Freeze every parameter whose name starts with (or glob-matches) one of `patterns`."""
    if not patterns:
        return
    check_patterns(model, patterns, "--freeze")
    if all(matches_any(name, patterns) for name, _ in model.named_parameters()):
        raise ModelError(f"--freeze {' '.join(patterns)} would freeze every parameter: nothing would train")
    for name, parameter in model.named_parameters():
        if matches_any(name, patterns):
            parameter.requires_grad_(False)
    for name, module in model.named_modules():
        parameters = list(module.parameters())
        frozen = not any(p.requires_grad for p in parameters) if parameters else matches_any(name, patterns)
        if isinstance(module, BATCH_NORMS) and frozen:
            # requires_grad=False does not stop running-statistics updates, and a plain .eval() is undone
            # by the next model.train(): pin this layer to eval mode for good.
            module.eval()
            module.train = types.MethodType(_stay_in_eval, module)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"frozen parameters: {frozen:,}; trainable: {trainable:,}")
{% endif %}
