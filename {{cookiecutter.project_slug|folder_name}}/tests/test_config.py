"""Every config field, generated from the TrainConfig dataclass alone: a new field or option is covered (or has to be
classified in EXEMPT) without editing these tests.

A field's "other value" comes from its type, default and choices: bools flip, ints grow by one, floats halve (which
keeps probabilities and decays valid), lists take sample values, strings another name.
"""

import contextlib
import dataclasses
import enum
import hashlib
import inspect
import itertools
import re
import types
import typing
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from {{ cookiecutter.package_name }}.config import FIELDS, TrainConfig, make_config, save_config
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.tricks import OFF, OPTIONS

# Literal on purpose, not config.PER_INVOCATION: config.yaml must replay every other field, whatever config/ says.
PER_INVOCATION = {"overwrite", "init_from"{% if cookiecutter.use_checkpointing %}, "resume"{% endif %}}
# The only values the derivation cannot make valid.
{% if cookiecutter.use_checkpointing %}
ROUND_TRIP_OVERRIDES = {"init_from": None, "checkpoint_every": "10min"}  # refused together with --resume; a format
{% else %}
ROUND_TRIP_OVERRIDES: dict = {}
{% endif %}

# real architectures, not a derived name; a warm-up of at most the tiny config's one epoch
BUILD_OVERRIDES = {"model": ["mobilenet_v3_small", "resnet18"], "warmup_epochs": [0, 1]}
# Options that configure nothing train() builds before its first step: why, and the tests that cover them.
EXEMPT = {
    "data": "the data source itself: test_data.py and test_datasets.py build each kind",
    "data_root": "where torchvision's data sets download: never read for synthetic data",
    "val_split": "the held-out share of folder and CSV data (synthetic data comes split): test_datasets.py",
    "split": "a split.csv of folder or CSV data: test_datasets.py",
    "pretrained": "downloads ImageNet weights: test_model.py",
    "device": "this machine: test_cli.py, test_errors.py",
    "gpus": "this machine: test_cli.py, test_errors.py",
    "output_dir": "where the files go: every training test",
    "max_steps_per_epoch": "caps the loop: test_train.py",
    "accumulate_steps": "read by the loop: test_speed_tricks.py",
    "patience": "read after each epoch: test_speed_tricks.py",
    "plots": "drawn after the run: test_reports.py",
    "profile": "wraps the loop's loader: test_debugging.py",
{% if cookiecutter.use_amp %}
    "precision": "the loop's autocast (no scaler on a CPU): test_amp.py",
{% endif %}
{% if cookiecutter.use_checkpointing %}
    "checkpoint_every": "when the loop saves mid-epoch: test_checkpoint.py",
{% endif %}
{% if cookiecutter.use_distributed %}
    "nproc": "how many processes the command line starts: test_distributed.py",
    "dist_timeout": "read where a process group starts: only in launched workers",
{% endif %}
{% if cookiecutter.use_sync_bn %}
    "sync_bn": "acts in a distributed CUDA job only: test_sync_bn.py",
{% endif %}
{% if cookiecutter.use_grad_clipping %}
    "clip_grad_norm": "read by the loop: test_grad_clipping.py",
    "clip_grad_norm_type": "read by the loop: test_grad_clipping.py",
{% endif %}
{% if cookiecutter.task == "multi_label" %}
    "threshold": "where validation and predictions turn probabilities into labels: test_multi_label.py",
{% endif %}
{% if cookiecutter.tracker == "mlflow" %}
    "tracking_uri": "read by the tracker: test_tracking.py",
{% endif %}
{% if cookiecutter.tracker in ("mlflow", "wandb") %}
    "experiment": "read by the tracker: test_tracking.py",
{% endif %}
{% if cookiecutter.tracker != "none" %}
    "{{ cookiecutter.tracker }}": "read by the loop: test_tracking.py",
{% endif %}
    **dict.fromkeys(PER_INVOCATION, "how one command starts, never saved (the round trip checks that)"),
}
VARIED = [name for name in FIELDS if name not in EXEMPT]
LIST_SAMPLES = {"PATTERN": "fc", "MULT": "2"}  # per metavar word; fc: the built-in CNN's head
{% if cookiecutter.use_freezing and cookiecutter.use_layerwise_lr %}
FIELD_SAMPLES = {"freeze": ["fc.bias"]}  # not all of fc: --lr-mult fc=2, next to it, must still set a rate
{% endif %}
UNSET_INT = 8  # for an int left to "auto": small, and valid for every size, count and patience
SCHEDULED_EPOCHS = range(100)  # past the step schedule's first decays


def kind(name: str):
    """`int | None` -> int, `list[float] | None` -> list[float]."""
    hint = typing.get_type_hints(TrainConfig)[name]
    if isinstance(hint, types.UnionType):
        return next(arg for arg in typing.get_args(hint) if arg is not type(None))
    return hint


def other_value(name: str, current):
    """A valid value of the field other than `current`, from its type and choices alone."""
    spec, plain = FIELDS[name], kind(name)
    if "choices" in spec.metadata:
        return [choice for choice in spec.metadata["choices"] if choice != current][-1]
    if plain is bool:
        return not current
    if plain is int:
        return UNSET_INT if current is None else current + 1
    if plain is float:
        return current / 2 if current else 0.5
    if plain == list[float]:
        return [v / 2 for v in current] if current else [0.5 / 2**i for i in range(spec.metadata.get("nargs", 1))]
{% if cookiecutter.use_freezing and cookiecutter.use_layerwise_lr %}
    if name in FIELD_SAMPLES:
        return FIELD_SAMPLES[name]
{% endif %}
    if plain == list[str]:
        return [re.sub(r"[A-Z]+", lambda word: LIST_SAMPLES[word[0]], spec.metadata.get("metavar", "PATTERN"))]
    return f"{current or name}-other"


def values_to_build(name: str, current) -> list:
    """`current`, then every other choice; else two other values, so that a value that only switches something on
    (and is then ignored) shows too."""
    if name in BUILD_OVERRIDES:
        return [current, next(value for value in BUILD_OVERRIDES[name] if value != current)]
    first = other_value(name, current)
    values = [current]
    for value in [first, other_value(name, first), *FIELDS[name].metadata.get("choices", [])]:
        if value not in values:
            values.append(value)
    return values


def test_config_yaml_replays_every_field_but_the_per_invocation_flags(tmp_path, monkeypatch):
    """A field that config.yaml drops (or that becomes per-invocation) would make a replayed run differ."""
    monkeypatch.chdir(tmp_path)  # the derived output_dir is a relative path
    defaults = TrainConfig()
    values = {name: other_value(name, getattr(defaults, name)) for name in FIELDS} | ROUND_TRIP_OVERRIDES
    changed = TrainConfig(**values)
    assert all(getattr(changed, name) != getattr(defaults, name) for name in set(FIELDS) - set(ROUND_TRIP_OVERRIDES))
    saved = Path(changed.output_dir, "config.yaml")  # in the run's own folder, as train() saves it
    saved.parent.mkdir()
    save_config(changed, saved)
    replayed = make_config({}, str(saved))
    for name in FIELDS:
        expected = getattr(defaults if name in PER_INVOCATION else changed, name)
        assert getattr(replayed, name) == expected, f"config.yaml does not replay {name}"


def fingerprint(obj):
    """What an object configures, comparable between runs: settings, tensors, structure; never ids or addresses."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, enum.Enum | torch.dtype | torch.device | Path):
        return str(obj)
    if isinstance(obj, torch.Tensor):
        data = obj.detach().cpu().contiguous().flatten().view(torch.uint8).numpy()
        return tuple(obj.shape), str(obj.dtype), obj.stride(), obj.requires_grad, hashlib.sha1(data).hexdigest()
    if isinstance(obj, list | tuple):
        return [fingerprint(item) for item in obj]
    if isinstance(obj, dict):
        return {key: fingerprint(value) for key, value in obj.items()}
    if isinstance(obj, torch.optim.Optimizer):  # the groups: what each step uses (defaults only fill them)
        return type(obj).__name__, [
            {**fingerprint({k: v for k, v in group.items() if k != "params"}), "params": fingerprint(group["params"])}
            for group in obj.param_groups
        ]
    if isinstance(obj, torch.optim.lr_scheduler.LRScheduler):
        factors = getattr(obj, "lr_lambdas", [])
        return type(obj).__name__, [[factor(epoch) for epoch in SCHEDULED_EPOCHS] for factor in factors]
    if isinstance(obj, DataLoader):
        return {**settings(obj), "sampler": type(obj.sampler).__name__, "order": first_order(obj)}
    if isinstance(obj, Dataset):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # the same draws for a random training transform in every run
            first = obj[0]
        targets = torch.as_tensor(getattr(obj, "targets", []))
        transform = getattr(obj, "transform", None)
        parts = {"targets": targets, "transform": transform, "first item": first}
        return {"type": type(obj).__name__, "size": len(obj), **fingerprint(parts)}
    if isinstance(obj, nn.Module):
        tensors = fingerprint({**obj._parameters, **obj._buffers})
        return {"type": type(obj).__name__, **settings(obj), "tensors": tensors, "children": fingerprint(obj._modules)}
    if dataclasses.is_dataclass(obj):
        return {field.name: fingerprint(getattr(obj, field.name)) for field in dataclasses.fields(obj)}
    return type(obj).__name__  # anything else: its kind only


def settings(obj) -> dict:
    """An object's public attributes, methods left out."""
    public = {key: value for key, value in vars(obj).items() if not key.startswith("_")}
    return fingerprint({key: value for key, value in public.items() if not inspect.isroutine(value)})


def first_order(loader: DataLoader) -> list[int]:
    """The indices its sampler draws first; the generator is left as it was (train() would draw them next)."""
    state = loader.order.get_state()
    order = list(loader.sampler)
    loader.order.set_state(state)
    return order


class FirstStep(Exception):
    """Raised where train() would take its first training step: everything is built by then."""


def what_train_builds(cfg: TrainConfig) -> dict:
    """The fingerprint of every build_* result of train() and every argument of its first training epoch."""
    built, epoch = {}, inspect.signature(train_module.train_one_epoch)

    def recorded(name, build):
        def wrapper(*args, **kwargs):
            built[name] = build(*args, **kwargs)
            return built[name]

        return wrapper

    def first_step(*args, **kwargs):
        built.update(epoch.bind(*args, **kwargs).arguments)
        raise FirstStep

    with pytest.MonkeyPatch.context() as patch, process_flags_restored():
        for name, build in list(vars(train_module).items()):
            if name.startswith("build_"):
                patch.setattr(train_module, name, recorded(name, build))
        patch.setattr(train_module, "train_one_epoch", first_step)
        with pytest.raises(FirstStep):
            train_module.train(cfg)
        built["process"] = process_flags()
        return fingerprint(built)


def process_flags() -> tuple:
    """Deterministic algorithms, anomaly detection, cudnn's benchmark and determinism."""
    deterministic, cudnn = torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn
    return deterministic, torch.is_anomaly_enabled(), cudnn.benchmark, cudnn.deterministic


@contextlib.contextmanager
def process_flags_restored():
    """train() sets these for the whole process."""
    saved = process_flags()
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0])
        torch.autograd.set_detect_anomaly(saved[1])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = saved[2:]


class Runs:
    """What train() builds from each config, once per module (each run writes into a folder of its own)."""

    def __init__(self, tmp_path_factory):
        self.tmp, self.built, self.resolved = tmp_path_factory, {}, {}

    def build(self, cfg: TrainConfig) -> dict:
        key = repr(dataclasses.replace(cfg, output_dir=None))
        if key not in self.built:
            self.built[key] = what_train_builds(dataclasses.replace(cfg, output_dir=str(self.tmp.mktemp("run"))))
        return self.built[key]

    def resolve(self, cfg: TrainConfig) -> TrainConfig:
        key = repr(dataclasses.replace(cfg, output_dir=None))
        if key not in self.resolved:
            self.resolved[key] = train_module.resolve(cfg)
        return self.resolved[key]

    def same_runs(self, cfg: TrainConfig, name: str, values: list) -> list:
        """The pairs of the field's values that build the same run from `cfg`."""
        built = [self.build(dataclasses.replace(cfg, **{name: value})) for value in values]
        pairs = itertools.combinations(range(len(values)), 2)
        return [(values[i], values[j]) for i, j in pairs if built[i] == built[j]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory)


@pytest.fixture
def resolved(tiny_config, runs) -> TrainConfig:
    """Every auto value filled in, as config.yaml has it: each option then shows its own effect, not that of the
    auto values it feeds (--optimizer picks the default --lr). The tricks are off (tricks.OFF), so that none hides
    another's option (an average that takes over the schedule, its --scheduler); a trick's own options are tried with
    it on too, below, with every other field changed."""
    return runs.resolve(dataclasses.replace(tiny_config, **OFF))


def test_equal_configs_build_equal_runs(resolved, tmp_path):
    """Else every option below would seem to reach something."""
    first, second = (dataclasses.replace(resolved, output_dir=str(tmp_path / name)) for name in "ab")
    assert what_train_builds(first) == what_train_builds(second)


def test_exempt_names_only_fields():
    assert set(EXEMPT) <= set(FIELDS)


@pytest.mark.parametrize("name", VARIED)
def test_each_option_reaches_what_it_configures(name, runs, resolved):
    """Each value of the field builds a run of its own: another model, optimizer, schedule, loader, loss..."""
    values = values_to_build(name, getattr(resolved, name))
    if not runs.same_runs(resolved, name, values):
        return
    # Some options act only next to others (the step schedule's gamma): try them with every other field changed too,
    # the other tricks still off (their own options are tried with them on).
    switched_off = set(OFF) - own_switches(name)
    others = [other for other in VARIED if other != name and other not in {*BUILD_OVERRIDES, *switched_off}]
    changes = {other: values_to_build(other, getattr(resolved, other))[1] for other in others}
    same = runs.same_runs(dataclasses.replace(resolved, **changes), name, values)
    assert not same, f"--{name.replace('_', '-')} {same}: the same run; fix that, or say why in EXEMPT"


def own_switches(name: str) -> set[str]:
    """The fields that switch off the trick that option `name` belongs to (none for an option of no trick)."""
    options = [options for options in OPTIONS if name in {field.name for field in dataclasses.fields(options)}]
    return set(getattr(options[0], "off", {})) if options else set()


def test_the_seed_fixes_every_random_stream(runs, resolved):
    """The seed reaches several objects, so one of them ignoring it would still change the fingerprint above."""
    seeds = values_to_build("seed", resolved.seed)[:2]
    base, reseeded = (runs.build(dataclasses.replace(resolved, seed=seed)) for seed in seeds)
    for stream in (["build_model"], ["build_data", "train", "order"], ["build_data", "val", "dataset", "first item"]):
        one, other = base, reseeded
        for key in stream:
            one, other = one[key], other[key]
        assert one != other, f"{' '.join(stream)} ignores --seed"


def test_the_range_checks_refuse_each_bad_value_with_its_flag_and_accept_the_edges():
    from {{ cookiecutter.package_name }}.core.errors import UserError

    refused = {
        "batch_size": (0, "--batch-size must be at least 1, got 0"),
        "image_size": (1, "--image-size must be between 2 and 4096, got 1"),
        "lr": (-1.0, "--lr must be a finite number, not negative, got -1.0"),
        "weight_decay": (-1.0, "--weight-decay must be a finite number, not negative, got -1.0"),
        "num_workers": (-1, "--num-workers must be a finite number, not negative, got -1"),
        "gamma": (float("inf"), "--gamma must be a finite number, not negative, got inf"),
        "val_split": (0.0, "--val-split must be between 0 and 1 (a share of each class), got 0.0"),
        "random_erasing": (1.5, "--random-erasing must be a probability between 0 and 1, got 1.5"),
        "momentum": (float("nan"), "--momentum must be a number, got nan"),
        "seed": (2**32, "--seed must be between 0 and 2**32 - 1, got 4294967296"),
{% if cookiecutter.use_distributed %}
        "dist_timeout": (10**14, "--dist-timeout must be at most 31536000 s (a year), got 100000000000000"),
{% endif %}
        "warmup_epochs": (
            6,
            "--warmup-epochs 6 is beyond --epochs 5: the learning rate would never reach --lr; lower it, or train for "
            "longer",
        ),
{% if cookiecutter.use_grad_clipping %}
        "clip_grad_norm_type": (
            -1.0,
            "--clip-grad-norm-type must be positive (2 for the L2 norm, inf for the largest value), got -1.0",
        ),
{% endif %}
    }
    for name, (value, message) in refused.items():
        with pytest.raises(UserError) as raised:
            TrainConfig(**{name: value})
        assert str(raised.value) == message
    for value in (1.0, 1.5, -0.5):
        with pytest.raises(UserError, match=f"^--val-split must be between 0 and 1 .*got {value}$"):
            TrainConfig(val_split=value)
    with pytest.raises(UserError, match=r"^--mean must be a number, got \[0.5, nan, 0.5\]$"):
        TrainConfig(mean=[0.5, float("nan"), 0.5], std=[1.0, 1.0, 1.0])
    with pytest.raises(UserError, match="^--mean and --std go together"):
        TrainConfig(mean=[0.5, 0.5, 0.5])
    with pytest.raises(UserError, match=r"^--std must be three positive numbers \(one per channel\), got \[1.0, 0.0"):
        TrainConfig(mean=[0.5, 0.5, 0.5], std=[1.0, 0.0, 1.0])
    edges = dict(lr=0.0, weight_decay=0.0, l1=0.0, momentum=0.0, gamma=0.0, num_workers=0, image_size=2)
    edges |= dict(random_erasing=1.0, val_split=0.999, batch_size=1, epochs=1, mean=[0, 0, 0], std=[1e-9, 1, 1])
    edges |= dict(seed=2**32 - 1, warmup_epochs=1)  # as many as --epochs
{% if cookiecutter.use_grad_clipping %}
    edges |= dict(clip_grad_norm_type=float("inf"))
    assert TrainConfig(clip_grad_norm_type=0.5).clip_grad_norm_type == 0.5
    with pytest.raises(UserError, match="^--clip-grad-norm-type must be positive"):
        TrainConfig(clip_grad_norm_type=0.0)
{% endif %}
    with pytest.raises(UserError, match="^--image-size must be between 2 and 4096, got 4097$"):
        TrainConfig(image_size=4097)
    assert TrainConfig(image_size=4096).image_size == 4096
{% if cookiecutter.use_distributed %}
    edges |= dict(dist_timeout=365 * 24 * 3600)
{% endif %}
    assert TrainConfig(**edges).random_erasing == 1.0 and TrainConfig(random_erasing=0.0).random_erasing == 0.0


def test_a_config_file_value_of_the_wrong_kind_is_refused_naming_key_and_kind(tmp_path):
    from {{ cookiecutter.package_name }}.config import load_config_file
    from {{ cookiecutter.package_name }}.core.errors import UserError

    path = tmp_path / "config.yaml"
    cases = {
        "mean: [0.5, 0.5]": "config key 'mean' must be a list of float, got [0.5, 0.5]; fix the config file",
        "mean: 3": "config key 'mean' must be a list of float, got 3; fix the config file",
        "mean: [a, b, c]": "config key 'mean' must be a list of float, got ['a', 'b', 'c']; fix the config file",
        "optimizer: adam": "config key 'optimizer' must be one of sgd, adamw, got 'adam'; fix the config file",
        "epochs: true": "config key 'epochs' must be int, got True; fix the config file",
        "epochs: 2.0": "config key 'epochs' must be int, got 2.0; fix the config file",
        "epochs: null": "config key 'epochs' must be int, got None; fix the config file",
        "plots: 1": "config key 'plots' must be bool, got 1; fix the config file",
        "model: 3": "config key 'model' must be str, got 3; fix the config file",
    }
    for text, message in cases.items():
        path.write_text(text + "\n")
        with pytest.raises(UserError) as raised:
            load_config_file(str(path))
        assert str(raised.value) == message, text
    path.write_text("mean: [0, 1, 1]\nstd: [1, 2, 3]\nlr: 1\nimage_size: null\n")
    values = load_config_file(str(path))
    assert values == {"mean": [0.0, 1.0, 1.0], "std": [1.0, 2.0, 3.0], "lr": 1.0, "image_size": None}
    assert all(type(v) is float for v in [*values["mean"], *values["std"], values["lr"]])  # ints become floats
    path.write_text("optimizer: adamw\nplots: false\nepochs: 3\n")
    assert load_config_file(str(path)) == {"optimizer": "adamw", "plots": False, "epochs": 3}


def test_a_config_file_must_be_a_mapping_of_known_keys(tmp_path, capsys):
    from {{ cookiecutter.package_name }}.config import load_config_file
    from {{ cookiecutter.package_name }}.core.errors import UserError

    path = tmp_path / "config.yaml"
    path.write_text("- epochs\n- 3\n")
    with pytest.raises(UserError, match=r"^config file .*config.yaml must hold a mapping of keys to values$"):
        load_config_file(str(path))
    path.write_text("epochs: 3\nepoch: 2\nbatchsize: 4\n")
    with pytest.raises(UserError) as raised:
        load_config_file(str(path))
    known = ", ".join(FIELDS)
    assert str(raised.value) == f"config file {path} has unknown keys ['batchsize', 'epoch']; known keys: {known}"
    assert known.startswith("data, data_root, val_split, ")
    path.write_text("")
    assert load_config_file(str(path)) == {}
    path.write_text("overwrite: true\ninit_from: weights.pt\nepochs: 2\n")
    assert load_config_file(str(path)) == {"epochs": 2}
    err = capsys.readouterr().err
    assert f"config file {path}: ignoring init_from, overwrite (they apply to one command: pass them as flags)" in err
    path.write_text("overwrite: false\nepochs: 2\n")  # switched off: nothing to ignore, nothing printed
    assert load_config_file(str(path)) == {"epochs": 2} and capsys.readouterr().err == ""
    path.write_bytes(b"model: caf\xe9\n")
    with pytest.raises(UserError, match=r"^config file .* is not UTF-8 text; save it as UTF-8$"):
        load_config_file(str(path))
    path.write_text("epochs: [\n")
    with pytest.raises(UserError, match=r"^config file .* is not valid YAML \(.+\); fix its syntax$"):
        load_config_file(str(path))
    with pytest.raises(UserError, match=r"^cannot read config file .*missing.yaml: No such file or directory; check"):
        load_config_file(str(tmp_path / "missing.yaml"))


def test_relative_paths_in_a_config_file_are_relative_to_its_folder(tmp_path, monkeypatch):
    from {{ cookiecutter.package_name }}.config import load_config_file

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "configs"
    (folder / "images").mkdir(parents=True)
    (folder / "split.csv").write_text("path,label,split\n")
    path = folder / "config.yaml"
    path.write_text("data: images\nsplit: split.csv\ndata_root: nowhere\noutput_dir: runs/a\n")
    values = load_config_file(str(path))
    assert values["data"] == str(folder / "images") and values["split"] == str(folder / "split.csv")
    assert values["output_dir"] == str(folder / "runs" / "a")  # always: a run's own folder
    assert values["data_root"] == "nowhere"  # not there: left as given (a dataset's name or a path from here)
    path.write_text(f"data: {tmp_path}\noutput_dir: ''\n")
    assert load_config_file(str(path)) == {"data": str(tmp_path), "output_dir": ""}


def test_config_yaml_keeps_the_fields_in_their_declared_order(tmp_path):
    path = tmp_path / "config.yaml"
    save_config(TrainConfig(epochs=3, output_dir=str(tmp_path)), path)
    keys = [line.split(":")[0] for line in path.read_text().splitlines() if line and not line.startswith((" ", "-"))]
    assert keys == [name for name in FIELDS if name not in PER_INVOCATION]
    assert "epochs: 3\n" in path.read_text() and "output_dir: .\n" in path.read_text()


def test_a_nan_or_infinite_value_is_refused_under_its_flag_name():
    from {{ cookiecutter.package_name }}.core.errors import UserError

    with pytest.raises(UserError) as raised:
        TrainConfig(weight_decay=float("nan"))
    assert str(raised.value) == "--weight-decay must be a number, got nan"
    with pytest.raises(UserError) as raised:
        TrainConfig(mean=[0.5, 0.5, 0.5], std=[1.0, float("inf"), 1.0])
    assert str(raised.value) == "--std must be three positive numbers (one per channel), got [1.0, inf, 1.0]"


@pytest.mark.parametrize("name", [name for name in FIELDS if kind(name) is float])
def test_nan_is_refused_for_every_number_under_its_flag_name(name):
    """NaN passes every range check (`nan < 0` is False): a NaN strength once switched its trick off silently."""
    from {{ cookiecutter.package_name }}.core.errors import UserError

    with pytest.raises(UserError) as raised:
        TrainConfig(**{name: float("nan")})
    assert str(raised.value) == f"--{name.replace('_', '-')} must be a number, got nan"


def test_a_config_files_data_root_is_relative_to_its_folder_where_it_exists_there(tmp_path, monkeypatch):
    from {{ cookiecutter.package_name }}.config import load_config_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs" / "downloads").mkdir(parents=True)
    path = tmp_path / "configs" / "config.yaml"
    path.write_text("data_root: downloads\n")
    assert load_config_file(str(path)) == {"data_root": str(tmp_path / "configs" / "downloads")}
