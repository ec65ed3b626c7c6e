"""Every mistake gets one plain line on stderr, a distinct exit code, no traceback, and no damaged file."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from PIL import Image
from torch import nn

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.training import train as train_module

SMOKE = ["--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "4", "--device", "cpu"]


def run_main(args, capsys) -> tuple[int, str]:
    code = main(args)
    err = capsys.readouterr().err
    return code, err


def assert_one_line(err: str, message: str) -> None:
    assert "Traceback" not in err and message in err, err
    assert len([line for line in err.splitlines() if line.startswith("error")]) == 1, err


def break_folder(root, how: str):
    if how == "no val":  # train/ alone: half of a split tree, not a folder of class folders
        shutil.rmtree(root / "val")
    elif how == "empty class":
        for image in (root / "train" / "dogs").iterdir():
            image.unlink()
    elif how == "mismatch":
        (root / "val" / "dogs").rename(root / "val" / "wolves")
    elif how == "corrupt":
        (root / "train" / "cats" / "3.png").write_bytes(b"\x89PNG but not really")
    return root


@pytest.mark.slow
def test_a_bad_image_read_by_a_worker_ends_the_process_with_one_line(image_folder, tmp_path):
    """Workers ignore SIGTERM (the run stops them itself): after the error the process must still exit."""
    (image_folder / "val" / "cats" / "0.png").write_bytes(b"\x89PNG but not really")
    env = {**os.environ, "PYTHONPATH": str(Path(train_module.__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "train", "--data", str(image_folder)]
    command += ["--image-size", "16", "--num-workers", "1", *SMOKE, "--output-dir", str(tmp_path / "r")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "0.png" in done.stderr.strip().splitlines()[-1], done.stderr


@pytest.mark.parametrize(
    ("how", "workers", "message"),
    [
        ("no val", 0, "val/<class>/"),
        ("empty class", 0, "Found no valid file for the classes dogs"),
        ("mismatch", 0, "train/ and val/ hold different class folders"),
        ("corrupt", 0, "cannot read image"),
        pytest.param("corrupt", 2, "cannot read image", marks=pytest.mark.slow),  # raised in a worker process
    ],
)
def test_bad_image_folders_exit_3(image_folder, tmp_path, capsys, how, workers, message):
    root = break_folder(image_folder, how)
    args = ["train", "--data", str(root), "--image-size", "32", "--num-workers", str(workers), "--batch-size", "4"]
    args += ["--device", "cpu", "--mean", "0.5", "0.5", "0.5", "--std", "0.2", "0.2", "0.2"]
    args += ["--epochs", "1", "--output-dir", str(tmp_path / "r")]
    code, err = run_main(args, capsys)
    assert code == 3
    assert_one_line(err, message)
    if how == "corrupt":
        assert "3.png" in err


def test_data_workers_stopped_after_an_error_are_not_reported_as_failed_workers():
    """In a process of its own: _stop_data_workers stops every child process, whoever runs the tests."""
    script = (
        "import multiprocessing, time, torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "from {{ cookiecutter.package_name }}.cli import _stop_data_workers\n"
        "batches = iter(DataLoader(TensorDataset(torch.zeros(8)), num_workers=2))  # watched by a SIGCHLD handler\n"
        "next(batches)\n"
        "_stop_data_workers()\n"
        "time.sleep(0.5)  # a pending handler would raise here: DataLoader worker (pid ...) is killed by signal\n"
        "print(len(multiprocessing.active_children()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(train_module.__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr[-2000:]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--data", "no/such/folder"], 3, "no such folder"),
        (["--model", "resnet19"], 4, "did you mean resnet18"),
        (["--batch-size", "5000"], 2, "--batch-size 5000 exceeds the 2048 training images"),
        (["--epochs", "0"], 2, "--epochs must be at least 1"),
        (["--seed", "-1"], 2, "--seed must be between 0 and 2**32 - 1"),
        (["--mean", "inf", "0", "0", "--std", "1", "1", "1"], 2, "--mean must be three finite numbers"),
        (["--data", "/dev/null"], 3, "no such folder or CSV file"),
        (["--lr", "nan"], 2, "--lr must be a number, got nan"),  # NaN passes every range check
        (["--momentum", "inf"], 2, "--momentum must be a finite number, not negative, got inf"),
        (["--std", "0", "0", "0", "--mean", "0", "0", "0"], 2, "--std must be three positive numbers"),
        (["--mean", "0.5", "0.5", "0.5"], 2, "--mean and --std go together"),  # else silently ignored
        (["--lr", "1e30", "--momentum", "0"], 7, "the training loss became NaN or infinite at step"),
        pytest.param(
            ["--device", "cuda", "--gpus", "0"], 6, "no CUDA GPU is visible with --gpus 0; check nvidia-smi",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA"),
        ),
        pytest.param(  # the prompt's answer for CPU only, with --device cuda: the message names --gpus
            ["--device", "cuda", "--gpus", "cpu"], 6, "--gpus 'cpu' selects no GPU; pass e.g. --gpus 0",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA"),
        ),
    ],
)  # fmt: skip
def test_bad_options_get_their_exit_code(tmp_path, capsys, args, code, message):
    result, err = run_main(["train", *SMOKE, "--output-dir", str(tmp_path / "run"), *args], capsys)
    assert result == code
    assert_one_line(err, message)
    assert not (tmp_path / "run" / "model.pt").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "cannot read config file"),
        ("epochs: [1\n", "not valid YAML"),
        ("lr: fast\n", "must be float"),
        ("data: caf\xe9\n".encode("latin-1"), "is not UTF-8 text; save it as UTF-8"),
    ],
)
def test_bad_config_files_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / "config.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    code, err = run_main(["train", "--config", str(path)], capsys)
    assert code == 2
    assert_one_line(err, message)


def test_an_output_dir_that_cannot_be_written_exits_5(tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    code, err = run_main(["train", *SMOKE, "--output-dir", str(tmp_path / "file" / "run")], capsys)
    assert code == 5
    assert_one_line(err, "cannot write to output dir")


def test_a_finished_run_is_never_overwritten_by_accident(fingerprint, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SMOKE, "--output-dir", str(run)]) == 0
    before = fingerprint(run)
    code, err = run_main(["train", *SMOKE, "--output-dir", str(run), "--seed", "1"], capsys)
    assert code == 5
    assert_one_line(err, "holds a finished run")
    assert fingerprint(run) == before
    assert main(["train", *SMOKE, "--output-dir", str(run), "--seed", "1", "--overwrite"]) == 0


def test_a_saved_config_replays_the_run_but_never_replaces_it(fingerprint, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SMOKE, "--output-dir", str(run), "--overwrite"]) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert "overwrite" not in saved{{ ' and "resume" not in saved' if cookiecutter.use_checkpointing else '' }}  # flags of one command
    before = fingerprint(run)
    code, err = run_main(["train", "--config", str(run / "config.yaml")], capsys)
    assert code == 5 and "holds a finished run" in err
    older = saved | {"overwrite": True, "output_dir": str(run)}  # as older versions saved it
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(older))
    code, err = run_main(["train", "--config", str(tmp_path / "old.yaml")], capsys)
    assert code == 5 and "ignoring overwrite" in err and "holds a finished run" in err
    assert fingerprint(run) == before


def test_writes_replace_planted_symlinks_instead_of_following_them(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    for marker in ("classes.txt", "answers.json"):  # the folder of a run that stopped before its first epoch
        (run / marker).write_text("")
    (run / "config.yaml").symlink_to(outside / "precious.txt")
    (run / "metrics.csv.tmp").symlink_to(outside / "planted.csv")
    (run / "model.pt").symlink_to(outside / "dangling.pt")  # dangling: looks like no finished run
    assert main(["train", *SMOKE, "--output-dir", str(run), "--no-plots"]) == 0
    assert sorted(outside.iterdir()) == [outside / "precious.txt"]  # nothing written through the links
    assert (outside / "precious.txt").read_text() == "keep me"
    for name in ("config.yaml", "model.pt", "metrics.csv"):
        assert not (run / name).is_symlink() and (run / name).stat().st_size > 0, name


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(Exception, match="no such folder"):
        main(["train", "--debug", "--data", "nowhere", "--output-dir", str(tmp_path)])


def test_weights_of_another_model_and_broken_files_exit_4(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SMOKE, "--output-dir", str(run)]) == 0
    other = tmp_path / "other"
    shutil.copytree(run, other)
    saved = yaml.safe_load((other / "config.yaml").read_text())
    saved["model"] = "resnet18" if saved["model"] != "resnet18" else "small_cnn"
    (other / "config.yaml").write_text(yaml.safe_dump(saved))
    code, err = run_main(["evaluate", "--weights", str(other / "model.pt"), "--device", "cpu"], capsys)
    assert code == 4
    assert_one_line(err, "does not fit this model")
    (run / "model.pt").write_bytes((run / "model.pt").read_bytes()[:100])  # truncated
    code, err = run_main(["evaluate", "--weights", str(run / "model.pt"), "--device", "cpu"], capsys)
    assert code == 4
    assert_one_line(err, "is not a readable PyTorch weights file")
    Image.new("RGB", (8, 8)).save(tmp_path / "ok.png")
    code, err = run_main(["predict", "--weights", str(tmp_path / "missing.pt"), str(tmp_path / "ok.png")], capsys)
    assert code == 4


def test_an_operation_without_a_deterministic_kernel_is_named_in_one_line(tmp_path, capsys, monkeypatch):
    """Under --deterministic, PyTorch refuses such an operation (several CUDA backward passes) with a traceback."""

    def refused(*args, **kwargs):
        raise RuntimeError(
            "adaptive_avg_pool2d_backward_cuda does not have a deterministic implementation, but you set "
            "'torch.use_deterministic_algorithms(True)'. You can turn off determinism just for this operation..."
        )

    monkeypatch.setattr(train_module, "train_one_epoch", refused)
    code, err = run_main(["train", *SMOKE, "--deterministic", "--output-dir", str(tmp_path / "run")], capsys)
    assert code == 6
    assert_one_line(err, "--deterministic: adaptive_avg_pool2d_backward_cuda has no deterministic implementation")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("vit_b_16", "the model needs 224 px images, not 32 px: pass --image-size 224"),
        ("one_channel", "the model takes 1-channel images, the data gives 3-channel ones"),
        ("too_few_classes", "the model gives {{ 4 if cookiecutter.task == 'multi_label' else 5 }} class scores for {{ 5 if cookiecutter.task == 'multi_label' else 10 }} classes"),
    ],
)
def test_data_and_model_that_do_not_fit_stop_before_the_first_step(tmp_path, capsys, monkeypatch, model, message):
    """One image through the model before training, one line naming what differs (and the flag to change)."""
    build = train_module.build_model
    odd = {
        "one_channel": lambda: nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten()),  # made for grey images
        "too_few_classes": lambda: build("small_cnn", {{ 4 if cookiecutter.task == "multi_label" else 5 }}),
    }
    if model in odd:
        monkeypatch.setattr(train_module, "build_model", lambda *args: odd[model]())
    steps = []
    monkeypatch.setattr(train_module, "train_one_epoch", lambda *args, **kwargs: steps.append(1))
    name = "vit_b_16" if model == "vit_b_16" else "small_cnn"
    code, err = run_main(["train", *SMOKE, "--model", name, "--output-dir", str(tmp_path / "run")], capsys)
    assert code == 4 and not steps
    assert_one_line(err, message)
