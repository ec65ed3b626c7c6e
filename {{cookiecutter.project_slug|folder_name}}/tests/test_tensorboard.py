{% if cookiecutter.use_tensorboard %}
import errno
import os
import resource
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.summary.writer.record_writer import RecordWriter

from {{ cookiecutter.package_name }} import tensorboard_log
from {{ cookiecutter.package_name }}.errors import OutputError
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


def test_a_link_planted_in_place_of_the_log_folder_is_replaced(tiny_config, tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    run.mkdir()
    for marker in ("classes.txt", "answers.json"):  # the folder of a run that stopped before its first epoch
        (run / marker).write_text("")
    (run / "tensorboard").symlink_to(outside, target_is_directory=True)
    train(tiny_config)
    assert list(outside.iterdir()) == [] and not (run / "tensorboard").is_symlink()
    assert read_log(run / "tensorboard").Scalars("loss/train")


def test_a_full_disk_under_the_log_is_one_line_not_a_threads_traceback(tiny_config, tmp_path, monkeypatch):
    def full_disk(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RecordWriter, "write", full_disk)  # runs in TensorBoard's writer thread
    reported = []
    monkeypatch.setattr(tensorboard_log, "_report_thread_error", reported.append)
    monkeypatch.setattr(threading, "excepthook", tensorboard_log._quiet_writer_thread)  # pytest swaps in its own
    with pytest.raises(OutputError) as raised:
        train(tiny_config)
    log_dir = tmp_path / "run" / "tensorboard"
    assert str(raised.value).startswith(f"cannot write {log_dir} (No space left on device); free some space")
    assert reported == []  # the writer thread's error said once, by the main thread


@pytest.mark.slow
def test_a_full_disk_under_the_log_stops_the_command_with_one_line(tmp_path):
    """A file-size limit the confusion figure's events cross first stands in for a full disk."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "train", "--device", "cpu"]
    command += ["--model", "small_cnn", "--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "8"]
    command += ["--plots", "--tensorboard"]
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))  # noqa: E731
    done = subprocess.run(
        [*command, "--output-dir", str(tmp_path / "run")], env=env, preexec_fn=limit, capture_output=True, text=True
    )
    assert done.returncode == 5, done.stderr
    assert "Traceback" not in done.stderr  # the writer thread's included
    assert done.stderr.splitlines()[-1].startswith(f"error: cannot write {tmp_path / 'run' / 'tensorboard'} (File too")


def test_a_log_folder_whose_name_is_not_utf8_is_refused_in_one_line(tiny_config, tmp_path):
    out = tmp_path / os.fsdecode(b"caf\xe9")  # a Latin-1 name: Linux allows it, TensorBoard cannot encode it
    with pytest.raises(OutputError) as raised:
        train(replace(tiny_config, output_dir=str(out)))
    message = f"TensorBoard cannot write into {ascii(str(out / 'tensorboard'))} (not UTF-8); pass --no-tensorboard"
    assert str(raised.value) == message
{% endif %}
