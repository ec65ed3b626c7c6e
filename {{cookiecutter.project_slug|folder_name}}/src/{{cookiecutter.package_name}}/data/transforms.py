"""What images go through: training's augmentation, the transforms of training, validation and prediction, and the
normalisation statistics."""

from dataclasses import dataclass

import torch
from torchvision.transforms import v2

from .sources import GRAYSCALE, NATIVE_SIZE, open_datasets

STATS_SAMPLES = 512


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


def resolve_normalisation(cfg) -> tuple[list, list]:
    """The given statistics (for pretrained weights: theirs), the training data's own otherwise."""
    if cfg.mean is not None and cfg.std is not None:
        return cfg.mean, cfg.std
    dataset = open_datasets(cfg, ("train",), training=True)[0]["train"]
    dataset.transform = build_transform(cfg.data, cfg.image_size, None, None)
    return compute_mean_std(dataset, seed=cfg.seed)
