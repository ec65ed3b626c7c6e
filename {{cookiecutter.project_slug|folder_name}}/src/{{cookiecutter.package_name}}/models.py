"""Models: a small built-in CNN, any torchvision or timm classifier, weight init, and safe weight loading."""

import difflib
{% if cookiecutter.use_freezing or cookiecutter.use_layerwise_lr %}
import fnmatch
{% endif %}
import re
import sys
from collections import OrderedDict
from urllib.error import URLError

import torch
import torchvision
from torch import nn
from torch.utils.checkpoint import checkpoint

from .core.errors import ModelError, load_failure, state_dict_mismatch

BUILTIN = "small_cnn"
TIMM = "timm/"  # --model timm/<name>: any of timm's classifiers, an optional extra
TIMM_EXTRA = 'pip install -e ".[timm]"'
IMAGENET_MEAN = [0.485, 0.456, 0.406]  # what torchvision's pretrained weights were trained with
IMAGENET_STD = [0.229, 0.224, 0.225]
WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # added by DDP and torch.compile


class SmallCNN(nn.Module):
    """Three conv blocks and a global-average-pooling head; trains in seconds on a CPU."""

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
    """Re-initialise every conv and linear layer; `default` keeps the architecture's own init."""
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


def import_timm():
    try:
        import timm
    except ImportError:
        raise ModelError(f"timm models need the timm package: {TIMM_EXTRA}") from None
    return timm


def build_timm_model(name: str, num_classes: int, pretrained: bool) -> nn.Module:
    timm = import_timm()
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=3)
        hint = f"did you mean {' or '.join(TIMM + match for match in close)}?" if close else "see timm.list_models()"
        raise ModelError(f"timm has no model '{name}'; {hint}")
    try:
        return timm.create_model(name, pretrained=pretrained, num_classes=num_classes)
    except OSError as exc:  # offline: huggingface_hub's errors are OSErrors
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise ModelError(
            f"could not download timm's pretrained weights for {name} ({reason}); connect to the internet once "
            "(they are cached), or drop --pretrained"
        ) from None
    except RuntimeError as exc:  # a pretrained tag it does not know, or a model without pretrained weights
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise ModelError(f"timm cannot build {name} ({reason}); see timm.list_models(pretrained=True)") from None


def pretrained_preprocessing(name: str) -> tuple[int | None, list[float], list[float]]:
    """The image size (None: the data's own), mean and std that a model's pretrained weights were trained with: timm
    keeps them per model, torchvision's classifiers share ImageNet's."""
    if name.startswith(TIMM):
        config = import_timm().get_pretrained_cfg(name.removeprefix(TIMM))
        if config is not None:
            return config.input_size[-1], list(config.mean), list(config.std)
    return None, IMAGENET_MEAN, IMAGENET_STD


def build_model(name: str, num_classes: int, pretrained: bool = False, init: str = "default") -> nn.Module:
    if name.startswith(TIMM):
        model = build_timm_model(name.removeprefix(TIMM), num_classes, pretrained)
    elif name == BUILTIN:
        if pretrained:
            raise ModelError(f"{BUILTIN} has no pretrained weights; drop --pretrained or pick a torchvision model")
        model = SmallCNN(num_classes)
    elif name not in model_names():
        close = difflib.get_close_matches(name, model_names(), n=3)
        hint = f"did you mean {' or '.join(close)}?" if close else f"try {BUILTIN}, resnet18 or {TIMM}<name>"
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
    linears = [module for module in model.modules() if isinstance(module, nn.Linear)]
    if not linears:  # a convolution classifies (SqueezeNet, timm's DLA): nothing scaled for ImageNet to undo
        return
    nn.init.normal_(linears[-1].weight, std=0.01)
    if linears[-1].bias is not None:
        nn.init.zeros_(linears[-1].bias)


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
def weights_file(model: nn.Module, classes: list[str]) -> dict:
    """The model's weights as a weights file keeps them: on the CPU (a plain torch.load works on any machine), with the
    class names in the state_dict's metadata, which load_state_dict ignores: the file alone says which output is which
    class."""
    state = model.state_dict()
    on_cpu = OrderedDict((key, value.cpu()) for key, value in state.items())
    on_cpu._metadata = state._metadata
    on_cpu._metadata[""]["classes"] = list(classes)
    return on_cpu


def read_weights(path, map_location="cpu") -> tuple[dict, list[str] | None]:
    """Weights read safely: tensors only (weights_only), onto any device, wrapper prefixes removed; and
    the class names saved with them (None in files written before they were).
{% if cookiecutter.use_checkpointing %}

    Accepts a plain state_dict or a checkpoint holding one under "model".
{% endif %}
    """
    if str(path).endswith((".onnx", ".pt2", ".torchscript.pt")):
        raise ModelError(f"{path} is an exported file, not weights; run it with predict --model-file")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise ModelError(f"weights file {path} does not exist; pass the model.pt of a training run") from None
    except Exception as exc:  # noqa: BLE001 (a cut-short or foreign file raises all kinds: OSError, KeyError, ...)
        raise ModelError(f"{path} is not a readable PyTorch weights file ({load_failure(exc)})") from None
    classes = None
{% if cookiecutter.use_checkpointing %}
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        classes = state.get("classes", {}).get("names") if isinstance(state.get("classes"), dict) else None
        state = state["model"]
{% endif %}
    if not isinstance(state, dict) or not all(isinstance(key, str) for key in state):
        raise ModelError(f"{path} holds no weights (a {type(state).__name__}); pass the model.pt of a training run")
    classes = classes or getattr(state, "_metadata", {}).get("", {}).get("classes")
    return {_strip_prefixes(key): value for key, value in state.items()}, classes


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
    """--activation-checkpointing: memory for compute. The stages' classes change in place (state_dict keys,
    copies and saved weights stay as they were). BatchNorm statistics are updated again by each recomputation,
    which only makes them follow a little faster."""
    if hasattr(model, "set_grad_checkpointing"):  # a timm model knows its own stages
        try:
            model.set_grad_checkpointing(True)
        except (AssertionError, NotImplementedError, RuntimeError):
            raise ModelError(f"--activation-checkpointing: timm's {type(model).__name__} has none; drop it") from None
        print("activation checkpointing: the model's blocks recompute their activations in backward", file=sys.stderr)
        return
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
    """Before the first step: one real image through the model, so that data and model that do not fit
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


def init_from(model: nn.Module, path: str, classes: list[str]) -> None:
    """--init-from: every tensor of a weights file or checkpoint whose name and shape match this model's
    (after DDP's and torch.compile's prefixes), the rest left as built; a few lines say what was taken."""
    (source, source_classes), own = read_weights(path), model.state_dict()
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
    if source_classes and source_classes != classes and not left["other shape (left as built)"]:
        print(f"  its output layer was trained for other classes ({', '.join(source_classes)[:200]})", file=sys.stderr)


def load_weights(model: nn.Module, path) -> list[str] | None:
    """Load a weights file into `model`; return the class names saved with it."""
    state, classes = read_weights(path)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise ModelError(f"{path} does not fit this model: {state_dict_mismatch(exc)}") from None
    return classes
