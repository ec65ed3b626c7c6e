"""Which images each epoch draws, in which order and with which augmentation seeds: the sampler of each split, the
class weights that balance the loss instead, and each batch's own seed."""

{% if cookiecutter.use_checkpointing %}
import itertools
{% endif %}
{% if cookiecutter.use_distributed %}
import math
{% endif %}
{% if cookiecutter.use_checkpointing or cookiecutter.use_distributed %}

{% endif %}
import torch
from torch.utils.data import Dataset, RandomSampler, Sampler, get_worker_info
{% if cookiecutter.use_distributed %}
from torch.utils.data.distributed import DistributedSampler

from ..core.distributed import ShardSampler, is_distributed, rank, world_size
{% endif %}


def _sampler(split: str, dataset, cfg, generator: torch.Generator) -> Sampler | None:
    if split == "train" and cfg.sampler == "balanced":
        return BalancedSampler(dataset.targets, generator)
{% if cookiecutter.use_distributed %}
    if is_distributed():  # --batch-size is global: each of the world's processes loads its share
        return DistributedSampler(dataset, seed=cfg.seed) if split == "train" else ShardSampler(dataset)
{% endif %}
    return RandomSampler(dataset, generator=generator) if split == "train" else None


class BalancedSampler(Sampler[int]):
{% if cookiecutter.task == "multi_label" %}
    """--sampler balanced: each image drawn with the weight of its rarest label (images without labels as one more
    class), so that rare labels come about as often as common ones; with replacement, as many draws per epoch as there
    are images. The draws come from the loader's generator: the seed fixes them, as it fixes the shuffled order.
{% else %}
    """--sampler balanced: every class drawn equally often, with replacement, as many draws per epoch as there are
    images. The draws come from the loader's generator: the seed fixes them, as it fixes the shuffled order.
{% endif %}
{% if cookiecutter.use_distributed %}
    Under DDP every rank makes the same global draw (the ranks' generators move in step) and takes every
    world-th index of it: ranks never repeat each other's share.
{% endif %}
    """

    def __init__(self, targets, generator: torch.Generator):
        targets = torch.as_tensor(targets)
{% if cookiecutter.task == "multi_label" %}
        # an image is drawn for its rarest label: 1 / that label's images; images without any as a class of their own
        rarest = torch.where(targets > 0, 1 / targets.sum(0).double().clamp_min(1), 0).amax(1)
        unlabelled = targets.sum(1) == 0
        self.weights = torch.where(unlabelled, 1 / unlabelled.sum().double().clamp_min(1), rarest)
{% else %}
        self.weights = 1 / torch.bincount(targets)[targets].double()
{% endif %}
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


{% if cookiecutter.task == "multi_label" %}
def negatives_per_positive(targets: torch.Tensor) -> torch.Tensor:
    """--pos-weight auto: each class's positive labels weigh its training images without it / those with it, so that
    its positives and negatives count alike (BCEWithLogitsLoss's pos_weight); a class on no image or on every image
    gets 1 (0 would stop its positives from counting at all)."""
    positives = targets.sum(0).double()
    negatives = len(targets) - positives
    return torch.where((positives > 0) & (negatives > 0), negatives / positives.clamp_min(1), 1).float()
{% else %}
def inverse_frequency(targets, num_classes: int) -> torch.Tensor:
    """--class-weights auto: 1 / each class's number of training images, scaled so that the classes that have
    images average 1 (a class without any gets 0: it never appears in a training loss)."""
    counts = torch.bincount(torch.as_tensor(targets), minlength=num_classes).double()
    weights = torch.where(counts > 0, 1 / counts.clamp_min(1), 0)
    return (weights * (counts > 0).sum() / weights.sum()).float()
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
{% endif %}
