"""Datasets, transforms and loaders: embedded synthetic data, an ImageFolder tree, or torchvision's sets."""

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from urllib.error import URLError

import torch
from PIL import Image, UnidentifiedImageError
from torch.utils.data import DataLoader, Dataset
{% if cookiecutter.use_distributed %}
from torch.utils.data.distributed import DistributedSampler
{% endif %}
from torchvision import datasets
from torchvision.transforms import v2

{% if cookiecutter.use_distributed %}
from .distributed import ShardSampler, is_distributed, local_main_first, world_size
{% endif %}
from .errors import DataError
from .runtime import seed_worker

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
DOWNLOADABLE = {"cifar10": datasets.CIFAR10, "mnist": datasets.MNIST, "fashion_mnist": datasets.FashionMNIST}
NATIVE_SIZE = {"synthetic": 32, "cifar10": 32, "mnist": 28, "fashion_mnist": 28}
GRAYSCALE = {"mnist", "fashion_mnist"}
NO_FLIP = {"mnist"}  # a mirrored digit is another symbol
FOLDER_IMAGE_SIZE = 224
STATS_SAMPLES = 512
SYNTHETIC_TRAIN, SYNTHETIC_VAL = 2048, 512
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


def build_transform(source: str, image_size: int, mean, std, train: bool) -> v2.Compose:
    """PIL/uint8 operations first, then float conversion, then normalisation (T07); augment train only (T12)."""
    steps = [v2.ToImage()]
    if source in GRAYSCALE:
        steps.append(v2.Grayscale(num_output_channels=3))
    photos = source not in NATIVE_SIZE  # any size, any framing
    if train and photos:
        steps.append(v2.RandomResizedCrop(image_size, scale=(0.35, 1.0)))
    elif train:
        steps += [v2.Resize(image_size), v2.RandomCrop(image_size, padding=image_size // 8)]
    else:  # a no-op on images that already have the size
        steps += [v2.Resize(round(image_size * 8 / 7) if photos else image_size), v2.CenterCrop(image_size)]
    if train and source not in NO_FLIP:
        steps.append(v2.RandomHorizontalFlip())
    steps.append(v2.ToDtype(torch.float32, scale=True))
    if mean is not None:
        steps.append(v2.Normalize(mean, std))
    return v2.Compose(steps)


def compute_mean_std(dataset, samples: int = STATS_SAMPLES, seed: int = 0) -> tuple[list, list]:
    """Per-channel mean and std of (a random subset of) a dataset whose transform yields [0, 1] tensors (T08)."""
    picked = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))[:samples]
    images = torch.stack([dataset[int(i)][0] for i in picked])
    mean, std = images.mean(dim=(0, 2, 3)), images.std(dim=(0, 2, 3))
    return [round(v, 4) for v in mean.tolist()], [max(round(v, 4), 1e-3) for v in std.tolist()]  # never divide by 0


def load_rgb(path: str) -> Image.Image:
    """ImageFolder's loader, with a message that names the file a corrupt or non-image file is."""
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise DataError(f"cannot read image {path} ({exc.__class__.__name__}); delete or replace the file") from None


def _image_folder(root: Path, split: str) -> datasets.ImageFolder:
    try:
        return datasets.ImageFolder(root / split, loader=load_rgb)
    except FileNotFoundError as exc:
        raise DataError(f"{root / split}: {exc}; put images in {root / split}/<class>/") from None


def _open_dataset(source: str, root: str, train: bool, seed: int):
    if source == "synthetic":
        return SyntheticImages(SYNTHETIC_TRAIN if train else SYNTHETIC_VAL, seed=seed + (0 if train else 1))
    if source in DOWNLOADABLE:
        try:
{% if cookiecutter.use_distributed %}
            with local_main_first():  # one download per machine, not every rank racing to write the same files
                return DOWNLOADABLE[source](root, train=train, download=True)
{% else %}
            return DOWNLOADABLE[source](root, train=train, download=True)
{% endif %}
        except (URLError, OSError, RuntimeError) as exc:
            raise DataError(
                f"could not download {source} into {root} ({exc}); connect to the internet once "
                "or copy the files there, then run again"
            ) from None
    folder = Path(source)
    if not folder.is_dir():
        raise DataError(f"--data {source}: no such folder and not one of synthetic, {', '.join(DOWNLOADABLE)}")
    if not ((folder / "train").is_dir() and (folder / "val").is_dir()):
        raise DataError(f"--data {source} must contain train/ and val/ folders, each with one folder per class")
    return _image_folder(folder, "train" if train else "val")


@dataclass
class Data:
    train: DataLoader | None
    val: DataLoader
    classes: list[str]


def default_image_size(source: str) -> int:
    return NATIVE_SIZE.get(source, FOLDER_IMAGE_SIZE)


def resolve_normalisation(cfg) -> tuple[list, list]:
    """ImageNet statistics for pretrained weights, the training data's own otherwise (T08)."""
    if cfg.mean is not None and cfg.std is not None:
        return cfg.mean, cfg.std
    if cfg.pretrained:
        return IMAGENET_MEAN, IMAGENET_STD
    dataset = _open_dataset(cfg.data, cfg.data_root, train=True, seed=cfg.seed)
    dataset.transform = build_transform(cfg.data, cfg.image_size, None, None, train=False)
    return compute_mean_std(dataset, seed=cfg.seed)


def build_data(cfg, device: torch.device, train: bool = True) -> Data:
    """Loaders for a resolved config (image_size, mean, std and num_workers set)."""
    splits = {}
    for split in ("train", "val") if train else ("val",):
        dataset = _open_dataset(cfg.data, cfg.data_root, train=split == "train", seed=cfg.seed)
        dataset.transform = build_transform(cfg.data, cfg.image_size, cfg.mean, cfg.std, train=split == "train")
        splits[split] = dataset
    classes = list(splits["val"].classes)
    if train and list(splits["train"].classes) != classes:
        raise DataError(f"{cfg.data}: train/ and val/ hold different class folders; make them match")
{% if cookiecutter.use_distributed %}
    # --batch-size is global: each of the world's processes loads its share.
    samplers = {}
    if is_distributed():
        samplers["val"] = ShardSampler(splits["val"])
        if train:
            samplers["train"] = DistributedSampler(splits["train"], seed=cfg.seed)
{% endif %}
    loaders = {
        split: DataLoader(
            dataset,
{% if cookiecutter.use_distributed %}
            batch_size=cfg.batch_size // world_size(),
            shuffle=split == "train" and split not in samplers,
            sampler=samplers.get(split),
{% else %}
            batch_size=cfg.batch_size,
            shuffle=split == "train",
{% endif %}
            num_workers=cfg.num_workers,
            pin_memory=device.type == "cuda",  # T13
            # Workers restart each epoch from seeds drawn from `generator`, so the data order and augmentations
            # of any epoch can be reproduced; persistent workers would carry their RNG streams across epochs.
            persistent_workers=False,
            worker_init_fn=seed_worker,
            generator=torch.Generator().manual_seed(cfg.seed),
        )
        for split, dataset in splits.items()
    }
    return Data(loaders.get("train"), loaders["val"], classes)
