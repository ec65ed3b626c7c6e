import os
import shutil
import types
from dataclasses import replace
from urllib.error import URLError

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core.errors import DataError, UserError
from {{ cookiecutter.package_name }}.data import loaders, sources, transforms
from {{ cookiecutter.package_name }}.data.decoding import load_image, load_rgb
from {{ cookiecutter.package_name }}.data.loaders import DeviceLoader, build_data, start_epoch
{% if cookiecutter.task == "multi_label" %}
from {{ cookiecutter.package_name }}.data.multi_label import SyntheticTags as Synthetic
from {{ cookiecutter.package_name }}.data.samplers import SeededBatches
from {{ cookiecutter.package_name }}.data.sources import DOWNLOADABLE, open_datasets
{% else %}
from {{ cookiecutter.package_name }}.data.samplers import SeededBatches, inverse_frequency
from {{ cookiecutter.package_name }}.data.sources import DOWNLOADABLE, default_image_size, open_datasets
from {{ cookiecutter.package_name }}.data.sources import SyntheticImages as Synthetic
{% endif %}
from {{ cookiecutter.package_name }}.data.transforms import Augmentation, build_transform, compute_mean_std
from {{ cookiecutter.package_name }}.training.train import resolve


def test_synthetic_data_is_deterministic_from_the_seed():
    a, b, c = Synthetic(64, seed=1), Synthetic(64, seed=1), Synthetic(64, seed=2)
    assert torch.equal(a.images, b.images) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.images, c.images)
    assert len(a.classes) == {{ 5 if cookiecutter.task == 'multi_label' else 10 }} and a.images.dtype == torch.uint8 and a.images.shape[1:] == (3, 32, 32)


def test_transforms_give_normalised_chw_floats_and_augment_training_only():
    image = Image.new("RGB", (50, 40), (255, 128, 0))
    val = build_transform("folder", 24, None, None)
    tensor = val(image)
    assert tensor.shape == (3, 24, 24) and tensor.dtype == torch.float32
    assert 0 <= tensor.min() and tensor.max() <= 1
    assert torch.equal(val(image), tensor)  # validation is deterministic
    stripes = Synthetic(1, seed=0).images[0]
    train = build_transform("synthetic", 32, None, None, Augmentation())
    assert any(not torch.equal(train(stripes), train(stripes)) for _ in range(5))
    normalised = build_transform("folder", 24, [0.5, 0.5, 0.0], [0.5, 0.5, 1.0])(image)
    assert torch.allclose(normalised[0], torch.ones(24, 24)) and torch.allclose(normalised[2], torch.zeros(24, 24))


def test_grayscale_images_become_three_channels():
    digit = Image.new("L", (28, 28), 200)
    assert build_transform("mnist", 28, None, None, Augmentation())(digit).shape == (3, 28, 28)


def test_mean_std_of_a_dataset():
    dataset = [(torch.stack([torch.full((4, 4), v) for v in (0.2, 0.4, 0.6)]) + 0.1 * i, 0) for i in range(3)]
    mean, std = compute_mean_std(dataset)
    assert mean == pytest.approx([0.3, 0.5, 0.7], abs=1e-4)
    assert std == pytest.approx([0.0816] * 3, abs=1e-3)


def test_normalisation_statistics_come_from_a_random_sample_of_sorted_data():
    dataset = [(torch.full((3, 2, 2), float(i >= 1000)), 0) for i in range(2000)]  # sorted: 1000 black, 1000 white
    mean, _ = compute_mean_std(dataset)  # 512 of them: the first 512 would all be black
    assert mean == pytest.approx([0.5] * 3, abs=0.1)


def test_the_training_order_follows_the_seed(tiny_config):
    def first_epoch(seed: int) -> list[int]:
        cfg = resolve(replace(tiny_config, seed=seed, mean=[0.5] * 3, std=[0.5] * 3))
        loader = build_data(cfg, torch.device("cpu")).train
        start_epoch(loader, 1)  # as train() does: the epoch's order from (seed, epoch)
        return list(loader.sampler)

    assert first_epoch(1) == first_epoch(1) and first_epoch(1) != first_epoch(0)


def test_image_folder_loads_with_class_names(image_folder, tiny_config):
    cfg = resolve(replace(tiny_config, data=str(image_folder), image_size=32))
    data = build_data(cfg, torch.device("cpu"))
    assert data.classes == ["cats", "dogs"]
    images, targets = next(iter(data.train))
{% if cookiecutter.task == "multi_label" %}
    assert images.shape[1:] == (3, 32, 32) and targets.shape[1:] == (2,) and targets.sum(1).eq(1).all()  # one label
{% else %}
    assert images.shape[1:] == (3, 32, 32) and set(targets.tolist()) <= {0, 1}
{% endif %}


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("missing", "no such folder or CSV file"),
        ("no val", "put images in .*val/<class>/"),
        ("mismatch", "different class"),
    ],
)
def test_bad_image_folders_are_explained(tmp_path, image_folder, tiny_config, layout, message):
    if layout == "missing":
        root = tmp_path / "nowhere"
    elif layout == "no val":  # train/ alone: a split tree missing its other half, not a folder of classes
        shutil.rmtree(image_folder / "val")
        root = image_folder
    else:
        (image_folder / "val" / "dogs").rename(image_folder / "val" / "wolves")
        root = image_folder
    cfg = replace(tiny_config, data=str(root), mean=[0.5] * 3, std=[0.5] * 3)
    with pytest.raises(UserError, match=message):
        build_data(resolve(cfg), torch.device("cpu"))


def test_offline_download_is_one_clear_error(tiny_config, monkeypatch):
    def offline(*args, **kwargs):
        raise URLError("no network")

    monkeypatch.setitem(DOWNLOADABLE, "cifar10", offline)
    with pytest.raises(UserError, match="could not download cifar10 into /.*/data ") as raised:
        resolve(replace(tiny_config, data="cifar10"))
    assert str(raised.value).endswith("; connect to the internet once or copy the files there, then run again")


def test_training_crops_have_their_documented_scale_and_padding():
    basic = Augmentation("basic", hflip=False)
    photos = build_transform("folder", 64, None, None, basic).transforms
    crop = next(step for step in photos if isinstance(step, v2.RandomResizedCrop))
    assert tuple(crop.size) == (64, 64) and crop.scale == (0.35, 1.0)
    small = build_transform("synthetic", 32, None, None, basic).transforms
    assert next(step for step in small if isinstance(step, v2.RandomCrop)).padding == [4, 4, 4, 4]  # an eighth


def test_a_batchs_augmentation_follows_its_seed_epoch_and_indices_and_leaves_the_main_stream_alone():
    images = Synthetic(8, seed=0, transform=build_transform("synthetic", 32, None, None, Augmentation("basic")))
    seeded = SeededBatches(images, seed=3)
    state = torch.get_rng_state()
    batch = seeded.__getitems__([5, 2, 5])  # a balanced draw may take one image twice
    assert torch.equal(torch.get_rng_state(), state)  # the main process's draws (shuffling, dropout) unmoved
    assert not torch.equal(batch[0][0], batch[2][0])  # twice in a batch: two augmentations, not one
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batch, seeded.__getitems__([5, 2, 5]), strict=True))
    assert not torch.equal(batch[0][0], seeded.__getitems__([5, 2, 4])[0][0])  # another batch: another draw
    seeded.epoch = 1
    assert not torch.equal(batch[0][0], seeded.__getitems__([5, 2, 5])[0][0])  # another epoch: another draw


def test_synthetic_images_are_transformed_only_when_given_a_transform():
    plain = Synthetic(4, seed=0)
    assert plain[1][0].dtype == torch.uint8 and torch.equal(plain[1][0], plain.images[1])
    halved = Synthetic(4, seed=0, transform=lambda image: image // 2)
    assert torch.equal(halved[1][0], plain.images[1] // 2)
    assert torch.equal(torch.as_tensor(halved[1][1]), torch.as_tensor(plain.targets[1]))


def test_statistics_are_rounded_to_four_places_and_follow_the_seed():
    images = Synthetic(600, seed=0, transform=v2.ToDtype(torch.float32, scale=True))
    mean, std = compute_mean_std(images, samples=64, seed=1)
    assert all(round(value, 4) == value for value in mean + std)
    assert (mean, std) != compute_mean_std(images, samples=64, seed=2)


def test_every_image_is_read_as_rgb_whatever_its_mode(tmp_path, image_folder):
    Image.new("L", (8, 8), 100).save(tmp_path / "grey.png")
    Image.new("RGBA", (8, 8), (1, 2, 3, 4)).save(tmp_path / "alpha.png")
    assert load_rgb(str(tmp_path / "grey.png")).mode == "RGB" and load_rgb(str(tmp_path / "alpha.png")).mode == "RGB"
    opened, _ = open_datasets(TrainConfig(data=str(image_folder)), ("train", "val"), training=True)
{% if cookiecutter.task == "multi_label" %}
    opened = {split: dataset.dataset for split, dataset in opened.items()}  # the class folders, one label each
{% endif %}
    assert opened["train"].loader is load_image and opened["val"].loader is load_image  # names a bad file


@pytest.mark.parametrize("policy", ["basic", "trivialaugment"])
def test_batched_uint8_images_are_the_per_image_float_pipelines_images(tmp_path, policy):
    """JPEGs decoded to tensors, augmented in uint8 and normalised per batch by the loader: the same crops, flips and
    erasing as the per-image float pipeline they replaced (same seed), the same values to within decoder rounding."""
    mean, std = [0.45, 0.5, 0.55], [0.2, 0.25, 0.3]
    augment = Augmentation(policy, hflip=True, random_erasing=0.5)
    per_image = build_transform("folder", 48, mean, std, augment)
    batched = build_transform("folder", 48, mean, std, augment, floats=False)
    loader = DeviceLoader([], torch.device("cpu"), mean, std)
    ramp = np.linspace(0, 255, 80)
    for seed in range(8):
        rng = np.random.default_rng(seed)
        pixels = ramp[None, :, None] * rng.uniform(0.2, 1, 3) + ramp[:60, None, None] * rng.uniform(0, 0.5, 3)
        path = tmp_path / f"{seed}.jpg"
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path, quality=95)
        torch.manual_seed(seed)
        before = per_image(load_rgb(str(path)))
        torch.manual_seed(seed)
        after = loader.normalise(batched(load_image(str(path)))[None])[0]
        assert after.dtype == before.dtype == torch.float32 and after.shape == before.shape == (3, 48, 48)
        assert (after - before).abs().mean() < 0.05, seed  # a grey level or two; a crop elsewhere differs by far more


def test_a_pipe_or_a_device_named_as_an_image_is_refused_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.jpg")  # opening it would wait for a writer forever
    (tmp_path / "zeros.jpg").symlink_to("/dev/zero")  # reading it would never end
    for name in ("pipe.jpg", "zeros.jpg"):
        with pytest.raises(DataError, match=f"image .*{name} is not a regular file; delete it or replace it"):
            load_image(str(tmp_path / name))


def test_a_jpeg_beyond_pillows_pixel_guard_is_refused_as_pillow_refuses_it(tmp_path, monkeypatch):
    Image.new("RGB", (60, 40)).save(tmp_path / "large.jpg")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 2,400 pixels: over twice the limit
    with pytest.raises(DataError, match=r"large\.jpg has more pixels than Pillow opens safely"):
        load_image(str(tmp_path / "large.jpg"))


def test_a_jpeg_is_decoded_to_the_pixels_pillow_decodes_and_a_broken_one_is_named(tmp_path):
    photo = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 60, 3), dtype=np.uint8))
    photo.save(tmp_path / "colour.jpg", quality=90)
    photo.convert("L").save(tmp_path / "grey.jpg", quality=90)
    photo.convert("CMYK").save(tmp_path / "cmyk.jpg", quality=90)
    photo.save(tmp_path / "progressive.jpg", quality=90, progressive=True)
    exif = Image.Exif()
    exif[0x010F] = "a camera maker " * 200  # an APP1 segment of 3 KB before the frame header
    photo.save(tmp_path / "exif.jpg", quality=90, exif=exif)
    for name in ("colour.jpg", "grey.jpg", "cmyk.jpg", "progressive.jpg", "exif.jpg"):
        decoded = v2.functional.to_image(load_image(str(tmp_path / name)))  # a tensor, or Pillow's image (CMYK)
        expected = v2.functional.to_image(load_rgb(str(tmp_path / name)))
        assert decoded.dtype == torch.uint8 and decoded.shape == expected.shape == (3, 40, 60)
        assert (decoded.int() - expected.int()).abs().float().mean() < 1.0  # decoders may round apart
    for name in ("colour.jpg", "grey.jpg", "progressive.jpg", "exif.jpg"):  # straight to a tensor, not through Pillow
        assert torch.is_tensor(load_image(str(tmp_path / name))), name
    (tmp_path / "cut.jpg").write_bytes((tmp_path / "colour.jpg").read_bytes()[:400])
    with pytest.raises(DataError, match=r"cannot read image .*cut\.jpg"):
        load_image(str(tmp_path / "cut.jpg"))


def test_a_16_bit_image_keeps_its_shades(tmp_path):
    """Pillow's convert() clips 16-bit gray at 255: every image of a scanner or microscope would read as white."""
    Image.fromarray(np.array([[0, 20_000, 40_000, 65_535]], dtype=np.uint16)).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    pixels = np.asarray(load_rgb(str(tmp_path / "deep.png")))
    assert pixels[0, :, 0].tolist() == [0, 78, 156, 255] and (pixels == pixels[..., :1]).all()
{% if cookiecutter.task != "multi_label" %}


def test_native_sizes_and_class_weights():
    assert [default_image_size(name) for name in ("synthetic", "cifar10", "mnist", "photos")] == [32, 32, 28, 224]
    weights = inverse_frequency([0, 0, 1], 3)  # the last class has no training image
    assert weights.shape == (3,) and weights[2] == 0 and weights[1] == 2 * weights[0]
{% endif %}


def test_a_tree_with_only_a_val_folder_is_a_split_tree_not_a_class_named_val(tmp_path):
    (tmp_path / "val" / "cat").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "val" / "cat" / "0.png")
    with pytest.raises(UserError, match="train"):
        open_datasets(TrainConfig(data=str(tmp_path)), ("train", "val"), training=True)


def test_an_unknown_data_name_lists_the_known_ones(tmp_path):
    with pytest.raises(UserError) as raised:
        open_datasets(TrainConfig(data=str(tmp_path / "cifar11")), ("train", "val"), training=True)
    known = ", ".join(["synthetic", *DOWNLOADABLE])
    assert str(raised.value) == f"--data {tmp_path / 'cifar11'}: no such folder or CSV file, and not one of {known}"


def test_a_split_file_must_say_each_images_split(tmp_path, image_folder):
    (tmp_path / "split.csv").write_text("path,label\ntrain/cats/0.png,cats\n")
    cfg = TrainConfig(data=str(image_folder / "train"), split=str(tmp_path / "split.csv"))
    with pytest.raises(UserError, match="lacks the column.s. split"):
        sources.labelled_rows(cfg, training=True)


def test_the_summary_names_more_than_twenty_classes_and_each_unmeasured_one(tmp_path, capsys):
    class Loader:
        def __init__(self, targets, classes):
            self.dataset = types.SimpleNamespace(targets=targets, classes=classes)

    classes = [f"c{i}" for i in range(20)]
{% if cookiecutter.task == "multi_label" %}
    summary = loaders.Data(Loader(torch.eye(20), classes), Loader(torch.eye(20)[:18], classes), classes, None, None)
{% else %}
    summary = loaders.Data(Loader(list(range(20)), classes), Loader(list(range(18)), classes), classes, None, None)
{% endif %}
    loaders.describe_data(summary, tmp_path)
    captured = capsys.readouterr()
    assert " more" not in captured.out  # exactly LISTED_CLASSES: all listed
    assert captured.err == "warning: no validation images of c18, c19: nothing measures them\n"


def test_the_training_data_is_built_as_configured(tmp_path, monkeypatch):
    """Synthetic data crops with padding (photos: resized crops), the --augment policy, the class names checked
    against the data's name, the balanced draw from the loader's seeded generator, the workers asked for."""
    cfg = TrainConfig(data="synthetic", image_size=32, batch_size=4, mean=[0.5] * 3, std=[0.25] * 3, seed=3)
    cfg = replace(cfg, num_workers=0, hflip=True)  # as resolve() leaves them
    basic = build_data(replace(cfg, num_workers=2, sampler="balanced"), torch.device("cpu"))
    kinds = [type(step) for step in basic.train.dataset.transform.transforms]
    assert v2.RandomCrop in kinds and v2.RandomResizedCrop not in kinds and v2.AutoAugment not in kinds
    assert basic.train.num_workers == 2 and basic.train.persistent_workers  # the epoch reaches them: shared memory
    draws = []
    for global_seed in (1, 2):  # the global stream moves; the loader's own, seeded by --seed, decides
        torch.manual_seed(global_seed)
        draws.append(list(build_data(replace(cfg, sampler="balanced"), torch.device("cpu")).train.sampler))
    assert draws[0] == draws[1]
    trivial = build_data(replace(cfg, augment="trivialaugment"), torch.device("cpu"))
    assert v2.TrivialAugmentWide in [type(step) for step in trivial.train.dataset.transform.transforms]
    monkeypatch.setattr(loaders, "check_class_names", lambda classes, source: seen.append(source))
    seen = []
    build_data(cfg, torch.device("cpu"))
    assert seen == ["synthetic"]


def test_statistics_are_sampled_with_the_runs_seed(monkeypatch):
    seeds = []
    sampled = lambda dataset, seed: seeds.append(seed) or ([0.5] * 3, [1.0] * 3)  # noqa: E731
    monkeypatch.setattr(transforms, "compute_mean_std", sampled)
    transforms.resolve_normalisation(TrainConfig(data="synthetic", image_size=32, seed=7))
    assert seeds == [7]


def test_a_csv_of_one_image_is_refused_for_the_split_it_leaves_empty(tmp_path):
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    (tmp_path / "labels.csv").write_text("path,label{{ 's' if cookiecutter.task == 'multi_label' }},split\na.png,cat,train\n")
    with pytest.raises(UserError, match="val"):
        build_data(resolve(TrainConfig(data=str(tmp_path / "labels.csv"), image_size=8)), torch.device("cpu"))
