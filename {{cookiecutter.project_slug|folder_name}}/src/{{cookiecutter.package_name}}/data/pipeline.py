"""Datasets, transforms and loaders: embedded synthetic data, torchvision's sets, an ImageFolder tree split into
train/ and val/, or one folder of class folders or a CSV (held out by layouts.py); class weights and sampling."""

import contextlib
import functools
{% if cookiecutter.use_checkpointing %}
import itertools
{% endif %}
import math
import multiprocessing.util
import os
import stat
import sys
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from urllib.error import URLError

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torch.utils.data import DataLoader, Dataset, RandomSampler, Sampler, get_worker_info
{% if cookiecutter.use_distributed %}
from torch.utils.data.distributed import DistributedSampler
{% endif %}
from torchvision import datasets
from torchvision.transforms import v2

{% if cookiecutter.use_distributed %}
from ..core.distributed import ShardSampler, is_distributed, local_main_first, rank, world_size
{% endif %}
from ..core.errors import DataError
from ..core.runtime import seed_worker
from ..reports.metrics import write_csv
from .layouts import (
    SPLITS,
    LabelledFiles,
    Row,
    check_class_names,
    hold_out,
    read_class_folders,
    read_csv,
    write_split,
)

try:  # JPEGs straight to tensors: deprecated since torchvision 0.29 (for TorchCodec); without it, Pillow decodes
    from torchvision.io import ImageReadMode, decode_jpeg

    warnings.filterwarnings("ignore", "The image decoding and encoding capabilities of TorchVision", DeprecationWarning)
except ImportError:
    decode_jpeg = None

DOWNLOADABLE = {"cifar10": datasets.CIFAR10, "mnist": datasets.MNIST, "fashion_mnist": datasets.FashionMNIST}
NAMED_DATA = {"synthetic", *DOWNLOADABLE}  # --data values that name a dataset, not a path
NATIVE_SIZE = {"synthetic": 32, "cifar10": 32, "mnist": 28, "fashion_mnist": 28}
GRAYSCALE = {"mnist", "fashion_mnist"}
NO_FLIP = {"mnist"}  # a mirrored digit is another symbol: --hflip defaults to off for these
FOLDER_IMAGE_SIZE = 224
UNREADABLE = (OSError, UnidentifiedImageError, ValueError, SyntaxError, EOFError)  # what corrupt image files raise
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


@dataclass
class Augmentation:
    """What training does to its images. Validation and prediction never augment."""

    policy: str = "basic"  # none; basic: random crops; trivialaugment, randaugment, autoaugment: crops and the policy
    hflip: bool = True
    random_erasing: float = 0.0  # chance per image


def _policy(name: str, source: str) -> v2.Transform:
    if name == "trivialaugment":
        return v2.TrivialAugmentWide()
    if name == "randaugment":
        return v2.RandAugment()
    return v2.AutoAugment(v2.AutoAugmentPolicy.CIFAR10 if source == "cifar10" else v2.AutoAugmentPolicy.IMAGENET)


def eval_resize(source: str, image_size: int) -> int:
    """The shorter side that validation and prediction resize to before their centre crop of `image_size`: photos
    keep a margin, as torchvision's references do (256 for 224)."""
    return image_size if source in NATIVE_SIZE else round(image_size * 8 / 7)


def build_transform(
    source: str, image_size: int, mean, std, augment: Augmentation | None = None, floats: bool = True
) -> v2.Compose:
    """uint8 operations first, then float conversion, then normalisation; `augment` for training only. `floats=False`
    stops at uint8: a DeviceLoader converts and normalises whole batches on the device."""
    steps = [v2.ToImage()]
    if source in GRAYSCALE:
        steps.append(v2.Grayscale(num_output_channels=3))
    photos = source not in NATIVE_SIZE  # any size, any framing
    crops = augment is not None and augment.policy != "none"
    if crops and photos:
        steps.append(v2.RandomResizedCrop(image_size, scale=(0.35, 1.0)))
    elif crops:
        steps += [v2.Resize(image_size), v2.RandomCrop(image_size, padding=image_size // 8)]
    else:  # a no-op on images that already have the size
        steps += [v2.Resize(eval_resize(source, image_size)), v2.CenterCrop(image_size)]
    if augment and augment.hflip:
        steps.append(v2.RandomHorizontalFlip())
    if crops and augment.policy != "basic":
        steps.append(_policy(augment.policy, source))
    if floats:
        steps.append(v2.ToDtype(torch.float32, scale=True))
    if floats and mean is not None:
        steps.append(v2.Normalize(mean, std))
    if augment and augment.random_erasing:
        mean_colour = 0 if floats else [round(255 * channel) for channel in mean]  # 0 once normalised
        steps.append(v2.RandomErasing(p=augment.random_erasing, value=mean_colour))
    return v2.Compose(steps)


def compute_mean_std(dataset, samples: int = STATS_SAMPLES, seed: int = 0) -> tuple[list, list]:
    """Per-channel mean and std of (a random subset of) a dataset whose transform yields [0, 1] tensors."""
    picked = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))[:samples]
    images = torch.stack([dataset[int(i)][0] for i in picked])
    mean, std = images.mean(dim=(0, 2, 3)), images.std(dim=(0, 2, 3))
    return [round(v, 4) for v in mean.tolist()], [max(round(v, 4), 1e-3) for v in std.tolist()]  # never divide by 0


def load_image(path: str):
    """A training or validation image: an RGB or gray JPEG decoded by torchvision straight into a uint8 tensor (no
    Pillow image to copy and convert), anything else through Pillow."""
    with contextlib.suppress(OSError):  # a missing file: Pillow says so below
        if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe would block the read, a device never end it
            raise DataError(f"image {path} is not a regular file; delete it or replace it with an image")
    try:
        with open(path, "rb") as file:
            encoded = file.read()
    except OSError:
        encoded = b""  # Pillow says below what is wrong with the file
    frame = decode_jpeg and encoded[:3] == b"\xff\xd8\xff" and _jpeg_frame(encoded)
    # gray or colour (not CMYK), and within Pillow's guard against images made to exhaust memory when decoded
    if frame and frame[2] in (1, 3) and frame[0] * frame[1] <= Image.MAX_IMAGE_PIXELS:
        try:
            return decode_jpeg(torch.frombuffer(bytearray(encoded), dtype=torch.uint8), mode=ImageReadMode.RGB)
        except RuntimeError:  # damaged after its header: Pillow names the file
            pass
    return load_rgb(path)


def _jpeg_frame(encoded: bytes) -> tuple[int, int, int] | None:
    """Height, width and channels from a JPEG's frame header (read here: Pillow's parser costs a tenth of the
    decoding), or None where the markers before it are broken."""
    position = 2
    while position + 10 <= len(encoded) and encoded[position] == 0xFF:
        marker = encoded[position + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame, not a table
            height, width = (int.from_bytes(encoded[at : at + 2], "big") for at in (position + 5, position + 7))
            return height, width, encoded[position + 9]
        position += 2 + int.from_bytes(encoded[position + 2 : position + 4], "big")
    return None


def load_rgb(path: str) -> Image.Image:
    """ImageFolder's loader, with a message that names the file a corrupt or non-image file is."""
    try:
        with Image.open(path) as image:
            if image.mode.startswith("I"):  # 16-bit (or 32-bit) gray: convert() would clip every value above 255
                deep = np.asarray(image)
                image = Image.fromarray((deep >> 8 if deep.max() > 255 else deep).astype(np.uint8))
            return image.convert("RGB")
    except Image.DecompressionBombError:  # PIL's guard against images made to exhaust memory when decoded
        raise DataError(f"image {path} has more pixels than Pillow opens safely; shrink or remove it") from None
    except UNREADABLE as exc:
        raise DataError(f"cannot read image {path} ({exc.__class__.__name__}); delete or replace the file") from None


def _image_folder(root: Path, split: str) -> datasets.ImageFolder:
    try:
        return datasets.ImageFolder(root / split, loader=load_image)
    except FileNotFoundError as exc:
        raise DataError(f"{root / split}: {exc}; put images in {root / split}/<class>/") from None


def _open_fixed(source: str, root: str, split: str, seed: int):
    """A dataset whose split the source fixes: synthetic, torchvision's, or a tree with train/ and val/."""
    if source == "synthetic":
        return SyntheticImages(SYNTHETIC_TRAIN if split == "train" else SYNTHETIC_VAL, seed=seed + SPLITS.index(split))
    if source in DOWNLOADABLE:
        try:
{% if cookiecutter.use_distributed %}
            with local_main_first():  # one download per machine, not every rank racing to write the same files
                return DOWNLOADABLE[source](root, train=split == "train", download=True)
{% else %}
            return DOWNLOADABLE[source](root, train=split == "train", download=True)
{% endif %}
        except (URLError, OSError, RuntimeError) as exc:
            raise DataError(
                f"could not download {source} into {root} ({exc}); connect to the internet once "
                "or copy the files there, then run again"
            ) from None
    return _image_folder(Path(source), split)


def labelled_rows(cfg, training: bool) -> tuple[Path, list[Row]]:
    """A class-folder tree's or a CSV's images with their splits: from --split, from the CSV's split column, or a
    stratified hold-out of --val-split for training. Data evaluated without a split is all validation."""
    source = Path(cfg.data)
    root = source.parent if source.is_file() else source
    if cfg.split:
        return root, read_csv(Path(cfg.split), root, need_split=True)
    rows = read_csv(source, root) if source.is_file() else read_class_folders(source)
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
    classes = sorted({label for _, label, _ in rows})
    opened = {}
    for split in splits:
        chosen = [row for row in rows if row[2] == split]
        if not chosen:
            raise DataError(f"--data {cfg.data} leaves no {split} images; give each class two images or more")
        opened[split] = LabelledFiles(root, chosen, classes, load_image)
    return opened, rows


@dataclass
class Data:
    train: DataLoader | None
    val: DataLoader
    classes: list[str]
    rows: list[Row] | None = None  # each image's split, where this run decided or read it: saved as split.csv
    class_weights: torch.Tensor | None = None  # of the training loss (--class-weights auto)


def default_image_size(source: str) -> int:
    return NATIVE_SIZE.get(source, FOLDER_IMAGE_SIZE)


def resolve_normalisation(cfg) -> tuple[list, list]:
    """The given statistics (for pretrained weights: theirs), the training data's own otherwise."""
    if cfg.mean is not None and cfg.std is not None:
        return cfg.mean, cfg.std
    dataset = open_datasets(cfg, ("train",), training=True)[0]["train"]
    dataset.transform = build_transform(cfg.data, cfg.image_size, None, None)
    return compute_mean_std(dataset, seed=cfg.seed)


def inverse_frequency(targets, num_classes: int) -> torch.Tensor:
    """--class-weights auto: 1 / each class's number of training images, scaled so that the classes that have
    images average 1 (a class without any gets 0: it never appears in a training loss)."""
    counts = torch.bincount(torch.as_tensor(targets), minlength=num_classes).double()
    weights = torch.where(counts > 0, 1 / counts.clamp_min(1), 0)
    return (weights * (counts > 0).sum() / weights.sum()).float()


class BalancedSampler(Sampler[int]):
    """--sampler balanced: every class drawn equally often, with replacement, as many draws per epoch as there are
    images. The draws come from the loader's generator: the seed fixes them, as it fixes the shuffled order.
{% if cookiecutter.use_distributed %}
    Under DDP every rank makes the same global draw (the ranks' generators move in step) and takes every
    world-th index of it: ranks never repeat each other's share.
{% endif %}
    """

    def __init__(self, targets, generator: torch.Generator):
        targets = torch.as_tensor(targets)
        self.weights = 1 / torch.bincount(targets)[targets].double()
        self.generator = generator
{% if cookiecutter.use_distributed %}
        self.rank, self.world = rank(), world_size()
        self.count = math.ceil(len(targets) / self.world)
{% else %}
        self.count = len(targets)
{% endif %}

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
{% if cookiecutter.use_distributed %}
        draw = torch.multinomial(self.weights, self.count * self.world, replacement=True, generator=self.generator)
        return iter(draw[self.rank :: self.world].tolist())

    def set_epoch(self, epoch: int) -> None:
        """DistributedSampler's call, made by the training loop: here each epoch's draw already differs."""
{% else %}
        return iter(torch.multinomial(self.weights, self.count, replacement=True, generator=self.generator).tolist())
{% endif %}


class SeededBatches(Dataset):
    """The training set, each batch augmented from a random stream of its own seeded by (seed, epoch, the batch's
    indices), all of which the epoch's order fixes: the same augmentation whichever data-loading worker loads it and
    however many there are, so --num-workers never changes the weights. One seed per batch, not per image: seeding
    costs a few microseconds, a 32-px image about two hundred."""

    def __init__(self, dataset, seed: int):
        self.dataset, self.seed = dataset, seed
        self.shared_epoch = torch.zeros((), dtype=torch.int64).share_memory_()  # persistent workers read it each batch

    @property
    def epoch(self) -> int:
        return int(self.shared_epoch)

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self.shared_epoch.fill_(epoch)

    @property
    def classes(self) -> list[str]:
        return self.dataset.classes

    @property
    def targets(self):
        return self.dataset.targets

    @property
    def transform(self):
        return self.dataset.transform

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list:
        """A batch's images, as the DataLoader asks for them."""
        streams = torch.default_generator  # what torchvision's random transforms draw from
        saved = streams.get_state() if get_worker_info() is None else None  # in the main process: keep its streams
        streams.manual_seed(hash((self.seed, self.epoch, *indices)) % 2**63)
        try:
            return [self.dataset[index] for index in indices]
        finally:
            if saved is not None:
                streams.set_state(saved)


{% if cookiecutter.use_checkpointing %}
class ResumableSampler(Sampler[int]):
    """The epoch's order of `sampler`, less the images of the batches a mid-epoch checkpoint had trained: a resumed run
    goes on from the next batch without loading the images before it. Keeps the state of the loader's generator at
    the epoch's start, which the checkpoint saves to draw the same order again."""

    def __init__(self, sampler: Sampler, generator: torch.Generator, batch_size: int):
        self.sampler, self.generator, self.batch_size = sampler, generator, batch_size
        self.skipped, self.epoch_start = 0, generator.get_state()

    def start_epoch(self, epoch: int, done_steps: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)  # DistributedSampler: a new shuffle every epoch
        self.skipped, self.epoch_start = done_steps * self.batch_size, self.generator.get_state()

    def __len__(self) -> int:
        return max(len(self.sampler) - self.skipped, 0)

    def __iter__(self):
        return itertools.islice(iter(self.sampler), self.skipped, None)


def start_epoch(loader: DataLoader, epoch: int, done_steps: int = 0) -> None:
    """Before each epoch's batches: the epoch's augmentation seeds, its shuffle, and the batches a resumed epoch
    skips."""
    loader.dataset.epoch = epoch
    _seed_order(loader, epoch)
    loader.sampler.start_epoch(epoch, done_steps)
{% else %}
def start_epoch(loader: DataLoader, epoch: int) -> None:
    """Before each epoch's batches: the epoch's augmentation seeds and its shuffle."""
    loader.dataset.epoch = epoch
    _seed_order(loader, epoch)
{% if cookiecutter.use_distributed %}
    if hasattr(loader.sampler, "set_epoch"):
        loader.sampler.set_epoch(epoch)  # DistributedSampler: a new shuffle every epoch
{% endif %}
{% endif %}


def _seed_order(loader: DataLoader, epoch: int) -> None:
    """The epoch's order from (seed, epoch) alone: torch's RandomSampler draws once more when it is read to its end,
    which workers reading ahead do and an epoch cut short by --max-steps-per-epoch without them does not."""
    loader.order.manual_seed(hash((loader.dataset.seed, epoch)) % 2**63)


_KEEPING_WORKERS = weakref.WeakSet()  # the loaders whose worker processes outlive an epoch


def _stop_kept_workers() -> None:
    for loader in list(_KEEPING_WORKERS):
        with contextlib.suppress(RuntimeError):
            loader.stop_workers()


# The workers ignore SIGTERM (seed_worker), and Python's exit terminates daemon children with SIGTERM, then waits for
# them: any process still holding a loader (a script, a notebook) would wait forever. Finalizers of priority >= 0 run
# before that, so every process that made workers stops them itself as it exits.
multiprocessing.util.Finalize(None, _stop_kept_workers, exitpriority=100)


def stopping_data_workers(function):
    """The data-loading workers a call starts stop when it returns or raises: a caller that goes on (tune's next
    trial, a test, a notebook) keeps no processes of it, whatever still refers to its loaders."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        before = set(_KEEPING_WORKERS)
        try:
            return function(*args, **kwargs)
        finally:
            for loader in set(_KEEPING_WORKERS) - before:
                with contextlib.suppress(RuntimeError):  # a worker killed meanwhile: torch still stops the others
                    loader.stop_workers()

    return call


class DeviceLoader(DataLoader):
    """A DataLoader whose batches arrive on the device as the model takes them: the workers send uint8 images, a
    quarter of the bytes of floats, converted to normalised floats once per batch on the device."""

    def __init__(self, dataset, device: torch.device, mean, std, order: torch.Generator | None = None, **kwargs):
        super().__init__(dataset, **kwargs)
        self.device, self.mean, self.std, self.order = device, mean, std, order  # order: the sampler's generator
        if self.persistent_workers:
            _KEEPING_WORKERS.add(self)

    def stop_workers(self) -> None:
        """Stop the persistent workers now, as the loader's deletion would: a traceback can keep it alive for long."""
        iterator, self._iterator = self._iterator, None
        if iterator is not None:
            workers = list(iterator._workers)
            try:
                iterator._shutdown_workers()
            finally:  # torch's last resort is SIGTERM, which the workers ignore: one stuck past its wait is killed
                for worker in workers:
                    if worker.is_alive():
                        worker.kill()
                        worker.join()

    @functools.cached_property
    def _shift_and_scale(self) -> tuple[torch.Tensor, torch.Tensor]:
        """255 mean and 255 std, on the device (made at the first batch: a loader may be built before any GPU)."""
        shift, scale = (torch.tensor(values, device=self.device).mul(255) for values in (self.mean, self.std))
        return shift.view(1, -1, 1, 1), scale.view(1, -1, 1, 1)

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images of [0, 255] to (x / 255 - mean) / std, on the device."""
        shift, scale = self._shift_and_scale
        return images.to(self.device, non_blocking=True).float().sub_(shift).div_(scale)

    def __iter__(self):
        for images, targets in super().__iter__():
            yield self.normalise(images), targets.to(self.device, non_blocking=True)


def _sampler(split: str, dataset, cfg, generator: torch.Generator) -> Sampler | None:
    if split == "train" and cfg.sampler == "balanced":
        return BalancedSampler(dataset.targets, generator)
{% if cookiecutter.use_distributed %}
    if is_distributed():  # --batch-size is global: each of the world's processes loads its share
        return DistributedSampler(dataset, seed=cfg.seed) if split == "train" else ShardSampler(dataset)
{% endif %}
    return RandomSampler(dataset, generator=generator) if split == "train" else None


def build_data(cfg, device: torch.device, train: bool = True) -> Data:
    """Loaders for a resolved config (image_size, mean, std, hflip and num_workers set)."""
    opened, rows = open_datasets(cfg, SPLITS if train else ("val",), training=train)
    classes = list(opened["val"].classes)
    check_class_names(classes, cfg.data)
    if train and list(opened["train"].classes) != classes:
        raise DataError(f"{cfg.data}: train/ and val/ hold different class folders; make them match")
    augment = Augmentation(cfg.augment, cfg.hflip, cfg.random_erasing)
    loaders = {}
    for split, dataset in opened.items():
        training = augment if split == "train" else None
        dataset.transform = build_transform(cfg.data, cfg.image_size, cfg.mean, cfg.std, training, floats=False)
        # `order` draws each epoch's order in this process, and nothing else does; the augmentations come from
        # per-batch seeds (SeededBatches), whose epoch the workers read from shared memory: they live as long as the
        # loader.
        order = torch.Generator().manual_seed(cfg.seed)
        sampler = _sampler(split, dataset, cfg, order)
{% if cookiecutter.use_distributed %}
        batch_size = cfg.batch_size // world_size()
{% else %}
        batch_size = cfg.batch_size
{% endif %}
        if split == "train":
            dataset = SeededBatches(dataset, cfg.seed)
{% if cookiecutter.use_checkpointing %}
            sampler = ResumableSampler(sampler, order, batch_size)
{% endif %}
        loaders[split] = DeviceLoader(
            dataset,
            device,
            cfg.mean,
            cfg.std,
            order,
            batch_size=batch_size,
            sampler=sampler,
            num_workers=cfg.num_workers,
            pin_memory=device.type != "cpu",  # for copies that overlap the step, on any accelerator
            persistent_workers=cfg.num_workers > 0,
            worker_init_fn=seed_worker,
            generator=torch.Generator().manual_seed(cfg.seed),  # the workers' seeds: drawn once per start of workers
        )
    weights = None
    if train and cfg.class_weights == "auto":
        weights = inverse_frequency(opened["train"].targets, len(classes)).to(device)
    return Data(loaders.get("train"), loaders["val"], classes, rows, weights)


LISTED_CLASSES = 20  # on the console; class_counts.csv has them all


def describe_data(data: Data, out: Path) -> None:
    """Print the classes with their numbers of training and validation images, write them (and the split, where this
    run decided or read it) into the run folder, and name the classes that no validation image measures."""
    counts = [
        {"class": name, "train": train, "val": val}
        for name, train, val in zip(data.classes, _counts(data.train), _counts(data.val), strict=True)
    ]
    write_csv(out / "class_counts.csv", counts)
    if data.rows:
        write_split(out / "split.csv", data.rows)
    listed = ", ".join(f"{row['class']} {row['train']}/{row['val']}" for row in counts[:LISTED_CLASSES])
    more = f" and {len(counts) - LISTED_CLASSES} more" if len(counts) > LISTED_CLASSES else ""
    print(f"{len(counts)} classes (train/val images): {listed}{more}")
    unmeasured = [row["class"] for row in counts if not row["val"]]
    if unmeasured:
        print(f"warning: no validation images of {', '.join(unmeasured)}: nothing measures them", file=sys.stderr)


def _counts(loader: DataLoader) -> list[int]:
    targets = torch.as_tensor(loader.dataset.targets)
    return torch.bincount(targets, minlength=len(loader.dataset.classes)).tolist()
