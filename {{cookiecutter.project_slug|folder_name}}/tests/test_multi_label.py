{% if cookiecutter.task == "multi_label" %}
"""Multi-label runs end to end: the loss and its weights, the figures at the threshold, fitted thresholds and the
commands that use them, each checked against scikit-learn or a computation of its own."""

import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import NEUTRAL
from PIL import Image
from sklearn import metrics

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.data.loaders import build_data
from {{ cookiecutter.package_name }}.data.samplers import negatives_per_positive
from {{ cookiecutter.package_name }}.serving.inference import load_run
from {{ cookiecutter.package_name }}.serving.thresholds import load_thresholds
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.train import train

CPU = torch.device("cpu")
COLOURS = {"red": (220, 30, 30), "green": (30, 220, 30), "blue": (30, 30, 220)}
# each image's labels: every combination, red the most common, blue the rarest, some with none
LABELS = ["red", "red", "red;green", "red;blue", "green", "red;green;blue", "", "red", "green", "red;green"] * 3


@pytest.fixture
def tagged(tmp_path) -> Path:
    """labels.csv of 30 small PNGs: a square of each labelled colour on grey, placed by the label."""
    folder = tmp_path / "tagged"
    folder.mkdir()
    generator = torch.Generator().manual_seed(0)
    lines = ["path,labels"]
    for i, labels in enumerate(LABELS):
        pixels = torch.full((24, 24, 3), 128) + torch.randint(-20, 20, (24, 24, 3), generator=generator)
        for slot, name in enumerate(COLOURS):
            if name in labels.split(";"):
                pixels[8 * slot : 8 * slot + 8, 4:20] = torch.tensor(COLOURS[name])
        Image.fromarray(pixels.clamp(0, 255).to(torch.uint8).numpy()).save(folder / f"{i}.png")
        lines.append(f"{i}.png,{labels}")
    (folder / "labels.csv").write_text("\n".join(lines) + "\n")
    return folder / "labels.csv"


def on(data: Path, tiny_config, **changes):
    return replace(tiny_config, **{"data": str(data), "image_size": 16, "batch_size": 4, **NEUTRAL, **changes})


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


@torch.inference_mode()
def validation_scores(weights: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The probabilities and targets of the run's validation images, from the weights alone (not from evaluate)."""
    cfg, classes, model = load_run(str(weights), CPU)
    batches = list(build_data(cfg, CPU, train=False).val)
    probabilities = torch.cat([model(images).double().sigmoid() for images, _ in batches])
    targets = torch.cat([targets for _, targets in batches])
    return probabilities.numpy(), targets.numpy().astype(int), classes


def test_the_loss_is_binary_cross_entropy_with_each_classes_negatives_per_positive(tagged, tiny_config, monkeypatch):
    seen = []
    loop = train_module.train_one_epoch
    monkeypatch.setattr(train_module, "train_one_epoch", lambda *args, **kw: seen.append(args[2]) or loop(*args, **kw))
    train(on(tagged, tiny_config, pos_weight="auto"))
    run = Path(tiny_config.output_dir)
    trained = [row["labels"].split(";") for row in read_rows(run / "split.csv") if row["split"] == "train"]
    classes = (run / "classes.txt").read_text().splitlines()
    positives = np.array([sum(name in labels for labels in trained) for name in classes])
    expected = (len(trained) - positives) / positives  # the CSV's own counts: rare blue weighs most
    assert isinstance(seen[0], torch.nn.BCEWithLogitsLoss)
    assert seen[0].pos_weight.tolist() == pytest.approx(expected.tolist())
    train(on(tagged, tiny_config, overwrite=True))
    assert seen[1].pos_weight is None  # --pos-weight none, the default


@pytest.mark.parametrize("threshold", [0.3, 0.6])
def test_the_logged_figures_are_scikit_learns_at_the_threshold(tagged, tiny_config, threshold):
    result = train(on(tagged, tiny_config, threshold=threshold, epochs=2))
    row = result["metrics"][-1]
    probabilities, targets, _ = validation_scores(Path(tiny_config.output_dir) / "model.pt")
    predicted = (probabilities >= threshold).astype(int)
    assert row["val_f1_micro"] == pytest.approx(metrics.f1_score(targets, predicted, average="micro", zero_division=0))
    assert row["val_f1_samples"] == pytest.approx(
        metrics.f1_score(targets, predicted, average="samples", zero_division=0)
    )
    assert row["val_hamming_loss"] == pytest.approx(metrics.hamming_loss(targets, predicted))
    assert row["val_acc"] == pytest.approx(metrics.accuracy_score(targets, predicted))  # every label right
    present = targets.sum(0) > 0  # AP is defined for the classes with a positive image
    expected_map = metrics.average_precision_score(targets[:, present], probabilities[:, present], average="macro")
    assert row["val_map"] == pytest.approx(expected_map)
    assert result["best_val_map"] == max(epoch["val_map"] for epoch in result["metrics"])  # mAP picks the best


def test_fitted_thresholds_give_each_class_its_best_f1_and_predict_and_export_use_them(tagged, tiny_config, tmp_path):
    train(on(tagged, tiny_config, epochs=2))
    weights = Path(tiny_config.output_dir) / "model.pt"
    assert main(["evaluate", "--weights", str(weights), "--fit-thresholds", "--device", "cpu"]) == 0
    saved = read_rows(weights.parent / "model_thresholds.csv")
    probabilities, targets, classes = validation_scores(weights)
    assert [row["class"] for row in saved] == classes
    for column, row in enumerate(saved):
        if not targets[:, column].any():
            assert float(row["threshold"]) == 0.5  # no positive image: nothing to fit, the default kept
            continue
        scores = np.unique(probabilities[:, column])  # low to high
        f1 = [metrics.f1_score(targets[:, column], probabilities[:, column] >= t, zero_division=0) for t in scores]
        chosen = max(index for index, f in enumerate(f1) if f == max(f1))  # of equally good scores the highest
        halfway = (scores[chosen] + (scores[chosen - 1] if chosen else 0.0)) / 2  # toward the next lower score
        assert float(row["threshold"]) == pytest.approx(halfway)

    images = sorted(str(path) for path in tagged.parent.glob("*.png"))[:6]
    by_weights, by_file = tmp_path / "weights.csv", tmp_path / "file.csv"
    assert main(["predict", "--weights", str(weights), *images, "--output", str(by_weights), "--top-k", "3"]) == 0
    thresholds = {row["class"]: float(row["threshold"]) for row in saved}
    for row in read_rows(by_weights):
        probability = {row[f"class_{k}"]: float(row[f"probability_{k}"]) for k in (1, 2, 3)}
        assert row["labels"] == ";".join(name for name in classes if probability[name] >= thresholds[name])

    exported = tmp_path / "model.pt2"
    assert main(["export", "--weights", str(weights), "--format", "exported-program", "--output", str(exported)]) == 0
    sidecar = json.loads((exported.parent / "model.pt2.json").read_text())
    assert sidecar["thresholds"] == [float(row["threshold"]) for row in saved] and "sigmoid" in sidecar["output"]
    assert main(["predict", "--model-file", str(exported), *images, "--output", str(by_file), "--top-k", "3"]) == 0
    assert [row["labels"] for row in read_rows(by_file)] == [row["labels"] for row in read_rows(by_weights)]
    # thresholds of 0 name every class, whatever the probabilities: predict reads the file, not --threshold
    (weights.parent / "model_thresholds.csv").write_text("class,threshold\n" + "".join(f"{n},0\n" for n in classes))
    assert main(["predict", "--weights", str(weights), *images, "--output", str(by_weights), "--device", "cpu"]) == 0
    assert {row["labels"] for row in read_rows(by_weights)} == {";".join(classes)}


def test_each_classes_precision_recall_points_are_scikit_learns_and_the_run_draws_them(tagged, tiny_config):
    train(on(tagged, tiny_config, epochs=2, plots=True))
    run = Path(tiny_config.output_dir)
    probabilities, targets, classes = validation_scores(run / "model.pt")
    points = read_rows(run / "precision_recall.csv")
    for column, name in enumerate(classes):
        rows = [row for row in points if row["class"] == name]
        if not targets[:, column].any():
            assert not rows  # no curve without a positive image
            continue
        precision, recall, thresholds = metrics.precision_recall_curve(targets[:, column], probabilities[:, column])
        expected = list(zip(thresholds[::-1], precision[-2::-1], recall[-2::-1], strict=True))  # high to low
        written = [(float(row["threshold"]), float(row["precision"]), float(row["recall"])) for row in rows]
        np.testing.assert_allclose(np.array(written), np.array(expected), rtol=1e-9)
    assert (run / "precision_recall.png").stat().st_size > 0 and not (run / "confusion_matrix.png").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("class,threshold\nblue,0.5\n", "does not hold a threshold from 0 to 1 for each of the model's 3 classes"),
        ("class,threshold\nblue,0.5\ngreen,nan\nred,0.5\n", "does not hold a threshold from 0 to 1"),
        ("class,threshold\nblue,0.5\ngreen,x\nred,0.5\n", "cannot read"),
    ],
)
def test_a_thresholds_file_that_does_not_fit_the_model_is_one_line(tagged, tiny_config, capsys, content, message):
    train(on(tagged, tiny_config))
    weights = Path(tiny_config.output_dir) / "model.pt"
    (weights.parent / "model_thresholds.csv").write_text(content)
    assert main(["predict", "--weights", str(weights), str(tagged.parent / "0.png"), "--device", "cpu"]) == 4
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_images_without_a_label_are_trained_on_and_counted(tagged, tiny_config, capsys):
    train(on(tagged, tiny_config))
    rows = read_rows(Path(tiny_config.output_dir) / "split.csv")
    train_count, val_count = (sum(not row["labels"] for row in rows if row["split"] == s) for s in ("train", "val"))
    assert train_count + val_count == LABELS.count("")  # each one in the split, in one part
    assert f"images without a label (train/val): {train_count}/{val_count}" in capsys.readouterr().out


def test_a_class_on_every_or_no_training_image_gets_a_positive_weight_of_one():
    targets = torch.tensor([[1.0, 1, 0], [1, 0, 0], [1, 0, 0], [1, 1, 0]])  # class 0 everywhere, class 2 nowhere
    assert negatives_per_positive(targets).tolist() == [1.0, 1.0, 1.0]  # 2 without class 1, 2 with it: 1 too
    assert negatives_per_positive(targets[1:]).tolist() == [1.0, 2.0, 1.0]


def test_data_that_labels_no_image_is_one_line_and_starts_no_run(tagged, tiny_config, capsys):
    (tagged.parent / "none.csv").write_text("path,labels\n" + "".join(f"{i}.png,\n" for i in range(10)))
    run = Path(tiny_config.output_dir)
    args = ["train", "--data", str(tagged.parent / "none.csv"), "--output-dir", str(run), "--device", "cpu"]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "gives no image a label" in err and err.count("\n") == 1 and not run.exists()


def test_a_new_run_in_the_folder_drops_the_thresholds_fitted_to_the_weights_it_replaces(tagged, tiny_config):
    train(on(tagged, tiny_config))
    weights = Path(tiny_config.output_dir) / "model.pt"
    assert main(["evaluate", "--weights", str(weights), "--fit-thresholds", "--device", "cpu"]) == 0
    assert (weights.parent / "model_thresholds.csv").is_file()
    train(on(tagged, tiny_config, overwrite=True, seed=1))
    assert not (weights.parent / "model_thresholds.csv").exists()


def test_thresholds_are_fitted_without_tta_and_read_as_a_spreadsheet_saves_them(tagged, tiny_config, capsys):
    train(on(tagged, tiny_config))
    weights = Path(tiny_config.output_dir) / "model.pt"
    command = ["evaluate", "--weights", str(weights), "--fit-thresholds", "--device", "cpu"]
    assert main([*command, "--tta"]) == 2
    assert "drop one" in capsys.readouterr().err and not (weights.parent / "model_thresholds.csv").exists()
    classes = (weights.parent / "classes.txt").read_text().splitlines()
    text = "class,threshold\r\n" + "".join(f"{name},0.25\r\n" for name in classes)
    (weights.parent / "model_thresholds.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())  # BOM, CRLF: as Excel
    assert load_thresholds(weights, classes, 0.5).tolist() == [0.25] * len(classes)
{% endif %}
