import dataclasses
import hashlib
{% if cookiecutter.tracker in ("mlflow", "wandb") %}
import os
{% endif %}
from pathlib import Path

import pytest
import torch
from PIL import Image
from torch import nn

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.files import LOCK_FILE
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.engine import Runtime
from {{ cookiecutter.package_name }}.tricks import OFF

# Every optional trick of this render switched off, for tests that compare a run with a plain one worked out by hand:
# `replace(cfg, **NEUTRAL)`, or `**(NEUTRAL | {...})` to keep one on. The modules of tricks/ give their own (OFF).
NEUTRAL = {
    **OFF,
{% if cookiecutter.use_amp %}
    "precision": "fp32",
{% endif %}
}


{% if cookiecutter.task == "multi_label" %}
SYNTHETIC_CLASSES = 5  # the synthetic data's classes (data/multi_label.py)
CRITERION = nn.BCEWithLogitsLoss  # the plain training loss of this task


def random_targets(count: int, classes: int) -> torch.Tensor:
    """Targets of `count` images as the loader gives them: multi-hot rows, any number of labels each."""
    return torch.randint(0, 2, (count, classes)).float()
{% else %}
SYNTHETIC_CLASSES = 10  # the synthetic data's classes (data/sources.py)
CRITERION = nn.CrossEntropyLoss  # the plain training loss of this task


def random_targets(count: int, classes: int) -> torch.Tensor:
    """Targets of `count` images as the loader gives them: class indices."""
    return torch.randint(0, classes, (count,))
{% endif %}


def evaluated_images(figures: dict) -> int:
    """How many images an evaluation's figures come from."""
{% if cookiecutter.task == "multi_label" %}
    return len(figures["targets"])
{% else %}
    return int(figures["confusion"].sum())
{% endif %}


def plain_runtime(device: torch.device = torch.device("cpu")) -> Runtime:
    """The loop's runtime for plain steps{{ " (fp32, nothing scaled)" if cookiecutter.use_amp }}{{ ", within the process group where there is one" if cookiecutter.use_distributed }}."""
    return Runtime(device, TrainConfig(**NEUTRAL))


def listing(folder: Path) -> list[str]:
    """The names in `folder`, sorted, less its lock file: filelock keeps that where the system locks files (the next
    command shares it) and removes it where it falls back to the file's presence."""
    return sorted(path.name for path in Path(folder).iterdir() if path.name != LOCK_FILE)


@pytest.fixture
def fingerprint():
    """What a file holds, or each file under a folder, as SHA-256 digests: compared as bytes, two checkpoints that
    differ cost pytest minutes of diffing where it does not truncate (with $CI set, as on CI services)."""

    def of(path: Path) -> str | dict[str, str]:
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
        return {str(file.relative_to(path)): of(file) for file in sorted(path.rglob("*")) if file.is_file()}

    return of


@pytest.fixture
def tiny_config(tmp_path) -> TrainConfig:
    """Two steps of synthetic data on the CPU: enough to exercise the whole run in about a second."""
    return TrainConfig(
        data="synthetic",
        epochs=1,
        batch_size=16,
        max_steps_per_epoch=2,
        device="cpu",
        output_dir=str(tmp_path / "run"),
        plots=False,  # drawing costs half a second; test_reports.py turns it on
    )


@pytest.fixture
def image_folder(tmp_path):
    """A train/val ImageFolder tree of small PNGs, two classes that differ in colour."""
    root = tmp_path / "images"
    generator = torch.Generator().manual_seed(0)
    for split, count in (("train", 6), ("val", 3)):
        for label, colour in (("cats", (200, 40, 40)), ("dogs", (40, 40, 200))):
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(count):
                noise = torch.randint(-30, 30, (36, 40 + i, 3), generator=generator)
                pixels = (torch.tensor(colour) + noise).clamp(0, 255).to(torch.uint8).numpy()
                Image.fromarray(pixels).save(folder / f"{i}.png")
    return root


@pytest.fixture(autouse=True)
def _single_thread():
    torch.set_num_threads(1)
{% if cookiecutter.tracker == "mlflow" %}


@pytest.fixture(scope="session", autouse=True)
def _mlflow_store(tmp_path_factory):
    """Runs of the tests log to a store of this session, not to mlruns/ of the project (test_tracking.py's to
    their own)."""
    os.environ["MLFLOW_TRACKING_URI"] = str(tmp_path_factory.mktemp("mlruns"))
{% elif cookiecutter.tracker == "wandb" %}


@pytest.fixture(scope="session", autouse=True)
def _wandb_offline():
    os.environ["WANDB_MODE"] = "offline"  # whatever this machine's settings: no network, no account
{% endif %}


class RecordedLoader:
    """A training loader that keeps every batch it hands out; anything else is the loader's own."""

    def __init__(self, loader, batches: list):
        self.loader, self.batches = loader, batches

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        for batch in self.loader:
            self.batches.append(batch)
            yield batch

    def __getattr__(self, name):
        return getattr(self.loader, name)


@dataclasses.dataclass
class TrainingWatch:
    """What a training run really did: the batches its loader gave, and the input and logits of every
    training forward of its model. Tests compare these with what each trick must make of them."""

    batches: list = dataclasses.field(default_factory=list)
    inputs: list = dataclasses.field(default_factory=list)
    logits: list = dataclasses.field(default_factory=list)


@pytest.fixture
def watch(monkeypatch) -> TrainingWatch:
    record = TrainingWatch()
    build_model, build_data = train_module.build_model, train_module.build_data

    def watched_model(*args):
        model = build_model(*args)

        def keep(module, args, logits):
            # not the model summary's pass nor validation, nor a copy of the model that carries the hook along (a
            # trick's average of the weights)
            if module.training and module is model:
                record.inputs.append(args[0].detach().clone())
                record.logits.append(logits.detach().clone())

        model.register_forward_hook(keep)
        return model

    def watched_data(*args, **kwargs):
        data = build_data(*args, **kwargs)
        return dataclasses.replace(data, train=RecordedLoader(data.train, record.batches))

    monkeypatch.setattr(train_module, "build_model", watched_model)
    monkeypatch.setattr(train_module, "build_data", watched_data)
    return record
