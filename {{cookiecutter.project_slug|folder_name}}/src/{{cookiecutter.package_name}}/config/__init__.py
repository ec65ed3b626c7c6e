"""The training configuration: one dataclass that the command line, YAML files and the code all share.

Precedence: dataclass defaults < `--config FILE` < flags given on the command line. The resolved
config (every "auto" value filled in) is written into the output dir as `config.yaml`. Its fields: BaseConfig's
below, those of each module of this package (the options of a feature this project has, as `Options`) and those of
each trick (tricks/).
"""

import argparse
import dataclasses
import math
import os
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path

import yaml

from .. import tricks
from ..core.errors import UserError
from ..core.files import write_text
from ..core.options import option, plugin_modules

DEVICES = ["auto", "cpu", "cuda", "mps", "xpu"]  # auto: the machine's accelerator (torch.accelerator), else the CPU
# the console script, as messages tell the user to run it
SCRIPT = "{{ cookiecutter.project_slug }}"
GPU_IDS_HELP = "comma-separated GPU ids exported as CUDA_VISIBLE_DEVICES; cpu (or empty) for CPU only"
MODEL_HELP = "small_cnn, any torchvision classification model, or timm/<name> for any of timm's"
# `export`: each format's file suffix (predict --model-file reads a file by it) and the logit difference it accepts
EXPORT_FORMATS = {"onnx": ".onnx", "torchscript": ".pt", "exported-program": ".pt2"}
EXPORT_TOLERANCE = 1e-3
MAX_IMAGE_SIZE = 4096  # a batch of larger images fills any memory
FEATURES = plugin_modules(__name__, __path__, ("Options",), "a module of config/")  # a feature's options each
OPTIONS = [module.Options for module in FEATURES] + tricks.OPTIONS  # the fields TrainConfig adds to BaseConfig's


@dataclass
class BaseConfig:
    """Every field but the tricks' (TrainConfig below adds theirs)."""

    data: str = option(
        "synthetic",
        "synthetic, cifar10, mnist, fashion_mnist, a folder of class folders (with or without train/ and val/), "
        "or a CSV of {{ 'path,labels[,split] (names separated by ;) or of path and 0/1 class columns' if cookiecutter.task == 'multi_label' else 'path,label[,split]' }}",
    )
    data_root: str = option("data", "where cifar10/mnist/fashion_mnist are downloaded")
    val_split: float = option(0.2, "share of each class held out for validation where --data has no split")
    split: str | None = option(None, "split.csv of an earlier run: train and validate on exactly its images")
{% if cookiecutter.task == "multi_label" %}
    pos_weight: str = option(
        "none", "auto: weigh each class's positives in the loss by its negatives / positives", choices=["none", "auto"]
    )
{% else %}
    class_weights: str = option(
        "none", "auto: weigh each class in the loss by its inverse frequency", choices=["none", "auto"]
    )
{% endif %}
{% if cookiecutter.task == "multi_label" %}
    sampler: str = option("random", "balanced: draw images by their rarest label", choices=["random", "balanced"])
{% else %}
    sampler: str = option("random", "balanced: draw every class equally often", choices=["random", "balanced"])
{% endif %}
    augment: str = option(
        "basic",
        "training augmentation: none, basic (random crops), or crops and one of torchvision's policies",
        choices=["none", "basic", "trivialaugment", "randaugment", "autoaugment"],
    )
    hflip: bool | None = option(None, "random horizontal flips in training, and --tta (auto: on, off for mnist)")
    random_erasing: float = option(0.0, "chance of erasing a random rectangle of each training image")
    model: str = option("{{ cookiecutter.model | escaped }}", MODEL_HELP)
    pretrained: bool = option(False, "start from the model's pretrained weights (torchvision's or timm's)")
    init_from: str | None = option(None, "start from the weights in this file wherever name and shape match")
    init: str = option(
        "default",
        "weight init for models trained from scratch",
        choices=["default", "kaiming", "xavier", "normal"],
    )
    image_size: int | None = option(
        None, "input size (auto: a pretrained timm model's, the data's own, 224 for folders)"
    )
    mean: list[float] | None = option(
        None, "normalisation mean (auto: the pretrained weights', else the data's)", nargs=3, metavar=("R", "G", "B")
    )
    std: list[float] | None = option(None, "normalisation std (auto: as for --mean)", nargs=3, metavar=("R", "G", "B"))
    epochs: int = option(5, "number of epochs")
{% if cookiecutter.use_distributed %}
    batch_size: int = option(64, "images per step over all processes together (global; divides by their number)")
{% else %}
    batch_size: int = option(64, "images per step")
{% endif %}
    accumulate_steps: int = option(1, "optimizer step every N batches: the effective batch is N times larger")
    optimizer: str = option("sgd", "optimizer", choices=["sgd", "adamw"])
    lr: float | None = option(None, "learning rate (auto: 0.05 for sgd, 0.001 for adamw)")
    momentum: float = option(0.9, "SGD momentum (Nesterov)")
    weight_decay: float = option(5e-4, "weight decay (never applied to biases and norm weights)")
    l1: float = option(0.0, "adds L1 x the sum of |weights| to the loss (trainable kernels: not biases or norms)")
    scheduler: str = option("cosine", "learning-rate schedule per epoch", choices=["none", "step", "cosine"])
    warmup_epochs: int = option(0, "linear warm-up epochs before the cosine decay")
    step_size: int = option(30, "epochs between decays of the step schedule")
    gamma: float = option(0.1, "decay factor of the step schedule")
    seed: int = option(0, "seed for python, numpy, torch and the data order")
    deterministic: bool = option(False, "deterministic algorithms (slower) instead of cudnn.benchmark")
    device: str = option("auto", "where to train: auto is the machine's accelerator, else the CPU", choices=DEVICES)
    gpus: str = option("{{ cookiecutter.gpu_ids | gpus | escaped }}", GPU_IDS_HELP)
    num_workers: int | None = option(None, "data-loading processes (auto: 0 for synthetic data, else up to 8)")
    output_dir: str | None = option(None, "where results go (auto: runs/<date-time>)")
    overwrite: bool = option(False, "replace a finished run in --output-dir")
    max_steps_per_epoch: int | None = option(None, "cap training and validation steps per epoch (smoke runs)")
    channels_last: bool = option(False, "channels-last memory format (faster convolutions on GPUs with AMP)")
    compile: bool = option(False, "torch.compile the model: slower first steps, faster ones after")
    activation_checkpointing: bool = option(False, "recompute each stage's activations in backward: less memory")
{% set monitor = "val_map" if cookiecutter.task == "multi_label" else "val_acc" %}
    patience: int | None = option(None, "stop early when {{ monitor }} has not improved for this many epochs")
{% if cookiecutter.task == "multi_label" %}
    plots: bool = option(True, "draw learning_curves.png and precision_recall.png at the end of the run")
{% elif cookiecutter.tracker == "tensorboard" %}
    plots: bool = option(True, "draw learning_curves.png, confusion_matrix.png and TensorBoard's confusion figures")
{% else %}
    plots: bool = option(True, "draw learning_curves.png and confusion_matrix.png at the end of the run")
{% endif %}
    profile: bool = option(False, "record 5 training steps with torch.profiler into <output dir>/profile")
    detect_anomaly: bool = option(False, "autograd anomaly detection: name the operation behind a NaN gradient (slow)")

    def __post_init__(self):
        for name, value in vars(self).items():  # NaN passes every comparison below: refuse it first
            if any(isinstance(v, float) and math.isnan(v) for v in (value if isinstance(value, list) else [value])):
                raise UserError(f"--{name.replace('_', '-')} must be a number, got {value}")
        at_least_one = ["epochs", "batch_size", "accumulate_steps", "max_steps_per_epoch", "step_size", "patience"]
        for name in at_least_one:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.image_size is not None and not 2 <= self.image_size <= MAX_IMAGE_SIZE:  # 1 px: torchvision fails
            raise UserError(f"--image-size must be between 2 and {MAX_IMAGE_SIZE}, got {self.image_size}")
        non_negative = ["lr", "weight_decay", "l1", "momentum", "warmup_epochs", "num_workers", "gamma"]
        for name in non_negative:
            value = getattr(self, name)
            if value is not None and not 0 <= value < math.inf:
                raise UserError(f"--{name.replace('_', '-')} must be a finite number, not negative, got {value}")
        if self.warmup_epochs > self.epochs:
            raise UserError(
                f"--warmup-epochs {self.warmup_epochs} is beyond --epochs {self.epochs}: the learning rate would never "
                "reach --lr; lower it, or train for longer"
            )
        if (self.mean is None) != (self.std is None):
            raise UserError("--mean and --std go together (normalisation needs both): give both or neither")
        if self.mean is not None and not all(math.isfinite(value) for value in self.mean):
            raise UserError(f"--mean must be three finite numbers (one per channel), got {self.mean}")
        if not 0 <= self.seed < 2**32:
            raise UserError(f"--seed must be between 0 and 2**32 - 1, got {self.seed}")
        if self.std is not None and not all(0 < value < math.inf for value in self.std):
            raise UserError(f"--std must be three positive numbers (one per channel), got {self.std}")
        if not 0 < self.val_split < 1:
            raise UserError(f"--val-split must be between 0 and 1 (a share of each class), got {self.val_split}")
        if not 0 <= self.random_erasing <= 1:
            raise UserError(f"--random-erasing must be a probability between 0 and 1, got {self.random_erasing}")
        for options in OPTIONS:
            if hasattr(options, "check"):
                options.check(self)


@dataclass
class TrainConfig(*reversed(OPTIONS), BaseConfig):
    """The configuration: BaseConfig's fields, then those of each feature's and each trick's `Options`."""


FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
# Flags about one command, not about the run: a saved config.yaml never replays them.
PER_INVOCATION = {"overwrite", "init_from"}  # how one run starts
PER_INVOCATION |= {name for options in OPTIONS for name in getattr(options, "per_invocation", ())}
TYPES = typing.get_type_hints(TrainConfig)


def resolve_options(cfg: TrainConfig) -> dict:
    """The automatic values of the features' and tricks' options, filled in (each Options' `resolve`)."""
    resolved = {}
    for options in OPTIONS:
        resolved |= options.resolve(cfg) if hasattr(options, "resolve") else {}
    return resolved


def base_type(hint):
    """`int | None` -> int, `list[float] | None` -> list[float]."""
    if isinstance(hint, types.UnionType):
        return next(arg for arg in typing.get_args(hint) if arg is not type(None))
    return hint


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per config field; only flags actually given end up in the parsed namespace."""
    for name, spec in FIELDS.items():
        kind = base_type(TYPES[name])
        kwargs = {"default": argparse.SUPPRESS, **spec.metadata}
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(kind) is list:
            kwargs = {"type": typing.get_args(kind)[0], "nargs": "+", **kwargs}
        else:
            kwargs["type"] = kind
        parser.add_argument("--" + name.replace("_", "-"), **kwargs)


def coerce(name: str, value):
    kind = base_type(TYPES[name])
{% if cookiecutter.use_checkpointing %}
    if name == "checkpoint_every" and type(value) is int:  # YAML reads 500 as a number: steps
        value = str(value)
{% endif %}
    if value is None and TYPES[name] is not kind:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typing.get_origin(kind) is list:
        item, length = typing.get_args(kind)[0], FIELDS[name].metadata.get("nargs")
        if isinstance(value, str) and item is str:
            value = [value]
        allowed = (int, float) if item is float else item
        if isinstance(value, list) and all(isinstance(v, allowed) for v in value) and length in (None, len(value)):
            return [item(v) for v in value]
    elif isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        choices = FIELDS[name].metadata.get("choices")
        if choices is None or value in choices:
            return value
    expected = f"a list of {typing.get_args(kind)[0].__name__}" if typing.get_origin(kind) is list else kind.__name__
    if FIELDS[name].metadata.get("choices"):
        expected = "one of " + ", ".join(FIELDS[name].metadata["choices"])
    raise UserError(f"config key '{name}' must be {expected}, got {value!r}; fix the config file")


def load_config_file(path: str) -> dict:
    try:
        values = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read config file {path}: {exc.strerror}; check the path") from None
    except UnicodeDecodeError:
        raise UserError(f"config file {path} is not UTF-8 text; save it as UTF-8") from None
    except yaml.YAMLError as exc:
        raise UserError(f"config file {path} is not valid YAML ({exc.problem}); fix its syntax") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise UserError(f"config file {path} must hold a mapping of keys to values")
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise UserError(f"config file {path} has unknown keys {unknown}; known keys: {', '.join(FIELDS)}")
    ignored = sorted(key for key in PER_INVOCATION & set(values) if values[key])
    if ignored:
        notice = f"config file {path}: ignoring {', '.join(ignored)} (they apply to one command: pass them as flags)"
        print(notice, file=sys.stderr)
    values = {name: coerce(name, value) for name, value in values.items() if name not in PER_INVOCATION}
    return values | _relative_to(Path(path).parent, values)


def _relative_to(folder: Path, values: dict) -> dict:
    """Relative paths in a config file are relative to the file's folder, so that it works from any working folder:
    output_dir always (a run's config.yaml says ".", its own folder: a copied run continues in the copy), the others
    where they exist there (else they may name a dataset, or a path relative to where the command runs)."""
    found = {}
    for name in ("output_dir", "data", "split", "data_root"):
        value = values.get(name)
        if value and not Path(value).is_absolute() and (name == "output_dir" or (folder / value).exists()):
            found[name] = os.path.normpath(folder / value)
    return found


def make_config(cli_values: dict, config_file: str | None = None) -> TrainConfig:
{% if cookiecutter.use_checkpointing %}
    """Defaults < the config file < flags. `--resume PATH` or `--resume auto --output-dir DIR` without --config
    continues that run: the config.yaml beside the checkpoint, or in DIR, is the config file."""
    resume, run_dir = cli_values.get("resume"), None
    if resume == "auto" and cli_values.get("output_dir"):
        run_dir = Path(cli_values["output_dir"])
    elif resume not in (None, "auto"):
        run_dir = Path(resume).parent
    if config_file is None and run_dir and (run_dir / "config.yaml").is_file():
        config_file = str(run_dir / "config.yaml")
    values = load_config_file(config_file) if config_file else {}
    if resume and config_file:  # a run's config.yaml without a trick's keys: the project gained the trick later
        values = {name: value for name, value in tricks.OFF.items() if name not in values} | values
{% else %}
    values = load_config_file(config_file) if config_file else {}
{% endif %}
    values.update(cli_values)
    return TrainConfig(**values)


def saved_fields(cfg: TrainConfig) -> dict:
    """What config.yaml and checkpoints keep of a config: everything but the per-command flags."""
    return {key: value for key, value in dataclasses.asdict(cfg).items() if key not in PER_INVOCATION}


def save_config(cfg: TrainConfig, path: Path) -> None:
    """The run's config.yaml: paths absolute, the output dir "." (the config's own folder, wherever it is copied)."""
    write_text(path, yaml.safe_dump(saved_fields(cfg) | {"output_dir": "."}, sort_keys=False))
