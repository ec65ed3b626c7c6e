"""The datasets: embedded synthetic images, torchvision's downloadable sets, an ImageFolder tree split into train/
and val/, or one folder of class folders or a CSV (held out by layouts.py)."""

{% if cookiecutter.task != "multi_label" %}
import functools
import math
{% endif %}
from pathlib import Path
from urllib.error import URLError

import torch
from torch.utils.data import Dataset
from torchvision import datasets
{% if cookiecutter.task != "multi_label" %}
from torchvision.transforms import v2
{% endif %}

{% if cookiecutter.use_distributed %}
from ..core.distributed import local_main_first
{% endif %}
from ..core.errors import DataError
from .decoding import load_image
{% if cookiecutter.task == "multi_label" %}
from .layouts import SPLITS, Row, read_class_folders
from .multi_label import SEPARATOR, MultiLabelFiles, SyntheticTags, classes_of, hold_out, read_csv
{% else %}
from .layouts import SPLITS, LabelledFiles, Row, hold_out, read_class_folders, read_csv
{% endif %}

DOWNLOADABLE = {"cifar10": datasets.CIFAR10, "mnist": datasets.MNIST, "fashion_mnist": datasets.FashionMNIST}
NAMED_DATA = {"synthetic", *DOWNLOADABLE}  # --data values that name a dataset, not a path
NATIVE_SIZE = {"synthetic": 32, "cifar10": 32, "mnist": 28, "fashion_mnist": 28}
GRAYSCALE = {"mnist", "fashion_mnist"}
NO_FLIP = {"mnist"}  # a mirrored digit is another symbol: --hflip defaults to off for these
FOLDER_IMAGE_SIZE = 224
SYNTHETIC_TRAIN, SYNTHETIC_VAL = 2048, 512
{% if cookiecutter.task != "multi_label" %}
SYNTHETIC_HUES = {
    "red": (1, 0.2, 0.2),
    "green": (0.2, 1, 0.2),
    "blue": (0.2, 0.2, 1),
    "yellow": (1, 1, 0.2),
    "magenta": (1, 0.2, 1),
}
SYNTHETIC_WIDTHS = {"wide": 2.0, "narrow": 3.0}  # stripes per image


class SyntheticImages(Dataset):
    """Coloured stripes whose hue and width depend on the class; deterministic from the seed.

    Orientation, phase, brightness and noise vary per image, so a model has to learn hue and stripe
    width rather than memorise pixels. Stored as uint8 so it goes through the same transforms as photos.
    """

    classes = [f"{hue}_{width}" for width in SYNTHETIC_WIDTHS for hue in SYNTHETIC_HUES]

    def __init__(self, num_samples: int, seed: int, size: int = NATIVE_SIZE["synthetic"], transform=None):
        self.images, self.targets = _stripes(num_samples, seed, size)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        image = v2.functional.to_image(self.images[index])
        return self.transform(image) if self.transform else image, int(self.targets[index])


@functools.lru_cache(maxsize=4)  # the same images serve statistics, training and every later run in a process
def _stripes(num_samples: int, seed: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(len(SyntheticImages.classes), (num_samples,), generator=g)
    hue = torch.tensor(list(SYNTHETIC_HUES.values()))[targets % len(SYNTHETIC_HUES)]
    cycles = torch.tensor(list(SYNTHETIC_WIDTHS.values()))[targets // len(SYNTHETIC_HUES)]
    angle = torch.rand(num_samples, generator=g) * math.pi
    phase = torch.rand(num_samples, generator=g) * 2 * math.pi
    brightness = 0.6 + 0.4 * torch.rand(num_samples, generator=g)
    grid = torch.linspace(0, 1, size)
    y, x = torch.meshgrid(grid, grid, indexing="ij")
    along = x * angle.cos()[:, None, None] + y * angle.sin()[:, None, None]
    stripes = 0.5 + 0.5 * torch.sin(2 * math.pi * cycles[:, None, None] * along + phase[:, None, None])
    images = (hue * brightness[:, None])[:, :, None, None] * stripes[:, None]
    images = images + 0.35 * torch.randn(images.shape, generator=g)
    return (images.clamp(0, 1) * 255).round().to(torch.uint8), targets
{% endif %}


def default_image_size(source: str) -> int:
    return NATIVE_SIZE.get(source, FOLDER_IMAGE_SIZE)


def _image_folder(root: Path, split: str) -> datasets.ImageFolder:
    try:
        return datasets.ImageFolder(root / split, loader=load_image)
    except FileNotFoundError as exc:
        raise DataError(f"{root / split}: {exc}; put images in {root / split}/<class>/") from None


def _open_fixed(source: str, root: str, split: str, seed: int):
    """A dataset whose split the source fixes: synthetic, torchvision's, or a tree with train/ and val/."""
    if source == "synthetic":
        count = SYNTHETIC_TRAIN if split == "train" else SYNTHETIC_VAL
        return {{ "SyntheticTags" if cookiecutter.task == "multi_label" else "SyntheticImages" }}(count, seed=seed + SPLITS.index(split))
    if source in DOWNLOADABLE:
        try:
{% if cookiecutter.use_distributed %}
            with local_main_first():  # one download per machine, not every rank racing to write the same files
                dataset = DOWNLOADABLE[source](root, train=split == "train", download=True)
{% else %}
            dataset = DOWNLOADABLE[source](root, train=split == "train", download=True)
{% endif %}
        except (URLError, OSError, RuntimeError) as exc:
            raise DataError(
                f"could not download {source} into {root} ({exc}); connect to the internet once "
                "or copy the files there, then run again"
            ) from None
    else:
        dataset = _image_folder(Path(source), split)
{% if cookiecutter.task == "multi_label" %}
    return OneLabelEach(dataset)


class OneLabelEach(Dataset):
    """A dataset of one class per image (a class folder's, or a downloaded set's) as multi-label data: each image's
    targets hold a 1 for its class and a 0 for every other."""

    def __init__(self, dataset):
        self.dataset, self.classes = dataset, dataset.classes
        self.targets = torch.nn.functional.one_hot(torch.as_tensor(dataset.targets), len(self.classes)).float()

    @property
    def transform(self):
        return self.dataset.transform

    @transform.setter
    def transform(self, transform) -> None:
        self.dataset.transform = transform

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        return self.dataset[index][0], self.targets[index].clone()  # a copy: not a view that pins every target
{% else %}
    return dataset
{% endif %}


def labelled_rows(cfg, training: bool) -> tuple[Path, list[Row]]:
    """A class-folder tree's or a CSV's images with their splits: from --split, from the CSV's split column, or a
    stratified hold-out of --val-split for training. Data evaluated without a split is all validation."""
    source = Path(cfg.data)
    root = source.parent if source.is_file() else source
    if cfg.split:
        return root, read_csv(Path(cfg.split), root, need_split=True)
    rows = read_csv(source, root) if source.is_file() else read_class_folders(source)
{% if cookiecutter.task == "multi_label" %}
    named = None if source.is_file() else next((label for _, label, _ in rows if SEPARATOR in label), None)
    if named is not None:  # a class folder's name is one label
        raise DataError(f"--data {source}: class folder {named!r} holds {SEPARATOR}, which separates labels; rename it")
{% endif %}
    if rows[0][2] is not None:
        return root, rows
    if training:
        return root, hold_out(rows, cfg.val_split, cfg.seed)
    return root, [(path, label, "val") for path, label, _ in rows]


def open_datasets(cfg, splits: tuple[str, ...], training: bool) -> tuple[dict[str, Dataset], list[Row] | None]:
    """The datasets of `splits` (no transform yet), and the rows of each split where this run decided or read them."""
    source = Path(cfg.data)
    split_tree = (source / "train").is_dir() or (source / "val").is_dir()
    fixed = cfg.data in NAMED_DATA or split_tree
    if fixed and cfg.split:
        raise DataError(f"--data {cfg.data} is split into train and val already; --split is for other data: drop it")
    if fixed:
        return {split: _open_fixed(cfg.data, cfg.data_root, split, cfg.seed) for split in splits}, None
    if not (source.is_dir() or source.is_file()):  # a device such as /dev/null is neither
        known = ", ".join(["synthetic", *DOWNLOADABLE])
        raise DataError(f"--data {cfg.data}: no such folder or CSV file, and not one of {known}")
    root, rows = labelled_rows(cfg, training)
{% if cookiecutter.task == "multi_label" %}
    classes = classes_of(rows)
    if not classes:
        raise DataError(f"--data {cfg.data} gives no image a label; name at least one class of some image")
{% else %}
    classes = sorted({label for _, label, _ in rows})
{% endif %}
    opened = {}
    for split in splits:
        chosen = [row for row in rows if row[2] == split]
        if not chosen:
            raise DataError(f"--data {cfg.data} leaves no {split} images; give each class two images or more")
        opened[split] = {{ "MultiLabelFiles" if cookiecutter.task == "multi_label" else "LabelledFiles" }}(root, chosen, classes, load_image)
    return opened, rows
