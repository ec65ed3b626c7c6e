{% if cookiecutter.task != "multi_label" %}
"""Data as people have it: one folder of class folders or a CSV, held out per class; imbalanced classes;
augmentation policies; test-time augmentation; predictions for whole folders."""

import csv
{% if cookiecutter.use_distributed %}
import functools
{% endif %}
import multiprocessing
import os
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from PIL import Image
{% if cookiecutter.use_distributed %}
from torch.utils.data.distributed import DistributedSampler
{% endif %}
from torchvision.transforms import v2

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.core.errors import DataError, UserError
from {{ cookiecutter.package_name }}.data.decoding import load_rgb
from {{ cookiecutter.package_name }}.data.layouts import hold_out, read_class_folders, read_csv
from {{ cookiecutter.package_name }}.data.loaders import DeviceLoader, build_data, start_epoch
from {{ cookiecutter.package_name }}.data.samplers import inverse_frequency
from {{ cookiecutter.package_name }}.data.transforms import Augmentation, build_transform
from {{ cookiecutter.package_name }}.serving import inference
from {{ cookiecutter.package_name }}.serving.inference import FlipAveraged, evaluate_run
from {{ cookiecutter.package_name }}.training.train import resolve, train

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
    train_files = {path for path, _ in data.train.dataset.dataset.samples}
    val_files = {path for path, _ in data.val.dataset.samples}
    assert not train_files & val_files and len(train_files | val_files) == sum(COUNTS.values())
    assert val_files == {str(photos / row["path"]) for row in rows if row["split"] == "val"}

    again = train(on(photos, tiny_config, output_dir=str(run.parent / "again")))["config"].output_dir
    other_seed = train(on(photos, tiny_config, seed=1, output_dir=str(run.parent / "seed1")))["config"].output_dir
    assert (Path(again) / "split.csv").read_text() == (run / "split.csv").read_text()  # seeded
    assert (Path(other_seed) / "split.csv").read_text() != (run / "split.csv").read_text()


def test_a_run_that_raises_leaves_no_data_loading_workers_behind(photos, tiny_config):
    """tune's pruned trials raise out of train(), and the traceback still refers to their loaders: the persistent
    workers stop anyway, or every such trial would leave its processes running."""
    before = set(multiprocessing.active_children())

    def pruned(rows):
        raise RuntimeError("pruned")

    with pytest.raises(RuntimeError) as caught:
        train(on(photos, tiny_config, num_workers=2, epochs=2), after_epoch=pruned)
    assert any(entry.name == "train" for entry in caught.traceback)  # train's frame, and so its loaders, kept
    assert set(multiprocessing.active_children()) - before == set()


def test_a_worker_killed_while_the_loaders_stop_leaves_no_other_workers_running(photos, tiny_config, monkeypatch):
    """torch reports a worker killed meanwhile as it stops a loader's workers: the other loader still stops its, and
    the run's own error is the one raised."""
    stop, stopped = DeviceLoader.stop_workers, []

    def pruned(rows):
        raise ValueError("pruned")

    def killed_while_stopping(loader):
        stopped.append(loader)
        stop(loader)
        if len(stopped) == 1:
            raise RuntimeError("DataLoader worker (pid 1) is killed by signal: Killed.")

    monkeypatch.setattr(DeviceLoader, "stop_workers", killed_while_stopping)
    before = set(multiprocessing.active_children())
    with pytest.raises(ValueError, match="pruned"):
        train(on(photos, tiny_config, num_workers=2, epochs=2), after_epoch=pruned)
    assert len(stopped) == 2 and set(multiprocessing.active_children()) - before == set()


LIBRARY_USE = """
import torch
from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.data.loaders import build_data
from {{ cookiecutter.package_name }}.training.train import resolve

config = resolve(TrainConfig(data="synthetic", num_workers=2, device="cpu", batch_size=8))
data = build_data(config, torch.device("cpu"))  # held to the end, as a notebook holds it
next(iter(data.train))
print("read a batch", flush=True)
"""


def test_a_script_that_builds_loaders_outside_train_exits_when_it_ends(tmp_path):
    """Loaders used as a library (a notebook, a script): their workers ignore SIGTERM, the way Python's exit stops
    daemon children, so the process must stop them itself or wait for them forever."""
    package = Path({{ cookiecutter.package_name }}.__file__).parent.parent
    env = {**os.environ, "PYTHONPATH": str(package), "OMP_NUM_THREADS": "1"}
    script, errors = [sys.executable, "-c", LIBRARY_USE], tmp_path / "stderr.txt"
    with (
        errors.open("w") as stderr,
        subprocess.Popen(script, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True) as process,
    ):
        said = process.stdout.readline()  # the batch is read: what is left is Python's exit
        try:  # the bound only turns a hang into a failure: stopping the workers takes well under a second
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"the script read its batch ({said!r}) but never exited: {errors.read_text()[-2000:]}")
    assert process.returncode == 0 and said == "read a batch\n", errors.read_text()[-3000:]  # a file: never a full pipe


def test_evaluate_and_train_with_split_reuse_a_runs_split(photos, tiny_config, tmp_path):
    first = Path(train(on(photos, tiny_config))["config"].output_dir)
    write_images(photos / "cats", "cats", 10, start=20)  # more photos: a new hold-out would differ now
    weights = str(first / "model.pt")
    assert int(evaluate_run(weights, CPU)["confusion"].sum()) == 7  # exactly the run's 4 + 2 + 1 held-out images
    assert int(evaluate_run(weights, CPU, data=str(photos))["confusion"].sum()) == 7  # the same data, named again
    assert int(evaluate_run(weights, CPU, data=f"{photos}/../photos")["confusion"].sum()) == 7  # spelled otherwise
    for label, count in (("cats", 3), ("dogs", 2), ("owls", 1)):
        write_images(tmp_path / "other" / label, label, count)
    assert int(evaluate_run(weights, CPU, data=str(tmp_path / "other"))["confusion"].sum()) == 6  # all of other data

    later = on(photos, tiny_config, split=str(first / "split.csv"), output_dir=str(first.parent / "later"))
    train(later)
    assert (first.parent / "later" / "split.csv").read_text() == (first / "split.csv").read_text()
    fresh = on(photos, tiny_config, output_dir=str(first.parent / "fresh"))
    train(fresh)
    assert held_out(first.parent / "fresh")["cats"] == 6  # without --split: the new 30 cats held out anew


def test_a_hold_out_rounds_each_class_share_to_the_nearest_image():
    rows = [(f"{label}/{i}.png", label, None) for label, count in (("cats", 8), ("dogs", 7)) for i in range(count)]
    held = Counter(label for _, label, split in hold_out(rows, 0.2, seed=0) if split == "val")
    assert held == {"cats": 2, "dogs": 1}  # round(1.6) and round(1.4), not floored


def test_hidden_files_beside_the_images_are_not_images(photos):
    (photos / "cats" / "._cats_0.png").write_bytes(b"\x00\x05\x16\x07")  # what macOS copies beside each file
    assert len(read_class_folders(photos)) == sum(COUNTS.values())


def test_overwrite_holds_out_anew_from_the_data_as_it_is_now(photos, tiny_config):
    run = Path(train(on(photos, tiny_config))["config"].output_dir)
    write_images(photos / "cats", "cats", 10, start=20)  # more photos since the first run
    train(on(photos, tiny_config, overwrite=True))
    assert len(read_rows(run / "split.csv")) == sum(COUNTS.values()) + 10 and held_out(run)["cats"] == 6


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
    owl = data.train.dataset.dataset.samples[-1]
    assert "owls" in owl[0] and owl[1] == 2  # labels are class names, indexed in sorted order


def test_a_csv_saved_with_a_byte_order_mark_keeps_its_first_column(labelled):
    folder, rows = labelled
    with open(folder / "excel.csv", "w", newline="", encoding="utf-8-sig") as file:  # as Excel saves "UTF-8 CSV"
        csv.writer(file).writerows(rows)
    assert [row[:2] for row in read_csv(folder / "excel.csv", folder)] == [tuple(row) for row in rows[1:]]


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("missing file", "labels.csv line 3: .*gone.png does not exist"),
        ("unknown split", "labels.csv line 2: split 'test' must be train or val"),
        ("no label column", "lacks the column.s. label"),
        ("empty label", "labels.csv line 2: path and label must both be given"),
        ("blank line", "labels.csv line 4: .*gone.png does not exist"),  # lines as the file has them
        ("repeated image", "labels.csv lines 2 and 37 list ./images/cats_0.png; list it once"),
        ("line break in a label", "class 'tabby.ncat' holds a control character"),
        ("terminal escape in a label", "class '.x1b.31mred' holds a control character"),
    ],
)
def test_bad_csv_rows_are_one_clear_error_naming_the_line(labelled, tiny_config, capsys, fault, message):
    folder, rows = labelled
    if fault == "missing file":
        rows.insert(2, ["images/gone.png", "cats"])
    elif fault == "empty label":
        rows[1][1] = " "
    elif fault == "blank line":
        rows[2:2] = [[], ["images/gone.png", "cats"]]
    elif fault == "repeated image":
        rows.append(["./" + rows[1][0], "dogs"])  # the same image, named another way, with another label
    elif fault == "line break in a label":
        rows[1][1] = "tabby\ncat"
    elif fault == "terminal escape in a label":
        rows[1][1] = "\x1b[31mred"
    elif fault == "unknown split":
        rows = [rows[0] + ["split"]] + [row + ["test"] for row in rows[1:]]
    else:
        rows[0] = ["path", "class"]
    csv_file = write_csv(folder / "labels.csv", rows)
    with pytest.raises(DataError, match=message):
        build_data(resolve(on(csv_file, tiny_config, mean=[0.5] * 3, std=[0.5] * 3)), CPU)
    args = ["train", "--data", str(csv_file), "--device", "cpu", "--output-dir", tiny_config.output_dir]
    assert main(args) == DataError.exit_code
    err = capsys.readouterr().err  # beside the error line, at most a notice (fp16 falls back to bf16 on a CPU)
    assert len([line for line in err.splitlines() if line.startswith("error")]) == 1 and "Traceback" not in err, err
    assert not Path(tiny_config.output_dir).exists()


def test_class_names_with_spaces_survive_the_whole_run(labelled, tiny_config, tmp_path, capsys):
    folder, rows = labelled
    names = {"cats": "tabby cat", "dogs": "golden retriever", "owls": "barn owl"}
    csv_file = write_csv(folder / "labels.csv", [rows[0]] + [[path, names[label]] for path, label in rows[1:]])
    run = Path(train(on(csv_file, tiny_config, model="small_cnn"))["config"].output_dir)  # its layer fc below
    assert (run / "classes.txt").read_text().splitlines() == sorted(names.values())
    weights, photo = str(run / "model.pt"), rows[1][0]
    assert main(["evaluate", "--weights", weights, "--device", "cpu"]) == 0
    assert main(["predict", "--weights", weights, str(folder / photo), "--output", str(tmp_path / "p.csv")]) == 0
    assert read_rows(tmp_path / "p.csv")[0]["class_1"] in names.values()
    assert main(["features", "--weights", weights, "--layer", "fc", "--device", "cpu"]) == 0


def test_an_image_linked_into_a_second_class_folder_is_one_error_and_no_run(photos, tiny_config, capsys):
    """`ln -s ../dogs/dogs_0.png cats/` or a hard link: the same pixels labelled cats and dogs would train both."""
    args = ["train", "--data", str(photos), "--device", "cpu", "--output-dir", tiny_config.output_dir]
    for link in ("symlink_to", "hardlink_to"):
        getattr(photos / "cats" / "linked.png", link)(photos / "dogs" / "dogs_0.png")
        assert main(args) == DataError.exit_code
        expected = f"error: --data {photos}: cats/linked.png and dogs/dogs_0.png are the same image; keep one"
        assert capsys.readouterr().err.splitlines() == [expected]
        assert not Path(tiny_config.output_dir).exists()
        (photos / "cats" / "linked.png").unlink()


def test_class_folders_whose_names_start_or_end_with_a_space_are_refused(photos, tiny_config):
    (photos / "owls").rename(photos / "owls ")  # split.csv cells are read back stripped: it could not come back
    with pytest.raises(DataError, match="class 'owls ' starts or ends with a space; rename it"):
        build_data(on(photos, tiny_config, mean=[0.5] * 3, std=[0.5] * 3), CPU)


def test_an_image_that_pillow_cannot_decode_is_named(tmp_path, monkeypatch):
    def truncated_chunk(*args, **kwargs):
        raise ValueError("Truncated gAMA chunk")  # what Pillow raises for some damaged PNGs

    monkeypatch.setattr(Image, "open", truncated_chunk)
    with pytest.raises(DataError, match="cannot read image .*x.png .ValueError.; delete or replace the file"):
        load_rgb(str(tmp_path / "x.png"))


def test_a_class_folder_name_that_is_not_utf8_is_one_error(photos, tiny_config):
    os.rename(os.fsencode(photos / "owls"), os.fsencode(photos) + b"/caf\xe9")  # Latin-1, as old archives hold it
    with pytest.raises(DataError, match="class 'caf.udce9' is not valid UTF-8 text; rename it"):
        build_data(on(photos, tiny_config, mean=[0.5] * 3, std=[0.5] * 3), CPU)


def test_an_image_too_large_to_open_safely_is_named_and_predict_skips_it(photos, tiny_config, tmp_path, monkeypatch):
    run = Path(train(on(photos, tiny_config))["config"].output_dir)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # a 16 x 16 image stands in for a decompression bomb
    big = photos / "cats" / "cats_0.png"
    with pytest.raises(DataError, match=f"image {big} has more pixels than Pillow opens safely"):
        load_rgb(str(big))
    Image.new("RGB", (8, 8)).save(tmp_path / "small.png")
    predict = ["predict", "--weights", str(run / "model.pt"), str(big), str(tmp_path / "small.png")]
    assert main([*predict, "--output", str(tmp_path / "p.csv")]) == 0
    assert [row["path"] for row in read_rows(tmp_path / "p.csv")] == [str(tmp_path / "small.png")]


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
    training = data.train.dataset
    first = training[0][0]
    assert torch.equal(first, training[0][0])  # an image's augmentation: from the seed, the epoch and its index
    training.epoch += 1
    assert not torch.equal(first, training[0][0])  # erasing alone, p=1, differs


class RecordedOrder(torch.utils.data.Sampler):
    """A loader's sampler that keeps the indices it hands out: in the main process, whichever worker loads them."""

    def __init__(self, sampler, order: list):
        self.sampler, self.order = sampler, order

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        for index in self.sampler:
            self.order.append(index)
            yield index


def epochs_seen(cfg, epochs: int = 2) -> list[tuple[list[int], dict[int, torch.Tensor]]]:
    """Each epoch of a real training loader, as train() starts them: the order of its images, and each image as its
    batch brought it (with batches of one image, an image's augmentation is its own)."""
    loader, order, seen = build_data(cfg, CPU).train, [], []
    loader.batch_sampler.sampler = RecordedOrder(loader.batch_sampler.sampler, order)
    try:
        for epoch in range(1, epochs + 1):
            start_epoch(loader, epoch)
            order.clear()
            images = [image for batch, _ in loader for image in batch]
            seen.append((list(order), dict(zip(order, images, strict=True))))
    finally:
        loader.stop_workers()
    return seen


def test_a_real_loader_orders_and_augments_each_epoch_anew_and_a_rerun_repeats_both(photos, tiny_config):
    """Persistent workers outlive epoch 1: they must see epoch 2 begin, or they augment as in epoch 1."""
    cfg = resolve(on(photos, tiny_config, batch_size=1, num_workers=1, augment="trivialaugment"))
    seen = epochs_seen(cfg)
    (order_1, images_1), (order_2, images_2) = seen
    assert sorted(order_1) == sorted(order_2) == list(range(28)) and order_1 != order_2  # every image, reshuffled
    assert all(not torch.equal(images_1[index], images_2[index]) for index in order_1)
    rerun = epochs_seen(cfg)  # new workers, the same seed
    for (order, images), (order_again, images_again) in zip(seen, rerun, strict=True):
        assert order_again == order and all(torch.equal(images[index], images_again[index]) for index in order)
{% if cookiecutter.use_distributed %}


def test_under_ddp_a_real_loader_gives_the_ranks_disjoint_shards_augmented_anew_each_epoch(
    photos, tiny_config, monkeypatch
):
    # global batch 2: one image a batch on each rank, so that an image's augmentation is its own
    cfg = resolve(on(photos, tiny_config, batch_size=2, num_workers=1, augment="trivialaugment"))
    monkeypatch.setattr({{ cookiecutter.package_name }}.data.samplers, "is_distributed", lambda: True)
    monkeypatch.setattr({{ cookiecutter.package_name }}.data.samplers, "world_size", lambda: 2)
    monkeypatch.setattr({{ cookiecutter.package_name }}.data.loaders, "world_size", lambda: 2)
    seen = []
    for rank in range(2):  # each rank's loader, as its process builds it (no process group: rank and world given)
        sampler = functools.partial(DistributedSampler, num_replicas=2, rank=rank)
        monkeypatch.setattr({{ cookiecutter.package_name }}.data.samplers, "DistributedSampler", sampler)
        seen.append(epochs_seen(cfg))
    shards = [[order for order, _ in epochs] for epochs in seen]
    for epoch in range(2):
        assert sorted(shards[0][epoch] + shards[1][epoch]) == list(range(28))  # 14 images each, none on both
    assert shards[0][0] != shards[0][1] and shards[1][0] != shards[1][1]  # set_epoch: a new shuffle each epoch
    # every image augmented anew in epoch 2, on whichever rank it landed
    images = [{index: image for epochs in seen for index, image in epochs[epoch][1].items()} for epoch in range(2)]
    assert all(not torch.equal(images[0][index], images[1][index]) for index in range(28))
{% endif %}


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


def test_random_erasing_fills_with_the_mean_colour_after_normalisation():
    grey = torch.full((3, 16, 16), 204, dtype=torch.uint8)  # 0.8 in [0, 1]: 1.2 once normalised below
    transform = build_transform("synthetic", 16, [0.5] * 3, [0.25] * 3, Augmentation("none", False, 1.0))
    for _ in range(5):
        image = transform(grey)
        erased = image == 0  # 0 after normalisation is the mean colour; erased before it, it would be -2
        assert erased.any() and torch.allclose(image[~erased], torch.tensor(1.2))


def test_autoaugment_takes_the_cifar10_policy_on_cifar10_and_imagenets_elsewhere():
    for source, policy in (("cifar10", v2.AutoAugmentPolicy.CIFAR10), ("folder", v2.AutoAugmentPolicy.IMAGENET)):
        transform = build_transform(source, 32, None, None, Augmentation("autoaugment"))
        assert [step.policy for step in transform.transforms if isinstance(step, v2.AutoAugment)] == [policy]


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
{% endif %}
