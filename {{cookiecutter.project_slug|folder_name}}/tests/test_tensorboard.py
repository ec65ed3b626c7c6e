from dataclasses import replace

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from {{ cookiecutter.package_name }}.train import train


def read_log(log_dir):
    log = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    log.Reload()
    return log


def test_scalars_confusion_matrix_and_hyperparameters_reach_tensorboard(tiny_config, tmp_path):
    result = train(replace(tiny_config, epochs=2, plots=True))
    log = read_log(tmp_path / "run" / "tensorboard")
    rows = result["metrics"]
    columns = {"train_loss": "loss/train", "val_loss": "loss/val", "val_acc": "accuracy/val", "lr": "lr/base"}
    for column, tag in columns.items():
        events = log.Scalars(tag)
        assert [event.step for event in events] == [1, 2]
        assert [event.value for event in events] == pytest.approx([row[column] for row in rows], rel=1e-6)
{% if cookiecutter.use_ema %}
    assert [event.step for event in log.Scalars("accuracy/ema_val")] == [1, 2]  # beside accuracy/val
{% endif %}
{% if cookiecutter.use_grad_clipping %}
    assert [event.value for event in log.Scalars("grad_norm")] == pytest.approx([row["grad_norm"] for row in rows])
{% endif %}
    images = log.Images("confusion_matrix")
    assert [image.step for image in images] == [1, 2] and min(image.width for image in images) > 100
    hyperparameters = log.PluginTagToContent("hparams")
    assert "_hparams_/session_start_info" in hyperparameters
    assert b"best_val_acc" in hyperparameters["_hparams_/experiment"]


def test_no_plots_leaves_out_the_confusion_figure_only(tiny_config, tmp_path):
    train(tiny_config)  # plots=False
    log = read_log(tmp_path / "run" / "tensorboard")
    assert "confusion_matrix" not in log.Tags()["images"] and log.Scalars("loss/train")


def test_no_tensorboard_flag_writes_no_log(tiny_config, tmp_path):
    train(replace(tiny_config, tensorboard=False))
    assert not (tmp_path / "run" / "tensorboard").exists()
