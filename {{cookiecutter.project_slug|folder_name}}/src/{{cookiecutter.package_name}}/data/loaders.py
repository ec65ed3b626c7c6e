"""The loaders: batches that arrive on the device, the start of each epoch, the data-loading workers' lifetime, and
the summary of the classes."""

import contextlib
import functools
import multiprocessing.util
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import DataLoader

{% if cookiecutter.use_distributed %}
from ..core.distributed import world_size
{% endif %}
from ..core.errors import DataError
from ..core.runtime import seed_worker
from ..reports.metrics import write_csv
{% if cookiecutter.task == "multi_label" %}
from .layouts import SPLITS, Row, check_class_names
from .multi_label import write_split
{% else %}
from .layouts import SPLITS, Row, check_class_names, write_split
{% endif %}
from .samplers import {{ "ResumableSampler, " if cookiecutter.use_checkpointing }}SeededBatches, _sampler, {{ "negatives_per_positive" if cookiecutter.task == "multi_label" else "inverse_frequency" }}
from .sources import open_datasets
from .transforms import Augmentation, build_transform


@dataclass
class Data:
    train: DataLoader | None
    val: DataLoader
    classes: list[str]
    rows: list[Row] | None = None  # each image's split, where this run decided or read it: saved as split.csv
{% if cookiecutter.task == "multi_label" %}
    class_weights: torch.Tensor | None = None  # of the training loss's positives (--pos-weight auto)
{% else %}
    class_weights: torch.Tensor | None = None  # of the training loss (--class-weights auto)
{% endif %}


{% if cookiecutter.use_checkpointing %}
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
{% if cookiecutter.task == "multi_label" %}
    if train and cfg.pos_weight == "auto":
        weights = negatives_per_positive(opened["train"].targets).to(device)
{% else %}
    if train and cfg.class_weights == "auto":
        weights = inverse_frequency(opened["train"].targets, len(classes)).to(device)
{% endif %}
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
{% if cookiecutter.task == "multi_label" %}
    unlabelled = [int((torch.as_tensor(loader.dataset.targets).sum(1) == 0).sum()) for loader in (data.train, data.val)]
    if any(unlabelled):  # allowed: they teach every class's "no"
        print(f"images without a label (train/val): {unlabelled[0]}/{unlabelled[1]}")
{% endif %}
    unmeasured = [row["class"] for row in counts if not row["val"]]
    if unmeasured:
        print(f"warning: no validation images of {', '.join(unmeasured)}: nothing measures them", file=sys.stderr)


def _counts(loader: DataLoader) -> list[int]:
{% if cookiecutter.task == "multi_label" %}
    return torch.as_tensor(loader.dataset.targets).sum(0).long().tolist()  # the images each label is on
{% else %}
    targets = torch.as_tensor(loader.dataset.targets)
    return torch.bincount(targets, minlength=len(loader.dataset.classes)).tolist()
{% endif %}
