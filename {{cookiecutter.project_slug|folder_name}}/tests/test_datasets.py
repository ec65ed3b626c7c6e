"""Data as people have it: one folder of class folders or a CSV, held out per class; imbalanced classes;
augmentation policies; test-time augmentation; predictions for whole folders."""

import csv
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision.transforms import v2

from {{ cookiecutter.package_name }} import inference
from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.data import Augmentation, build_data, build_transform, inverse_frequency
from {{ cookiecutter.package_name }}.errors import DataError, UserError
from {{ cookiecutter.package_name }}.inference import FlipAveraged, evaluate_run
from {{ cookiecutter.package_name }}.train import resolve, train

CPU = torch.device("cpu")
COLOURS = {"cats": (200, 40, 40), "dogs": (40, 40, 200), "owls": (40, 200, 40)}
COUNTS = {"cats": 20, "dogs": 10, "owls": 5}
POLICY_OPS = {"trivialaugment": v2.TrivialAugmentWide, "randaugment": v2.RandAugment, "autoaugment": v2.AutoAugment}


def write_images(folder: Path, label: str, count: int, start: int = 0) -> list[Path]:
    """`count` small PNGs of the class's colour with noise, named <label>_<i>.png."""
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(start)
    paths = []
    for i in range(start, start + count):
        noise = torch.randint(-30, 30, (16, 16 + i % 3, 3), generator=generator)
        pixels = (torch.tensor(COLOURS[label]) + noise).clamp(0, 255).to(torch.uint8).numpy()
        paths.append(folder / f"{label}_{i}.png")
        Image.fromarray(pixels).save(paths[-1])
    return paths


@pytest.fixture
def photos(tmp_path) -> Path:
    """One folder of class folders and no train/ or val/: 20 cats, 10 dogs, 5 owls."""
    for label, count in COUNTS.items():
        write_images(tmp_path / "photos" / label, label, count)
    return tmp_path / "photos"


def on(data, tiny_config, **changes):
    return replace(tiny_config, **{"data": str(data), "image_size": 16, "batch_size": 4, **changes})


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def held_out(run: Path) -> dict[str, int]:
    return Counter(row["label"] for row in read_rows(run / "split.csv") if row["split"] == "val")


def test_a_folder_of_class_folders_is_held_out_per_class_and_the_split_saved(photos, tiny_config, capsys):
    run = Path(train(on(photos, tiny_config))["config"].output_dir)
    rows = read_rows(run / "split.csv")
    every_image = sorted(p.relative_to(photos).as_posix() for p in photos.rglob("*.png"))
    assert sorted(row["path"] for row in rows) == every_image  # each image once, in one split
    assert held_out(run) == {"cats": 4, "dogs": 2, "owls": 1}  # round(0.2 x count) of each class
    assert read_rows(run / "class_counts.csv")[0] == {"class": "cats", "train": "16", "val": "4"}
    assert "3 classes (train/val images): cats 16/4, dogs 8/2, owls 4/1" in capsys.readouterr().out

    data = build_data(resolve(on(photos, tiny_config)), CPU)
    train_files = {path for path, _ in data.train.dataset.samples}
    val_files = {path for path, _ in data.val.dataset.samples}
    assert not train_files & val_files and len(train_files | val_files) == sum(COUNTS.values())
    assert val_files == {str(photos / row["path"]) for row in rows if row["split"] == "val"}

    again = train(on(photos, tiny_config, output_dir=str(run.parent / "again")))["config"].output_dir
    other_seed = train(on(photos, tiny_config, seed=1, output_dir=str(run.parent / "seed1")))["config"].output_dir
    assert (Path(again) / "split.csv").read_text() == (run / "split.csv").read_text()  # seeded
    assert (Path(other_seed) / "split.csv").read_text() != (run / "split.csv").read_text()


def test_evaluate_and_train_with_split_reuse_a_runs_split(photos, tiny_config, tmp_path):
    first = Path(train(on(photos, tiny_config))["config"].output_dir)
    write_images(photos / "cats", "cats", 10, start=20)  # more photos: a new hold-out would differ now
    weights = str(first / "model.pt")
    assert int(evaluate_run(weights, CPU)["confusion"].sum()) == 7  # exactly the run's 4 + 2 + 1 held-out images
    assert int(evaluate_run(weights, CPU, data=str(photos))["confusion"].sum()) == 7  # the same data, named again
    for label, count in (("cats", 3), ("dogs", 2), ("owls", 1)):
        write_images(tmp_path / "other" / label, label, count)
    assert int(evaluate_run(weights, CPU, data=str(tmp_path / "other"))["confusion"].sum()) == 6  # all of other data

    later = on(photos, tiny_config, split=str(first / "split.csv"), output_dir=str(first.parent / "later"))
    train(later)
    assert (first.parent / "later" / "split.csv").read_text() == (first / "split.csv").read_text()
    fresh = on(photos, tiny_config, output_dir=str(first.parent / "fresh"))
    train(fresh)
    assert held_out(first.parent / "fresh")["cats"] == 6  # without --split: the new 30 cats held out anew


def write_csv(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="") as file:
        csv.writer(file).writerows(rows)
    return path


@pytest.fixture
def labelled(tmp_path) -> tuple[Path, list[list[str]]]:
    """Images in one flat folder; only the CSV says which class each shows."""
    rows = [["path", "label"]]
    for label, count in COUNTS.items():
        rows += [[f"images/{path.name}", label] for path in write_images(tmp_path / "images", label, count)]
    return tmp_path, rows


def test_a_csv_of_paths_and_labels_trains_held_out_or_with_its_own_split(labelled, tiny_config):
    folder, rows = labelled
    run = Path(train(on(write_csv(folder / "labels.csv", rows), tiny_config))["config"].output_dir)
    assert held_out(run) == {"cats": 4, "dogs": 2, "owls": 1}

    chosen = {row[0] for row in rows[1::3]}  # the CSV's own split column decides, whatever the share
    with_split = [rows[0] + ["split"]] + [row + ["val" if row[0] in chosen else "train"] for row in rows[1:]]
    own_split = on(write_csv(folder / "labels_split.csv", with_split), tiny_config, output_dir=str(folder / "own"))
    data = build_data(resolve(own_split), CPU)
    assert {path for path, _ in data.val.dataset.samples} == {str(folder / name) for name in chosen}
    assert data.classes == ["cats", "dogs", "owls"]
    owl = data.train.dataset.samples[-1]
    assert "owls" in owl[0] and owl[1] == 2  # labels are class names, indexed in sorted order


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("missing file", "labels.csv line 3: .*gone.png does not exist"),
        ("unknown split", "labels.csv line 2: split 'test' must be train or val"),
        ("no label column", "lacks the column.s. label"),
    ],
)
def test_bad_csv_rows_are_one_clear_error_naming_the_line(labelled, tiny_config, capsys, fault, message):
    folder, rows = labelled
    if fault == "missing file":
        rows.insert(2, ["images/gone.png", "cats"])
    elif fault == "unknown split":
        rows = [rows[0] + ["split"]] + [row + ["test"] for row in rows[1:]]
    else:
        rows[0] = ["path", "class"]
    csv_file = write_csv(folder / "labels.csv", rows)
    with pytest.raises(DataError, match=message):
        build_data(resolve(on(csv_file, tiny_config, mean=[0.5] * 3, std=[0.5] * 3)), CPU)
    args = ["train", "--data", str(csv_file), "--device", "cpu", "--output-dir", tiny_config.output_dir]
    assert main(args) == DataError.exit_code
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not Path(tiny_config.output_dir).exists()


def test_split_is_refused_for_data_that_is_split_already(image_folder, tmp_path, tiny_config):
    split = write_csv(tmp_path / "split.csv", [["path", "label", "split"], ["train/cats/0.png", "cats", "val"]])
    for data in ("synthetic", image_folder):
        with pytest.raises(DataError, match="is split into train and val already; --split is for other data"):
            build_data(on(data, tiny_config, split=str(split), mean=[0.5] * 3, std=[0.5] * 3), CPU)


def test_a_class_without_validation_images_is_named_in_a_warning(tmp_path, tiny_config, capsys):
    write_images(tmp_path / "few" / "cats", "cats", 10)
    write_images(tmp_path / "few" / "dogs", "dogs", 2)  # round(0.2 x 2) is 0, but two images spare one
    write_images(tmp_path / "few" / "owls", "owls", 1)  # one image: it trains, none is left to validate
    train(on(tmp_path / "few", tiny_config))
    captured = capsys.readouterr()
    assert "cats 8/2, dogs 1/1, owls 1/0" in captured.out
    assert "warning: no validation images of owls: nothing measures them" in captured.err


def test_auto_class_weights_are_inverse_frequencies_with_mean_one():
    weights = inverse_frequency([0] * 6 + [1] * 3 + [2], 3)
    assert weights.tolist() == pytest.approx([1 / 3, 2 / 3, 2])
    assert inverse_frequency([0, 0, 2], 3).tolist() == pytest.approx([2 / 3, 0, 4 / 3])  # an absent class: 0


def test_the_training_loss_is_weighted_by_class(photos, tiny_config, watch):
    cfg = on(photos, tiny_config, class_weights="auto", batch_size=16, max_steps_per_epoch=1, init="kaiming")
{% if cookiecutter.use_mixup %}
    cfg = replace(cfg, mixup_alpha=0.0, cutmix_alpha=0.0)  # hard labels: the closed form below
{% endif %}
{% if cookiecutter.use_amp %}
    cfg = replace(cfg, precision="fp32")
{% endif %}
{% if cookiecutter.use_label_smoothing %}
    cfg = replace(cfg, label_smoothing=0.0)
{% endif %}
    logged = train(cfg)["metrics"][0]["train_loss"]
    (_, targets), logits = watch.batches[0], watch.logits[0]
    weights = inverse_frequency([0] * 16 + [1] * 8 + [2] * 4, 3)  # the training images per class
    assert logged == pytest.approx(F.cross_entropy(logits, targets, weight=weights).item(), rel=1e-5)
    assert logged != pytest.approx(F.cross_entropy(logits, targets).item(), rel=1e-3)


def drawn_classes(data, epochs: int) -> Counter:
    return Counter(int(target) for _ in range(epochs) for _, targets in data.train for target in targets)


def test_a_balanced_sampler_draws_every_class_equally_often(photos, tiny_config):
    balanced = build_data(resolve(on(photos, tiny_config, sampler="balanced")), CPU)
    drawn = drawn_classes(balanced, epochs=10)  # 280 draws of 16 cats, 8 dogs and 4 owls
    expected, sd = 280 / 3, (280 * 1 / 3 * 2 / 3) ** 0.5
    assert sum(drawn.values()) == 280 and all(abs(drawn[c] - expected) < 4 * sd for c in range(3)), drawn
    assert drawn_classes(build_data(resolve(on(photos, tiny_config)), CPU), epochs=10) == {0: 160, 1: 80, 2: 40}


@pytest.mark.parametrize("policy", ["none", "basic", *POLICY_OPS])
def test_each_augmentation_policy_changes_training_images_and_none_is_validation(policy):
    image = Image.fromarray(torch.randint(0, 256, (40, 48, 3), dtype=torch.uint8).numpy())
    transform = build_transform("folder", 32, None, None, Augmentation(policy, hflip=False))
    outputs = [transform(image) for _ in range(6)]
    validation = build_transform("folder", 32, None, None)(image)
    if policy == "none":
        assert all(torch.equal(output, validation) for output in outputs)
    else:
        assert any(not torch.equal(output, outputs[0]) for output in outputs[1:])
    used = {type(step) for step in transform.transforms}
    assert [name for name, op in POLICY_OPS.items() if op in used] == ([policy] if policy in POLICY_OPS else [])


def test_validation_never_augments(photos, tiny_config):
    cfg = resolve(on(photos, tiny_config, augment="autoaugment", hflip=True, random_erasing=1.0))
    data = build_data(cfg, CPU)
    assert torch.equal(data.val.dataset[0][0], data.val.dataset[0][0])
    assert not torch.equal(data.train.dataset[0][0], data.train.dataset[0][0])  # erasing alone, p=1, differs


def test_hflip_defaults_off_for_digits_and_is_saved_resolved(tiny_config):
    given = {"mean": [0.5] * 3, "std": [0.5] * 3}  # no statistics: nothing is downloaded
    assert resolve(replace(tiny_config, data="mnist", **given)).hflip is False
    assert resolve(replace(tiny_config, data="mnist", hflip=True, **given)).hflip is True
    assert resolve(replace(tiny_config, **given)).hflip is True
    run = Path(train(tiny_config)["config"].output_dir)
    assert "hflip: true" in (run / "config.yaml").read_text().splitlines()

    arrow = torch.zeros(3, 8, 8, dtype=torch.uint8)
    arrow[:, :, :2] = 255  # bright on the left: a mirror image is bright on the right
    for hflip, sides in ((False, {0}), (True, {0, 6})):
        transform = build_transform("synthetic", 8, None, None, Augmentation("none", hflip=hflip))
        bright = {int(transform(arrow)[0].mean(0).argmax()) for _ in range(30)}
        assert bright == sides, hflip


def test_random_erasing_erases_with_its_probability():
    white = torch.full((3, 16, 16), 255, dtype=torch.uint8)
    erasing = build_transform("synthetic", 16, None, None, Augmentation("none", hflip=False, random_erasing=1.0))
    assert all((erasing(white) == 0).any() for _ in range(10))
    keeping = build_transform("synthetic", 16, None, None, Augmentation("none", hflip=False, random_erasing=0.0))
    assert all((keeping(white) == 1).all() for _ in range(10))


def test_flip_tta_averages_the_softmax_of_each_image_and_its_mirror():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 5))
    images = torch.randn(2, 3, 4, 4)
    averaged = FlipAveraged(model)(images).exp()
    expected = (model(images).softmax(1) + model(images.flip(-1)).softmax(1)) / 2
    assert torch.allclose(averaged, expected, atol=1e-6) and not torch.allclose(averaged, model(images).softmax(1))


class LeftOrRight(torch.nn.Module):
    """Class scores that tell an image from its mirror image (a model trained two steps may not): class 0 scores
    how much brighter the left half is than the right half."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        half = images.shape[-1] // 2
        score = 50 * (images[..., :half].mean(dim=(1, 2, 3)) - images[..., -half:].mean(dim=(1, 2, 3)))
        return torch.nn.functional.pad(score[:, None], (0, 9))


def test_evaluate_and_predict_with_tta_use_the_mirror_images(tiny_config, tmp_path, capsys, monkeypatch):
    weights = str(train(tiny_config)["weights"])
    loading = inference.load_run
    monkeypatch.setattr(inference, "load_run", lambda *args, **kwargs: (*loading(*args, **kwargs)[:2], LeftOrRight()))
    plain, averaged = evaluate_run(weights, CPU), evaluate_run(weights, CPU, tta=True)
    assert plain["val_loss"] != pytest.approx(averaged["val_loss"], rel=0.01)

    image = tmp_path / "bright_left.png"
    pixels = torch.zeros(32, 32, 3, dtype=torch.uint8)
    pixels[:, :12] = 200
    Image.fromarray(pixels.numpy()).save(image)
    output = tmp_path / "tta.csv"
    assert main(["predict", "--weights", weights, str(image), "--tta", "--output", str(output)]) == 0
    cfg, classes, model = inference.load_run(weights, CPU)
    with Image.open(image) as opened:
        batch = build_transform(cfg.data, cfg.image_size, cfg.mean, cfg.std)(opened.convert("RGB"))[None]
    expected = ((model(batch).softmax(1) + model(batch.flip(-1)).softmax(1)) / 2)[0]
    assert not torch.allclose(expected, model(batch).softmax(1)[0], atol=1e-3)  # the mirror image counts
    row = read_rows(output)[0]
    assert float(row["probability_1"]) == pytest.approx(expected.max().item(), abs=1e-5)
    assert row["class_1"] == classes[int(expected.argmax())]

    no_flips = replace(tiny_config, hflip=False, output_dir=str(tmp_path / "no-flips"))
    unflipped = str(train(no_flips)["weights"])
    capsys.readouterr()
    assert main(["evaluate", "--weights", unflipped, "--tta", "--device", "cpu"]) == UserError.exit_code
    assert "trained with --no-hflip" in capsys.readouterr().err
    with pytest.raises(UserError, match="trained with --no-hflip"):
        evaluate_run(unflipped, CPU, tta=True)


def test_predict_on_folders_writes_top_k_predictions_and_skips_unreadable_files(tiny_config, tmp_path, capsys):
    weights = str(train(tiny_config)["weights"])
    photos = write_images(tmp_path / "photos", "cats", 2) + write_images(tmp_path / "photos" / "more", "owls", 2)
    (tmp_path / "photos" / "broken.png").write_bytes(b"not an image")
    (tmp_path / "photos" / "notes.txt").write_text("not an image, and not named like one: ignored")
    output = tmp_path / "predictions.csv"
    args = ["predict", "--weights", weights, str(tmp_path / "photos"), "--top-k", "3", "--output", str(output)]
    capsys.readouterr()
    assert main(args) == 0
    captured = capsys.readouterr()
    rows = read_rows(output)
    assert sorted(row["path"] for row in rows) == sorted(map(str, photos))
    assert list(rows[0]) == ["path", "class_1", "probability_1", "class_2", "probability_2", "class_3", "probability_3"]
    for row in rows:
        probabilities = [float(row[f"probability_{k}"]) for k in (1, 2, 3)]
        assert probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1 + 1e-5
        assert len({row[f"class_{k}"] for k in (1, 2, 3)}) == 3
    assert len(captured.out.strip().splitlines()) == 4  # one printed line per prediction
    assert "broken.png" in captured.err and "1 unreadable file(s) skipped" in captured.err

    for nothing_to_predict in (tmp_path / "photos" / "broken.png", tmp_path / "nowhere"):
        assert main(["predict", "--weights", weights, str(nothing_to_predict), "--output", str(output)]) == 3
    assert len(read_rows(output)) == 4  # failed predictions leave the earlier file as it was
