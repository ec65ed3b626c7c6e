"""Models: a small built-in CNN, any torchvision classifier, weight init, and safe weight loading."""

import difflib
{% if cookiecutter.use_freezing or cookiecutter.use_layerwise_lr %}
import fnmatch
{% endif %}
import pickle
import re
import sys
from urllib.error import URLError

import torch
import torchvision
from torch import nn
from torch.utils.checkpoint import checkpoint

from .errors import ModelError

BUILTIN = "small_cnn"
WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # added by DDP and torch.compile (T19)


class SmallCNN(nn.Module):
    """Three conv blocks and a global-average-pooling head (T23); trains in seconds on a CPU."""

    def __init__(self, num_classes: int, width: int = 32):
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
            )

        self.features = nn.Sequential(
            block(3, width), nn.MaxPool2d(2), block(width, 2 * width), nn.MaxPool2d(2), block(2 * width, 4 * width)
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


def model_names() -> list[str]:
    return [BUILTIN, *torchvision.models.list_models(module=torchvision.models)]


def replace_head(model: nn.Module, num_classes: int) -> None:
    """Swap the last Linear layer (fc, classifier[-1], heads.head, ...) for one with `num_classes` outputs."""
    name, last = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)][-1]
    parent_name, _, attr = name.rpartition(".")
    setattr(model.get_submodule(parent_name), attr, nn.Linear(last.in_features, num_classes))


def init_weights(model: nn.Module, scheme: str) -> None:
    """Re-initialise every conv and linear layer (T16); `default` keeps the architecture's own init."""
    if scheme == "default":
        return
    for module in model.modules():  # modules() walks the whole tree; children() only the top level
        if isinstance(module, nn.Conv2d | nn.Linear):
            if scheme == "kaiming":
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif scheme == "xavier":
                nn.init.xavier_uniform_(module.weight)
            else:
                nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


def build_model(name: str, num_classes: int, pretrained: bool = False, init: str = "default") -> nn.Module:
    if name == BUILTIN:
        if pretrained:
            raise ModelError(f"{BUILTIN} has no pretrained weights; drop --pretrained or pick a torchvision model")
        model = SmallCNN(num_classes)
    elif name not in model_names():
        close = difflib.get_close_matches(name, model_names(), n=3)
        hint = f"did you mean {' or '.join(close)}?" if close else f"try {BUILTIN} or resnet18"
        raise ModelError(f"unknown model '{name}'; {hint}")
    elif pretrained:
        try:
            model = torchvision.models.get_model(name, weights="DEFAULT")
        except (URLError, OSError, RuntimeError) as exc:
            raise ModelError(
                f"could not download pretrained weights for {name} ({exc}); connect to the internet once "
                f"or copy the file into {torch.hub.get_dir()}/checkpoints, or drop --pretrained"
            ) from None
        replace_head(model, num_classes)
    else:
        model = torchvision.models.get_model(name, num_classes=num_classes)
    if not pretrained:
        init_weights(model, init)
        speed_up_batchnorm_statistics(model)
        if init == "default":
            quiet_head(model)
    return model


def quiet_head(model: nn.Module) -> None:
    """Start the classifier near zero: torchvision scales EfficientNet's by 1/sqrt(classes), made for ImageNet's 1000,
    which with 10 classes gives logits in the tens and a from-scratch run that stays at chance."""
    head = [module for module in model.modules() if isinstance(module, nn.Linear)][-1]
    nn.init.normal_(head.weight, std=0.01)
    nn.init.zeros_(head.bias)


FROM_SCRATCH_MOMENTUM = 0.1  # PyTorch's default: running statistics settle within tens of steps


def speed_up_batchnorm_statistics(model: nn.Module) -> None:
    """Models built for long ImageNet schedules (MobileNetV3: momentum 0.01) update BatchNorm's running statistics
    so slowly that a short run from scratch is validated with statistics of its first weights: every image gets
    one class. Trained from scratch, their running statistics follow at PyTorch's default pace."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and (module.momentum or 1) < FROM_SCRATCH_MOMENTUM:
            module.momentum = FROM_SCRATCH_MOMENTUM


{% if cookiecutter.use_freezing or cookiecutter.use_layerwise_lr %}
def name_matches(name: str, pattern: str) -> bool:
    """A parameter name matches a module-name prefix (`layer1`, `layer1.0`) or a glob (`*.bn1.*`)."""
    return name == pattern or name.startswith(pattern + ".") or fnmatch.fnmatchcase(name, pattern)


def matches_any(name: str, patterns) -> bool:
    return any(name_matches(name, pattern) for pattern in patterns)


def check_patterns(model: nn.Module, patterns, flag: str) -> None:
    """A pattern that selects nothing is almost always a typo: refuse it and show what there is."""
    names = [name for name, _ in model.named_parameters()]
    for pattern in patterns:
        if not any(name_matches(name, pattern) for name in names):
            top = ", ".join(name for name, _ in model.named_children())
            raise ModelError(f"{flag} {pattern!r} matches no parameter; the model's top-level modules are: {top}")


{% endif %}
def load_state_dict(path, map_location="cpu") -> dict:
{% if cookiecutter.use_checkpointing %}
    """Read weights safely: tensors only (weights_only), onto any device (T18), wrapper prefixes removed (T19).

    Accepts a plain state_dict or a checkpoint holding one under "model".
    """
{% else %}
    """Read weights safely: tensors only (weights_only), onto any device (T18), wrapper prefixes removed (T19)."""
{% endif %}
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise ModelError(f"weights file {path} does not exist; pass the model.pt of a training run") from None
    except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise ModelError(f"{path} is not a readable PyTorch weights file ({str(exc).splitlines()[0]})") from None
{% if cookiecutter.use_checkpointing %}
    if isinstance(state.get("model"), dict):
        state = state["model"]
{% endif %}
    return {_strip_prefixes(key): value for key, value in state.items()}


def _strip_prefixes(key: str) -> str:
    while key.startswith(WRAPPER_PREFIXES):
        key = key.split(".", 1)[1]
    return key


class Recomputed:
    """Mixed into a stage's own class: in training, its activations are recomputed in backward instead of kept."""

    def forward(self, *args):
        if self.training and torch.is_grad_enabled():
            return checkpoint(super().forward, *args, use_reentrant=False)
        return super().forward(*args)


def stages(model: nn.Module) -> list[nn.Module]:
    """The blocks of `features` (the built-in CNN, MobileNet, EfficientNet, ConvNeXt, VGG...) or ResNet's layers,
    those with parameters."""
    features = getattr(model, "features", None)
    found = list(features.children()) if isinstance(features, nn.Sequential) else []
    found = found or [getattr(model, name) for name in ("layer1", "layer2", "layer3", "layer4") if hasattr(model, name)]
    return [stage for stage in found if any(True for _ in stage.parameters())]


def checkpoint_activations(model: nn.Module) -> None:
    """--activation-checkpointing (T24): memory for compute. The stages' classes change in place (state_dict keys,
    copies and saved weights stay as they were). BatchNorm statistics are updated again by each recomputation,
    which only makes them follow a little faster."""
    found = stages(model)
    if not found:
        raise ModelError(
            f"--activation-checkpointing: {type(model).__name__} has no stages it knows (a `features` Sequential or "
            "ResNet layers); drop the flag"
        )
    for stage in found:
        stage.__class__ = type(f"Recomputed{type(stage).__name__}", (Recomputed, type(stage)), {})
    print(f"activation checkpointing: {len(found)} stages recompute their activations in backward", file=sys.stderr)


def check_fits(model: nn.Module, image: torch.Tensor, num_classes: int, cfg) -> None:
    """Before the first step (T47): one real image through the model, so that data and model that do not fit
    stop with one line naming the flag to change, not a shape error from deep inside a step. Nothing per step."""
    given = f"--model {cfg.model} with --data {cfg.data}"
    try:
        with torch.no_grad():
            logits = model.eval()(image)
    except (RuntimeError, ValueError, AssertionError) as exc:  # torchvision's ViT asserts its input size
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        channels = re.search(r"to have (\d+) channels, but got (\d+) channels", text)
        size = re.search(r"Expected (\d+) but got \d+", text)
        if channels:
            problem = "the model takes {}-channel images, the data gives {}-channel ones".format(*channels.groups())
        elif size:
            problem = f"the model needs {size[1]} px images, not {image.shape[-1]} px: pass --image-size {size[1]}"
        else:
            problem = f"{image.shape[-1]} px images are too small for it ({text}); pass a larger --image-size, e.g. 224"
        raise ModelError(f"{given}: {problem}") from None
    if logits.shape[-1] != num_classes:
        raise ModelError(f"{given}: the model gives {logits.shape[-1]} class scores for {num_classes} classes")


def init_from(model: nn.Module, path: str) -> None:
    """--init-from (T17): every tensor of a weights file or checkpoint whose name and shape match this model's
    (after DDP's and torch.compile's prefixes), the rest left as built; a few lines say what was taken."""
    source, own = load_state_dict(path), model.state_dict()
    taken = {name: tensor for name, tensor in source.items() if name in own and own[name].shape == tensor.shape}
    if not taken:
        raise ModelError(f"--init-from {path}: no tensor matches this model by name and shape; is it the same model?")
    model.load_state_dict(taken, strict=False)
    print(f"init from {path}: loaded {len(taken)} of this model's {len(own)} tensors", file=sys.stderr)
    left = {
        "other shape (left as built)": [name for name in source if name in own and name not in taken],
        "missing from the file (left as built)": [name for name in own if name not in source],
        "unexpected (ignored)": [name for name in source if name not in own],
    }
    for what, names in left.items():
        if names:
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            print(f"  {what}: {', '.join(names[:3])}{more}", file=sys.stderr)


def load_weights(model: nn.Module, path) -> None:
    try:
        model.load_state_dict(load_state_dict(path))
    except RuntimeError as exc:
        mismatch = " ".join(str(exc).split("\n", 1)[-1].split())
        raise ModelError(f"{path} does not fit this model: {mismatch[:300]}") from None
