import csv
import json
import types
from dataclasses import replace

import pytest
import torch
import yaml
from conftest import NEUTRAL, plain_runtime
from torch import nn

from {{ cookiecutter.package_name }}.config import TrainConfig, load_config_file, make_config
from {{ cookiecutter.package_name }}.core.errors import UserError
{% if cookiecutter.task == "multi_label" %}
from {{ cookiecutter.package_name }}.data.multi_label import SyntheticTags as Synthetic
{% else %}
from {{ cookiecutter.package_name }}.data.sources import SyntheticImages as Synthetic
{% endif %}
from {{ cookiecutter.package_name }}.models import SmallCNN, build_model
{% if cookiecutter.task == "multi_label" %}
from {{ cookiecutter.package_name }}.reports.metrics import MONITOR
{% else %}
from {{ cookiecutter.package_name }}.reports.metrics import MONITOR, confusion_matrix, per_class_report
{% endif %}
from {{ cookiecutter.package_name }}.training import engine
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.optim import L1Penalty, build_optimizer, warmup_cosine
from {{ cookiecutter.package_name }}.training.train import train


def read_metrics(run_dir):
    with open(run_dir / "metrics.csv") as file:
        return list(csv.DictReader(file))


def test_a_run_writes_resolved_config_metrics_and_weights(tiny_config, tmp_path):
    result = train(replace(tiny_config, epochs=2))
    run = tmp_path / "run"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["image_size"] == 32 and len(saved["mean"]) == 3 and saved["lr"] == 0.05
    assert TrainConfig(**load_config_file(run / "config.yaml")) == result["config"]
    rows = read_metrics(run)
    assert {"epoch", "train_loss", "train_acc", "val_loss", "val_acc", "lr", "seconds"} <= set(rows[0])
    assert [r["epoch"] for r in rows] == ["1", "2"]
    assert all(torch.isfinite(torch.tensor(float(r["train_loss"]))) for r in rows)
    assert (run / "classes.txt").read_text().splitlines() == Synthetic.classes
    state = torch.load(run / "model.pt", weights_only=True)
    assert set(state) == set(build_model(tiny_config.model, len(Synthetic.classes)).state_dict())
    answers = json.loads((run / "answers.json").read_text())["cookiecutter"]  # what generated this repo
    assert answers["package_name"] == "{{ cookiecutter.package_name }}"


def test_validation_capped_by_max_steps_per_epoch_says_so(tiny_config, capsys):
    """per_class.csv's supports then sum to fewer images than the validation set holds: one batch's here."""
    import re

    small = replace(tiny_config, model="small_cnn")  # whatever the render's default: seconds, not minutes
    out = train(replace(small, max_steps_per_epoch=1))["weights"].parent
    said = re.search(r"validation: the first 1 of (\d+) batches \(--max-steps-per-epoch\)", capsys.readouterr().out)
    assert said and int(said[1]) > 1
    with open(out / "per_class.csv", newline="") as file:
        supports = [int(row["support"]) for row in csv.DictReader(file) if row["class"] not in AVERAGES]
{% if cookiecutter.task == "multi_label" %}
    first_batch = Synthetic(512, seed=tiny_config.seed + 1).targets[: tiny_config.batch_size]  # the val split's
    assert supports == first_batch.sum(0).long().tolist()  # each class's positive labels among those images
{% else %}
    assert sum(supports) == tiny_config.batch_size
{% endif %}
    train(replace(small, max_steps_per_epoch=int(said[1]), overwrite=True))
    assert "validation: the first" not in capsys.readouterr().out


AVERAGES = {"micro avg", "macro avg", "{{ 'samples avg' if cookiecutter.task == 'multi_label' else 'weighted avg' }}"}


def test_the_last_line_names_the_file_that_holds_each_figure(tiny_config, tmp_path, capsys, monkeypatch):
    """Epoch 1 validates best: its figure belongs to {{ 'best.pt' if cookiecutter.use_checkpointing else 'no file' }}, model.pt's to epoch 2."""
    from {{ cookiecutter.package_name }}.training import train as train_module

    epochs_done, evaluate = [], train_module.evaluate
    scripted = lambda *args: evaluate(*args) | {MONITOR: 0.25 if epochs_done else 0.75}  # noqa: E731
    monkeypatch.setattr(train_module, "evaluate", scripted)
    train(replace(tiny_config, epochs=2), after_epoch=epochs_done.append)
    run = tmp_path / "run"
    line, final = capsys.readouterr().out.splitlines()[-1], f"last {MONITOR} 0.2500 (epoch 2): {run / 'model.pt'}"
{% if cookiecutter.use_checkpointing %}
    assert line.endswith(f"best {MONITOR} 0.7500 (epoch 1): {run / 'best.pt'}; {final}"), line
    assert torch.load(run / "best.pt", weights_only=True)["epoch"] == 1
    last = torch.load(run / "last.pt", weights_only=True)
    assert last["epoch"] == 2
    model = torch.load(run / "model.pt", weights_only=True)
    assert all(torch.equal(model[name], value) for name, value in last["model"].items())
{% else %}
    assert line.endswith(f"best {MONITOR} 0.7500 (epoch 1; no file keeps its weights); {final}"), line
{% endif %}


def test_same_seed_gives_identical_metrics(tiny_config, tmp_path):
    first = train(replace(tiny_config, output_dir=str(tmp_path / "a")))["metrics"]
    second = train(replace(tiny_config, output_dir=str(tmp_path / "b")))["metrics"]
    strip = [{k: v for k, v in row.items() if k != "seconds"} for row in first + second]
    assert strip[: len(first)] == strip[len(first) :]


def test_lr_follows_the_schedule_per_epoch(tiny_config):
    rows = train(replace(tiny_config, epochs=4, warmup_epochs=1, lr=0.1, **NEUTRAL))["metrics"]  # no trick's own rates
    expected = [0.1 * warmup_cosine(epoch, 1, 4) for epoch in range(4)]
    assert [row["lr"] for row in rows] == pytest.approx(expected)
    assert expected[0] == pytest.approx(0.05) and expected[1] == pytest.approx(0.1)


def test_config_file_is_overridden_by_flags(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("epochs: 7\nbatch_size: 8\nlr: 1\n")
    cfg = make_config({"batch_size": 4}, str(path))
    assert (cfg.epochs, cfg.batch_size, cfg.lr) == (7, 4, 1.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [("epochs: [1\n", "not valid YAML"), ("epoch: 3\n", "unknown keys"), ("epochs: many\n", "must be int")],
)
def test_bad_config_files_are_explained(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        make_config({}, str(path))


def test_no_weight_decay_on_biases_and_norm_weights(tiny_config):
    model = SmallCNN(10)
    optimizer = build_optimizer(model, replace(tiny_config, lr=0.1, weight_decay=0.1))
    for group in optimizer.param_groups:
        assert all((p.ndim <= 1) == (group["weight_decay"] == 0) for p in group["params"])
    assert sum(len(group["params"]) for group in optimizer.param_groups) == len(list(model.parameters()))
{% if cookiecutter.task != "multi_label" %}


def test_report_from_a_confusion_matrix():
    targets, predictions = torch.tensor([0, 0, 1, 1, 1, 2]), torch.tensor([0, 1, 1, 1, 2, 2])
    matrix = confusion_matrix(targets, predictions, 3)
    assert matrix.sum() == len(targets) and matrix.tolist() == [[1, 1, 0], [0, 2, 1], [0, 0, 1]]
    rows = {row["class"]: row for row in per_class_report(matrix, ["a", "b", "c"])}
    assert rows["a"]["precision"] == 1 and rows["a"]["recall"] == 0.5 and rows["b"]["f1"] == pytest.approx(2 / 3)
    assert rows["weighted avg"]["recall"] == pytest.approx((matrix.trace() / matrix.sum()).item())  # micro-F1 = acc
    assert rows["macro avg"]["support"] == 6
{% endif %}


def test_without_a_terminal_a_long_epoch_prints_progress_lines(tiny_config, capsys, monkeypatch):
    monkeypatch.setattr(engine, "PROGRESS_SECONDS", 0)  # as if each step took longer than the interval
    train(replace(tiny_config, max_steps_per_epoch=3))
    err = capsys.readouterr().err
    lines = [line.strip() for line in err.splitlines() if line.startswith("  train ")]
    assert [line.split(",")[0] for line in lines] == ["train 1/3 steps (33 %)", "train 2/3 steps (67 %)"]
    assert all(line.endswith(" s to go") for line in lines)  # with the time left
    assert "  val 2/3 steps (67 %)" in err  # a long validation is not silent either


def test_l1_adds_the_hand_computed_penalty_of_trainable_weights_only():
    """Kernels and matrices that train; not biases, not normalisation parameters, not fixed weights."""
    model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 4))
    model[0].weight.requires_grad_(False)  # not trained: not penalised
    criterion = L1Penalty(nn.CrossEntropyLoss(), model, 0.01)
    logits, targets = torch.randn(5, 4), torch.randint(0, 4, (5,))
    expected = nn.functional.cross_entropy(logits, targets) + 0.01 * model[3].weight.abs().sum()
    assert torch.allclose(criterion(logits, targets), expected)


def test_a_strong_l1_shrinks_the_weights_and_is_logged(tiny_config, tmp_path):
    def weight_sum(result) -> float:
        return sum(p.abs().sum().item() for p in result["model"].parameters() if p.ndim > 1)

    plain = train(replace(tiny_config, max_steps_per_epoch=4, output_dir=str(tmp_path / "plain")))
    shrunk = train(replace(tiny_config, max_steps_per_epoch=4, l1=0.05))
    assert weight_sum(shrunk) < weight_sum(plain)
    assert "l1_penalty" not in plain["metrics"][0] and shrunk["metrics"][0]["l1_penalty"] > 0


def test_progress_shows_as_a_bar_in_a_terminal_and_as_lines_elsewhere(capsys, monkeypatch):
    from tqdm import tqdm

    loader = [torch.tensor([i]) for i in range(5)]
    monkeypatch.setattr(engine.sys.stderr, "isatty", lambda: True)
    bar = engine._batches(loader, 3, "epoch 1 train")
    assert isinstance(bar, tqdm) and bar.total == 3 and bar.desc.startswith("epoch 1 train") and bar.leave is False
    assert [int(batch) for batch in bar] == [0, 1, 2]
    assert engine._batches(loader, None, "val").total == 5 and engine._batches(loader, 9, "val").total == 5
    monkeypatch.setattr(engine.sys.stderr, "isatty", lambda: False)
    lines = engine._batches(loader, 4, "val")
    assert isinstance(lines, engine.ProgressLines) and len(lines) == 4 and [int(b) for b in lines] == [0, 1, 2, 3]
    monkeypatch.setattr(engine.sys.stderr, "isatty", lambda: True)  # not even in a terminal
    quiet = engine._batches(loader, 2, "val", shown=False)  # a process other than the main one
    assert isinstance(quiet, tqdm) and quiet.disable is True and quiet.total == 2 and [int(b) for b in quiet] == [0, 1]


def test_synthetic_splits_have_their_sizes_and_seeds():
    from {{ cookiecutter.package_name }}.data import sources

    train_set, val_set = (sources._open_fixed("synthetic", "unused", split, seed=5) for split in ("train", "val"))
    assert (len(train_set), len(val_set)) == (sources.SYNTHETIC_TRAIN, sources.SYNTHETIC_VAL) == (2048, 512)
    assert torch.equal(train_set.images, Synthetic(2048, seed=5).images)
    assert torch.equal(val_set.images, Synthetic(512, seed=6).images)  # its own stream, the seed's next


def test_a_downloadable_dataset_goes_into_data_root(monkeypatch):
    from {{ cookiecutter.package_name }}.data import sources

    calls = []
    dataset = types.SimpleNamespace(classes=["zero", "one"], targets=[0, 1])
    opened = lambda *args, **kwargs: calls.append((args, kwargs)) or dataset  # noqa: E731
    monkeypatch.setitem(sources.DOWNLOADABLE, "mnist", opened)
{% if cookiecutter.task == "multi_label" %}
    assert sources._open_fixed("mnist", "/somewhere/data", "train", 0).dataset is dataset  # one label each
    assert sources._open_fixed("mnist", "/somewhere/data", "val", 0).dataset is dataset
{% else %}
    assert sources._open_fixed("mnist", "/somewhere/data", "train", 0) is dataset
    assert sources._open_fixed("mnist", "/somewhere/data", "val", 0) is dataset
{% endif %}
    assert calls == [(("/somewhere/data",), {"train": True, "download": True})] + [
        (("/somewhere/data",), {"train": False, "download": True})
    ]


def test_loaders_follow_the_config_transforms_weights_and_memory_pinning():
    from torchvision.transforms import v2

    from {{ cookiecutter.package_name }}.core.runtime import seed_worker
    from {{ cookiecutter.package_name }}.data.loaders import build_data
{% if cookiecutter.task == "multi_label" %}
    from {{ cookiecutter.package_name }}.data.samplers import negatives_per_positive
{% else %}
    from {{ cookiecutter.package_name }}.data.samplers import inverse_frequency
{% endif %}

    base = TrainConfig(data="synthetic", image_size=32, batch_size=4, num_workers=0, mean=[0.5] * 3, std=[0.25] * 3)
    weighted = {{ '{"pos_weight": "auto"}' if cookiecutter.task == "multi_label" else '{"class_weights": "auto"}' }}
    on = build_data(replace(base, hflip=True, random_erasing=0.5, **weighted), torch.device("cpu"))
    kinds = [type(step) for step in on.train.dataset.transform.transforms]
    assert v2.RandomHorizontalFlip in kinds
{% if cookiecutter.task == "multi_label" %}
    assert torch.equal(on.class_weights, negatives_per_positive(on.train.dataset.targets))
{% else %}
    assert torch.equal(on.class_weights, inverse_frequency(on.train.dataset.targets, 10))
{% endif %}
    assert not on.train.pin_memory and not on.val.pin_memory
    erasing = [step for step in on.train.dataset.transform.transforms if isinstance(step, v2.RandomErasing)]
    assert len(erasing) == 1 and erasing[0].p == 0.5
    assert v2.RandomHorizontalFlip not in [type(step) for step in on.val.dataset.transform.transforms]
    off = build_data(replace(base, hflip=False), torch.device("cuda"))  # built, never iterated
    kinds = [type(step) for step in off.train.dataset.transform.transforms]
    assert v2.RandomHorizontalFlip not in kinds and v2.RandomErasing not in kinds
    assert off.class_weights is None and off.train.pin_memory and off.val.pin_memory
    # workers seed numpy and random from torch's per-worker seed (their tests start real workers: slow)
    assert on.train.worker_init_fn is seed_worker and on.val.worker_init_fn is seed_worker


def test_photos_are_validated_on_a_centre_crop_of_the_image_resized_to_8_7_of_it():
    from torchvision.transforms import v2

    from {{ cookiecutter.package_name }}.data.transforms import build_transform

    sizes = {}
    for source in ("some/folder", "synthetic"):
        steps = build_transform(source, 224, None, None).transforms
        resize = next(step for step in steps if isinstance(step, v2.Resize))
        sizes[source] = resize.size
    assert sizes == {"some/folder": [256], "synthetic": [224]}


def test_the_balanced_sampler_draws_from_the_loaders_generator_only():
    from {{ cookiecutter.package_name }}.data.samplers import BalancedSampler

{% if cookiecutter.task == "multi_label" %}
    targets = torch.eye(2)[[0] * 6 + [1] * 2]  # multi-hot rows
{% else %}
    targets = [0] * 6 + [1] * 2
{% endif %}
    draws = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        draws.append(list(BalancedSampler(targets, torch.Generator().manual_seed(7))))
    assert draws[0] == draws[1] and len(draws[0]) == 8


def test_the_data_summary_lists_the_classes_and_counts_the_rest(tmp_path, capsys):
    from torch.utils.data import DataLoader

    from {{ cookiecutter.package_name }}.data.loaders import Data, describe_data

    class Labels(torch.utils.data.Dataset):
        def __init__(self, targets, classes):
            self.targets, self.classes = targets, classes

{% if cookiecutter.task == "multi_label" %}
    few, two = Labels(torch.eye(2)[[0, 0, 1]], ["cat", "dog"]), Labels(torch.eye(2), ["cat", "dog"])
{% else %}
    few, two = Labels([0, 0, 1], ["cat", "dog"]), Labels([0, 1], ["cat", "dog"])
{% endif %}
    describe_data(Data(DataLoader(few), DataLoader(two), ["cat", "dog"]), tmp_path)
    assert capsys.readouterr().out == "2 classes (train/val images): cat 2/1, dog 1/1\n"
    names = [f"c{i:02}" for i in range(23)]
    many = Labels({{ "torch.eye(23)" if cookiecutter.task == "multi_label" else "list(range(23))" }}, names)
    describe_data(Data(DataLoader(many), DataLoader(many), names), tmp_path)
    out = capsys.readouterr().out
    assert out.startswith("23 classes (train/val images): c00 1/1, ") and out.endswith("c19 1/1 and 3 more\n")


def test_data_that_leaves_a_split_empty_is_refused_naming_it(tmp_path):
    from {{ cookiecutter.package_name }}.core.errors import DataError
    from {{ cookiecutter.package_name }}.data.sources import open_datasets

    for name in ("a.png", "b.png"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "labels.csv").write_text("path,label{{ 's' if cookiecutter.task == 'multi_label' }},split\na.png,cat,train\nb.png,dog,train\n")
    cfg = TrainConfig(data=str(tmp_path / "labels.csv"))
    with pytest.raises(DataError) as raised:
        open_datasets(cfg, ("train", "val"), training=True)
    assert str(raised.value) == f"--data {cfg.data} leaves no val images; give each class two images or more"


def test_normalisation_is_the_given_one_that_of_pretrained_weights_or_the_datas_own(tmp_path):
    from {{ cookiecutter.package_name }}.data.transforms import compute_mean_std
    from {{ cookiecutter.package_name }}.models import IMAGENET_MEAN, IMAGENET_STD
    from {{ cookiecutter.package_name }}.training.train import resolve

    run = str(tmp_path / "run")
    given = resolve(
        TrainConfig(model="resnet18", mean=[0.1, 0.2, 0.3], std=[1.0, 2.0, 3.0], pretrained=True, output_dir=run)
    )
    assert (given.mean, given.std) == ([0.1, 0.2, 0.3], [1.0, 2.0, 3.0])
    pretrained = resolve(TrainConfig(model="resnet18", pretrained=True, output_dir=run))
    assert (pretrained.mean, pretrained.std) == (IMAGENET_MEAN, IMAGENET_STD)
    images = [(torch.rand(3, 2, 2, generator=torch.Generator().manual_seed(i)), 0) for i in range(10)]
    assert compute_mean_std(images, samples=3) == compute_mean_std(images, samples=3, seed=0)
    assert compute_mean_std(images, samples=3) != compute_mean_std(images, samples=3, seed=1)


def test_without_a_terminal_each_progress_line_estimates_the_time_left(capsys, monkeypatch):
    clock = iter([1000.0, 1030.0, 1060.0, 1075.0, 1105.0, 1200.0])  # the start, then the end of each step
    monkeypatch.setattr(engine.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(engine, "PROGRESS_SECONDS", 30)
    assert list(engine.ProgressLines(iter("abcde"), 5, "epoch 2 train")) == list("abcde")
    assert capsys.readouterr().err.splitlines() == [  # every 30 s or more, never after the last step
        "  epoch 2 train 1/5 steps (20 %), 30 s, about 120 s to go",
        "  epoch 2 train 2/5 steps (40 %), 60 s, about 90 s to go",
        "  epoch 2 train 4/5 steps (80 %), 105 s, about 26 s to go",
    ]


def test_each_progress_line_is_flushed_at_once_to_a_log_file(monkeypatch):
    """stderr redirected to a file is block-buffered: a line not flushed shows in the log minutes late."""

    class Log(list):
        def write(self, text):
            self.append(("write", text))

        def flush(self):
            self.append(("flush", None))

    log = Log()
    monkeypatch.setattr(engine.sys, "stderr", log)
    monkeypatch.setattr(engine.time, "monotonic", iter([0.0, 40.0, 80.0]).__next__)
    monkeypatch.setattr(engine, "PROGRESS_SECONDS", 30)
    list(engine.ProgressLines(iter("ab"), 3, "train"))
    assert [kind for kind, _ in log] == ["write", "write", "flush", "write", "write", "flush"]  # text, newline, flush


@pytest.mark.parametrize("channels_last", [False, True])
def test_the_loops_figures_are_exact_sums_kept_on_the_device_it_is_given(channels_last):
    """With lr 0 the model is fixed, so the epoch's loss and accuracy are exact. The sums must live on the device
    given: on a GPU, sums left on the default device cost a host sync per step; here the default device is one no
    tensor can be read from, so a sum created without device= fails the epoch."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, 3))
{% if cookiecutter.task == "multi_label" %}
    batches = [(torch.randn(4, 3, 8, 8), torch.randint(0, 2, (4, 3)).float()) for _ in range(3)]
    criterion = nn.BCEWithLogitsLoss()
    with torch.no_grad():  # the mean over images and labels; accuracy: every label right at probability 0.5
        loss = sum(nn.functional.binary_cross_entropy_with_logits(model(x), y, reduction="sum") for x, y in batches)
        loss = loss.item() / 36
        accuracy = sum(((model(x) >= 0) == (y == 1)).all(1).sum() for x, y in batches).item() / 12
{% else %}
    batches = [(torch.randn(4, 3, 8, 8), torch.randint(0, 3, (4,))) for _ in range(3)]
    criterion = nn.CrossEntropyLoss()
    with torch.no_grad():
        loss = sum(nn.functional.cross_entropy(model(x), y, reduction="sum") for x, y in batches).item() / 12
        accuracy = sum((model(x).argmax(1) == y).sum() for x, y in batches).item() / 12
{% endif %}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    cpu = torch.device("cpu")
    layout = torch.channels_last if channels_last else torch.contiguous_format
    layouts = []
    model.register_forward_pre_hook(lambda _, inputs: layouts.append(inputs[0].is_contiguous(memory_format=layout)))
    with torch.device("meta"):
        loop = {"accumulate_steps": 2, "channels_last": channels_last}
        stats = engine.train_one_epoch(model, batches, criterion, optimizer, plain_runtime(cpu), **loop)
        figures = engine.evaluate(model, batches, plain_runtime(cpu), 3)
    assert stats["train_loss"] == pytest.approx(loss, rel=1e-6) and stats["train_acc"] == accuracy
    assert figures["val_loss"] == pytest.approx(loss, rel=1e-6) and figures["val_acc"] == accuracy
{% if cookiecutter.task == "multi_label" %}
    assert figures["probabilities"].shape == figures["targets"].shape == (12, 3)
{% else %}
    assert figures["confusion"].device == cpu and figures["confusion"].sum() == 12
{% endif %}
    assert layouts[:3] == [True] * 3  # the training batches in the layout --channels-last asks for


def test_workers_default_to_some_for_photos_and_gpus_and_none_for_synthetic_images_on_a_cpu(monkeypatch):
    from {{ cookiecutter.package_name }}.training.train import _default_workers

    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert _default_workers(TrainConfig(data="synthetic", device="cpu")) == 0  # workers would only add copies
    assert _default_workers(TrainConfig(data="photos", device="cpu")) == 8  # decoding JPEGs is the bottleneck
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    assert _default_workers(TrainConfig(data="synthetic")) == 8  # one process cannot keep a GPU busy
    assert _default_workers(TrainConfig(data="synthetic", device="cpu")) == 0


def test_the_run_and_its_steps_go_through_the_methods_a_feature_extends(tiny_config, monkeypatch):
    """What core/runtime.py and training/run.py name is what train() calls, where they say: 2 epochs of 4 batches in
    groups of 2 are 4 backward passes and 2 optimizer steps an epoch, and the run's own methods come around them."""
    calls = []

    class RecordedRuntime(train_module.Runtime):
        def backward(self, loss):
            calls.append("backward")
            super().backward(loss)

        def step(self, optimizer, before_step):
            calls.append("step")
            return super().step(optimizer, before_step)

    class RecordedRun(train_module.Run):
        def check(self):
            calls.append("check")
            super().check()

        def restore(self, stateful, data, cfg):
            calls.append("restore")
            return super().restore(stateful, data, cfg)

        def begin(self, first_epoch):
            calls.append(f"begin at {first_epoch}")
            super().begin(first_epoch)

        def start_epoch(self, epoch):
            calls.append(f"epoch {epoch}")
            return super().start_epoch(epoch)

        def end_epoch(self, rows, val):
            calls.append(f"end of {rows[-1]['epoch']}")
            super().end_epoch(rows, val)

        def end_epochs(self):
            calls.append("epochs done")
            super().end_epochs()

        def finish(self, best):
            calls.append("finish")
            super().finish(best)

    monkeypatch.setattr(train_module, "Runtime", RecordedRuntime)
    monkeypatch.setattr(train_module, "Run", RecordedRun)
    train(replace(tiny_config, epochs=2, max_steps_per_epoch=4, accumulate_steps=2, **NEUTRAL))
    epoch = ["backward", "backward", "step"] * 2
    assert calls == [
        *["check", "restore", "begin at 1"],
        *["epoch 1", *epoch, "end of 1", "epoch 2", *epoch, "end of 2"],
        *["epochs done", "finish"],
    ]
