import pytest
import torch
from PIL import Image

from {{ cookiecutter.package_name }}.config import TrainConfig


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
