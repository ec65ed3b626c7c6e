"""Every accepted combination of answers rendered, checked and smoke-trained on the CPU (and on CUDA where present);
every refused one refused with its message."""

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import smoke_child
import yaml
from helpers import (
    CHOICES,
    CLIP,
    CONFIG_KEYS,
    MODEL_PARTS,
    SMOOTHING,
    TRACES,
    TRICKS,
    answers_for,
    assert_ruff_clean,
    assert_valid_files,
    bake,
    baked_project,
    epochs_trained,
    feature_files,
    last_output_dir,
    package_of,
    smoke_flags,
)
from matrix import ACCEPTED, EXTREMES, GPU_IDS, PROJECT_NAMES, REJECTED, REJECTION_MESSAGES

pytestmark = pytest.mark.slow
SMOKE_TIMEOUT = 240  # seconds per combination: a hang fails that case, not the run
DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def cuda_available() -> bool:
    # Asked in a subprocess: initialising CUDA here would make later forks unsafe.
    probe = [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"]
    return subprocess.run(probe, capture_output=True, text=True).stdout.strip() == "True"


CUDA = cuda_available()
NEEDS_CUDA = pytest.mark.skipif(not CUDA, reason="CUDA is not available: the GPU lane runs on a machine with a GPU")


def check_render(project: Path, answers: dict) -> None:
    """Files, traces and syntax of one render; ruff runs over many renders at once (see below)."""
    tricks = {trick for trick in TRICKS if answers[trick]}
    package_dir = Path("src", package_of(project))
    assert_valid_files(project)
    for feature, paths in feature_files().items():
        for path in paths:
            assert (project / path.format(package=package_dir)).is_file() == (feature in tricks), path
    readme = (project / "README.md").read_text().lower()
    for trick, words in TRACES.items():
        assert any(word in readme for word in words) == (trick in tricks), f"README and {trick}"


def smoke(forkserver, project: Path, answers: dict, out: Path, device: str) -> None:
    """Two training steps and validation batches with every chosen trick on, then the visible effects."""
    tricks = [trick for trick in TRICKS if answers[trick]]
    run = out / "run"
    train = ["train", "--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "8", "--device", device]
    train += ["--gpus", "0"] if device == "cuda" else []  # the GPU there is, whatever the render's default
    train += ["--num-workers", "0", "--no-plots", "--output-dir", str(run), *smoke_flags(tricks, answers["model"])]
    train += ["--mean", *["0.5"] * 3, "--std", *["0.25"] * 3]  # measuring them: the render's own tests
    commands = [train]
    if answers["use_checkpointing"]:
        commands.append([*train, "--resume", "auto", "--epochs", "2"])
    checks = {
        "frozen": MODEL_PARTS[answers["model"]][0] if answers["use_freezing"] else None,
        "ema": answers["use_ema"],
        "mixup": answers["use_mixup"],
        "smoothing": SMOOTHING if answers["use_label_smoothing"] else 0.0,
    }
    report = out / "report.json"
    child = forkserver.Process(
        target=smoke_child.run,
        args=(str(project / "src"), package_of(project), commands, str(report), checks, answers["use_distributed"]),
    )
    child.start()
    child.join(SMOKE_TIMEOUT)
    if child.is_alive():
        child.kill()
        pytest.fail(f"smoke run exceeded {SMOKE_TIMEOUT} s")
    log = report.with_suffix(".log").read_text()
    assert child.exitcode == 0 and report.exists(), log[-3000:]
    seen = json.loads(report.read_text())
    assert seen["exit_codes"] == [0] * len(commands), log[-3000:]

    with open(run / "metrics.csv") as file:
        rows = list(csv.DictReader(file))
    assert all(math.isfinite(float(row[key])) for row in rows for key in ("train_loss", "val_loss"))
    saved = yaml.safe_load((run / "config.yaml").read_text())
    for trick, keys in CONFIG_KEYS.items():
        assert all((key in saved) == (trick in tricks) for key in keys), trick
    # Each chosen trick visibly at work in the run (the hooks are in smoke_child._watch); each one off, absent.
    assert seen["losses"] >= 2 and seen["smoothed_losses"] == seen["losses"], "label smoothing (or its absence)"
    assert seen["soft_targets"] == (seen["losses"] if answers["use_mixup"] else 0), "mixup's soft labels"
    precision = ("bf16" if device == "cpu" else answers["amp_precision"]) if answers["use_amp"] else "fp32"
    assert set(seen["logits_dtypes"]) == {DTYPE_NAMES[precision]}, "autocast"
    if answers["use_amp"]:
        assert saved["precision"] == precision  # fp16 falls back to bf16 on CPUs
    if answers["use_checkpointing"]:
        # resumed where it should: epoch 1 trained once, then epoch 2 after the checkpoint
        assert seen["checkpoint_epochs"] == [1, 2] and "resumed from" in log and epochs_trained(log) == [1, 2], log
    if answers["use_distributed"]:
        assert f"distributed: world size 1, backend {'gloo' if device == 'cpu' else 'nccl'}" in log
    if answers["use_sync_bn"]:
        if device == "cpu":
            assert "SyncBatchNorm needs a distributed CUDA job: keeping BatchNorm" in log
        else:  # a one-process CUDA group: converted and trained through
            assert seen["sync_bn_layers"] > 0 and "keeping BatchNorm" not in log
    if answers["use_freezing"]:
        assert seen["frozen_unchanged"] and "frozen parameters:" in log
    if answers["use_layerwise_lr"]:
        head = MODEL_PARTS[answers["model"]][1]
        assert float(rows[0][f"lr[{head}]"]) == pytest.approx(10 * float(rows[0]["lr"]))
    if answers["use_mixup"]:
        assert seen["mixed_inputs"], "the model did not train on the mixed batches"
    if answers["use_grad_clipping"]:
        assert seen["step_norms"] == pytest.approx([CLIP] * len(seen["step_norms"]), rel=1e-3)
        assert len(seen["step_norms"]) >= 2 and float(rows[0]["grad_norm"]) > CLIP
    if answers["use_ema"]:
        assert seen["ema_updated"] and seen["ema_averaged"] and (run / "ema.pt").is_file()
        assert 0 <= float(rows[0]["ema_val_acc"]) <= 1
    if answers["use_tensorboard"]:
        events = (run / "tensorboard").glob("events.out.tfevents.*")
        assert sum(b"loss/train" in path.read_bytes() for path in events) == len(commands)  # scalars of each run


@pytest.mark.parametrize("name", ACCEPTED)
def test_combination_renders_clean_and_trains_on_cpu(name, cookies, forkserver, scratch):
    answers = ACCEPTED[name]
    result = bake(cookies, **answers)
    assert result.exit_code == 0, result.exception
    project = Path(result.project_path)
    check_render(project, answers)
    assert_ruff_clean(project)
    smoke(forkserver, project, answers, scratch, "cpu")


@pytest.mark.gpu
@NEEDS_CUDA
@pytest.mark.parametrize("name", ACCEPTED)
def test_combination_trains_on_cuda(name, cookies, forkserver, scratch):
    answers = ACCEPTED[name]
    smoke(forkserver, baked_project(cookies, **answers), answers, scratch, "cuda")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, NEEDS_CUDA])])
@pytest.mark.parametrize("name", EXTREMES)
def test_every_model_trains_with_every_trick_on_and_every_trick_off(name, device, cookies, forkserver, scratch):
    model, on = EXTREMES[name]
    answers = {**ACCEPTED[min(ACCEPTED)], **answers_for(TRICKS if on else []), "model": model}
    smoke(forkserver, baked_project(cookies, **answers), answers, scratch, device)


@pytest.mark.parametrize("name", REJECTED)
def test_refused_combination_fails_with_its_message_and_no_output(name, cookies, capfd):
    answers = REJECTED[name]
    result = bake(cookies, **answers)
    assert result.exit_code != 0
    expected = [message for trick, message in REJECTION_MESSAGES.items() if answers[trick]]
    errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith("ERROR: ")]
    assert any(message in line for message in expected for line in errors), errors
    assert list(last_output_dir(cookies).iterdir()) == []


def test_the_design_covers_every_boolean_against_every_choice_and_text_answer():
    assert len(ACCEPTED) + len(REJECTED) == 2 ** len(TRICKS)
    rows = [*ACCEPTED.values(), *REJECTED.values()]
    answers = {**CHOICES, "gpu_ids": GPU_IDS, "project_name": PROJECT_NAMES}
    for trick in TRICKS:
        for value in (False, True):
            for key, options in answers.items():
                for option in options:
                    assert any(r[trick] == value and r[key] == option for r in rows), (trick, value, key, option)
    for key, options in CHOICES.items():
        assert min(sum(r[key] == option for r in ACCEPTED.values()) for option in options) >= len(ACCEPTED) // 8


def test_every_accepted_combination_is_smoke_trained_not_a_sample():
    def names(test) -> list[str]:
        return next(mark.args[1] for mark in test.pytestmark if mark.name == "parametrize")

    assert len(ACCEPTED) == 1536 and len(REJECTED) == 512  # 2**11 boolean answers; SyncBN needs DDP
    assert list(names(test_combination_renders_clean_and_trains_on_cpu)) == list(ACCEPTED)
    assert list(names(test_combination_trains_on_cuda)) == list(ACCEPTED)
