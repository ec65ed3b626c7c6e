import csv
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.metrics import confusion_matrix, per_class_report
from {{ cookiecutter.package_name }}.plots import learning_curves
from {{ cookiecutter.package_name }}.train import train


def read_csv(path):
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def assert_picture(path, size):
    """A PNG of about the expected size with real content (many colours, not one flat background), drawn whole:
    a white margin on every side, so no label runs off the edge."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert all(0.8 * want <= got <= 1.2 * want for got, want in zip(image.size, size, strict=True))
        pixels = np.asarray(image.convert("RGB"))
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50
    assert (pixels != 255).any(axis=2).mean() > 0.02  # more than a white page with a frame
    for edge in (pixels[:2], pixels[-2:], pixels[:, :2], pixels[:, -2:]):
        assert (edge == 255).all(), f"{path.name}: something is cut off at the edge"


def test_learning_curves_count_epochs_in_whole_numbers():
    rows = [{"epoch": str(e), "train_loss": "1", "val_loss": "1", "val_acc": "0.5", "lr": "0.1"} for e in (1, 2, 3)]
    figure = learning_curves(rows)
    assert all(tick == int(tick) for axis in figure.axes for tick in axis.get_xticks())


def test_per_class_report_matches_counting_by_hand():
    generator = torch.Generator().manual_seed(0)
    targets = torch.randint(0, 5, (500,), generator=generator)
    predictions = torch.where(torch.rand(500, generator=generator) < 0.6, targets, torch.randint(0, 5, (500,)))
    matrix = confusion_matrix(targets, predictions, 5)
    rows = {row["class"]: row for row in per_class_report(matrix, list("abcde"))}
    for index, name in enumerate("abcde"):
        hits = int(((predictions == index) & (targets == index)).sum())
        assert rows[name]["precision"] == pytest.approx(hits / int((predictions == index).sum()))
        assert rows[name]["recall"] == pytest.approx(hits / int((targets == index).sum()))
        assert rows[name]["support"] == int((targets == index).sum())
    accuracy = float((predictions == targets).float().mean())
    assert rows["micro avg"]["f1"] == pytest.approx(accuracy) and rows["micro avg"]["support"] == 500
    assert rows["macro avg"]["f1"] == pytest.approx(np.mean([rows[name]["f1"] for name in "abcde"]))
    assert rows["weighted avg"]["recall"] == pytest.approx(accuracy)


def test_every_epoch_writes_the_report_and_the_run_ends_with_pictures(tiny_config, tmp_path):
    result = train(replace(tiny_config, epochs=2, plots=True))
    run = tmp_path / "run"
    matrix = [[int(count) for count in list(row.values())[1:]] for row in read_csv(run / "confusion_matrix.csv")]
    report = {row["class"]: row for row in read_csv(run / "per_class.csv")}
    evaluated = sum(map(sum, matrix))
    assert evaluated == int(report["micro avg"]["support"]) == 2 * tiny_config.batch_size
    assert float(report["micro avg"]["f1"]) == pytest.approx(result["metrics"][-1]["val_acc"])
    classes = (run / "classes.txt").read_text().split()
    assert sum(int(report[name]["support"]) for name in classes) == evaluated
    assert_picture(run / "learning_curves.png", (1500, 400))
    assert_picture(run / "confusion_matrix.png", (800, 700))


def test_plot_redraws_a_run_and_refuses_a_folder_without_one(tiny_config, tmp_path, capsys):
    train(tiny_config)  # with plots=False
    run = tmp_path / "run"
    assert not (run / "learning_curves.png").exists()
    assert main(["plot", str(run)]) == 0
    assert_picture(run / "learning_curves.png", (1500, 400))
    assert main(["plot", str(tmp_path)]) == 2
    message = capsys.readouterr().err.strip()
    assert message.endswith("has no metrics.csv or confusion_matrix.csv; pass the output dir of a run")
