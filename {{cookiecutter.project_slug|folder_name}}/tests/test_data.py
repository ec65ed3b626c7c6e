import shutil
from dataclasses import replace
from urllib.error import URLError

import pytest
import torch
from PIL import Image

from {{ cookiecutter.package_name }}.data import (
    DOWNLOADABLE,
    Augmentation,
    SyntheticImages,
    build_data,
    build_transform,
    compute_mean_std,
)
from {{ cookiecutter.package_name }}.errors import UserError
from {{ cookiecutter.package_name }}.train import resolve


def test_synthetic_data_is_deterministic_from_the_seed():
    a, b, c = SyntheticImages(64, seed=1), SyntheticImages(64, seed=1), SyntheticImages(64, seed=2)
    assert torch.equal(a.images, b.images) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.images, c.images)
    assert len(a.classes) == 10 and a.images.dtype == torch.uint8 and a.images.shape[1:] == (3, 32, 32)


def test_transforms_give_normalised_chw_floats_and_augment_training_only():
    image = Image.new("RGB", (50, 40), (255, 128, 0))
    val = build_transform("folder", 24, None, None)
    tensor = val(image)
    assert tensor.shape == (3, 24, 24) and tensor.dtype == torch.float32
    assert 0 <= tensor.min() and tensor.max() <= 1
    assert torch.equal(val(image), tensor)  # validation is deterministic
    stripes = SyntheticImages(1, seed=0).images[0]
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


def test_image_folder_loads_with_class_names(image_folder, tiny_config):
    cfg = resolve(replace(tiny_config, data=str(image_folder), image_size=32))
    data = build_data(cfg, torch.device("cpu"))
    assert data.classes == ["cats", "dogs"]
    images, targets = next(iter(data.train))
    assert images.shape[1:] == (3, 32, 32) and set(targets.tolist()) <= {0, 1}


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
    with pytest.raises(UserError, match="could not download cifar10 into data"):
        resolve(replace(tiny_config, data="cifar10"))
