import csv
import json
from dataclasses import replace

import pytest
import torch
import yaml
from torch import nn

from {{ cookiecutter.package_name }} import engine
from {{ cookiecutter.package_name }}.config import TrainConfig, load_config_file, make_config
from {{ cookiecutter.package_name }}.data import SyntheticImages
from {{ cookiecutter.package_name }}.errors import UserError
from {{ cookiecutter.package_name }}.metrics import confusion_matrix, per_class_report
from {{ cookiecutter.package_name }}.models import SmallCNN, build_model
from {{ cookiecutter.package_name }}.optim import L1Penalty, build_optimizer, warmup_cosine
from {{ cookiecutter.package_name }}.train import train


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
    assert (run / "classes.txt").read_text().split() == SyntheticImages.classes
    state = torch.load(run / "model.pt", weights_only=True)
    assert set(state) == set(build_model(tiny_config.model, 10).state_dict())
    answers = json.loads((run / "answers.json").read_text())["cookiecutter"]  # what generated this repo
    assert answers["package_name"] == "{{ cookiecutter.package_name }}"


def test_same_seed_gives_identical_metrics(tiny_config, tmp_path):
    first = train(replace(tiny_config, output_dir=str(tmp_path / "a")))["metrics"]
    second = train(replace(tiny_config, output_dir=str(tmp_path / "b")))["metrics"]
    strip = [{k: v for k, v in row.items() if k != "seconds"} for row in first + second]
    assert strip[: len(first)] == strip[len(first) :]


def test_lr_follows_the_schedule_per_epoch(tiny_config):
    rows = train(replace(tiny_config, epochs=4, warmup_epochs=1, lr=0.1))["metrics"]
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


def test_report_from_a_confusion_matrix():
    targets, predictions = torch.tensor([0, 0, 1, 1, 1, 2]), torch.tensor([0, 1, 1, 1, 2, 2])
    matrix = confusion_matrix(targets, predictions, 3)
    assert matrix.sum() == len(targets) and matrix.tolist() == [[1, 1, 0], [0, 2, 1], [0, 0, 1]]
    rows = {row["class"]: row for row in per_class_report(matrix, ["a", "b", "c"])}
    assert rows["a"]["precision"] == 1 and rows["a"]["recall"] == 0.5 and rows["b"]["f1"] == pytest.approx(2 / 3)
    assert rows["weighted avg"]["recall"] == pytest.approx((matrix.trace() / matrix.sum()).item())  # micro-F1 = acc
    assert rows["macro avg"]["support"] == 6


def test_without_a_terminal_a_long_epoch_prints_progress_lines(tiny_config, capsys, monkeypatch):
    monkeypatch.setattr(engine, "PROGRESS_SECONDS", 0)  # as if each step took longer than the interval
    train(replace(tiny_config, max_steps_per_epoch=3))
    lines = [line.strip() for line in capsys.readouterr().err.splitlines() if line.startswith("  train ")]
    assert [line.split(",")[0] for line in lines] == ["train 1/3 steps (33 %)", "train 2/3 steps (67 %)"]


def test_l1_adds_the_hand_computed_penalty_of_trainable_weights_only():
    """T35: kernels and matrices that train; not biases, not normalisation parameters, not fixed weights."""
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
