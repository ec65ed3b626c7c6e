"""Every accepted combination of answers rendered, checked and smoke-trained on the CPU (and on CUDA where present);
every refused one refused with its message."""

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import smoke_child
from checks import assert_ruff_clean, assert_valid_files
from matrix import ACCEPTED, EXTREMES, GPU_IDS, PROJECT_NAMES, REJECTED, precision_of
from render import CHOICES, YES_NO, bake, baked_project, package_of, refused_by_the_hook
from runners import Run, cpu_mixed_precision
from tricks import (
    MODEL_PARTS,
    SMOOTHING,
    TRICKS,
    answers_for,
    assert_files_exactly_for,
    assert_refused_for_what_it_needs,
    assert_traces_exactly_for,
    check_run,
    features_on,
    mlflow_store,
    smoke_commands,
    smoke_flags,
)

pytestmark = pytest.mark.slow
SMOKE_TIMEOUT = 240  # seconds per combination: a hang fails that case, not the run
# fp16 on CUDA: the GradScaler starts at 2**16 and skips every step whose scaled gradients overflow fp16, halving its
# scale each time (resnet18's and efficientnet_b0's first steps do). Those runs get more steps, so that some are taken.
FP16_STEPS = 10


def cuda_available() -> bool:
    # Asked in a subprocess: initialising CUDA here would make later forks unsafe.
    probe = [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"]
    return subprocess.run(probe, capture_output=True, text=True).stdout.strip() == "True"


CUDA = cuda_available()
NEEDS_CUDA = pytest.mark.skipif(not CUDA, reason="CUDA is not available: the GPU lane runs on a machine with a GPU")


def gpu_sample(accepted: dict[str, dict]) -> list[str]:
    """A covering sample of the accepted combinations for a short GPU check: one per model x precision (fp32, bf16,
    fp16) x DDP on/off x checkpointing on/off (48), each picked, in the matrix's own order, to add the most
    (trick, value) x model and (trick, value) x precision pairs not yet covered. Deterministic."""
    covered, sample = set(), []
    for model in CHOICES["model"]:
        for precision in ("fp32", *CHOICES["amp_precision"]):
            for ddp in (False, True):
                for ckpt in (False, True):
                    cell = [
                        name
                        for name, a in accepted.items()
                        if (a["model"], precision_of(a), a["use_distributed"], a["use_checkpointing"])
                        == (model, precision, ddp, ckpt)
                    ]
                    assert cell, (model, precision, ddp, ckpt)
                    best = max(cell, key=lambda name: len(_pairs(accepted[name]) - covered))  # first of the best
                    covered |= _pairs(accepted[best])
                    sample.append(best)
    return sample


def _pairs(answers: dict) -> set[tuple]:
    return {(trick, answers[trick], key, value) for trick in TRICKS for key, value in _choices(answers).items()}


def _choices(answers: dict) -> dict:
    return {"model": answers["model"], "precision": precision_of(answers)}


# GPU_LANE=sample (scripts/gpu-check.sh's default) smoke-trains only the covering sample on CUDA; anything else but
# the default `full` is refused. The CPU matrix runs every accepted combination whatever it says.
GPU_LANE = os.environ.get("GPU_LANE", "full")
if GPU_LANE not in ("full", "sample"):
    raise ValueError(f"GPU_LANE={GPU_LANE!r}: use full (every accepted combination on CUDA) or sample")
GPU_SAMPLE = gpu_sample(ACCEPTED)
GPU_CASES = GPU_SAMPLE if GPU_LANE == "sample" else list(ACCEPTED)


def check_render(project: Path, answers: dict) -> None:
    """Files, traces and syntax of one render; ruff runs over many renders at once (see below)."""
    tricks = features_on(answers)
    assert_valid_files(project)
    assert_files_exactly_for(project, tricks)
    assert_traces_exactly_for((project / "README.md").read_text(), tricks, "README.md")


def new_mlflow_store(forkserver, store: Path) -> Path:
    """An MLflow store as a run creates it, at `store`: copied from one made once per test process. A new store runs
    MLflow's ~50 schema migrations, 1.5 s of every smoke run that logs to MLflow; the generated tests (and test_tricks'
    runs in subprocesses) create theirs as users do."""
    made = Path(tempfile.gettempdir(), "new-mlflow-store.db")  # this process's own temp folder (conftest.py)
    if not made.exists():
        making = Path(tempfile.mkdtemp()) / "mlflow.db"
        child = forkserver.Process(target=smoke_child.make_mlflow_store, args=(str(making),))
        child.start()
        child.join(SMOKE_TIMEOUT)
        if child.is_alive():
            child.kill()
            child.join()
        assert child.exitcode == 0, f"MLflow could not create a store (exit {child.exitcode})"
        making.replace(made)
    store.mkdir(parents=True)
    shutil.copyfile(made, store / "mlflow.db")
    return store


def smoke(forkserver, project: Path, answers: dict, out: Path, device: str) -> None:
    """Two training steps (FP16_STEPS with fp16 on CUDA) and validation batches with every chosen trick on, then the
    visible effects of each trick on and the absence of each one off (tests/tricks.py)."""
    tricks = [trick for trick in TRICKS if answers[trick]]
    run = out / "run"
    precision = (
        (cpu_mixed_precision() if device == "cpu" else answers["amp_precision"]) if answers["use_amp"] else "fp32"
    )
    scaled = device == "cuda" and precision == "fp16"  # the only runs with a GradScaler that can skip steps
    steps = str(FP16_STEPS if scaled else 2)
    train = ["train", "--epochs", "1", "--max-steps-per-epoch", steps, "--batch-size", "8", "--device", device]
    train += ["--gpus", "0"] if device == "cuda" else []  # the GPU there is, whatever the render's default
    train += ["--num-workers", "0", "--no-plots", "--output-dir", str(run), *smoke_flags(tricks, answers["model"])]
    train += ["--mean", *["0.5"] * 3, "--std", *["0.25"] * 3]  # measuring them: the render's own tests
    if answers["tracker"] == "mlflow":
        train += ["--tracking-uri", str(new_mlflow_store(forkserver, mlflow_store(run)))]
    commands = smoke_commands(train, tricks)
    # What the hooks inside the run (smoke_child._watch) compare the run with
    watch = {
        "frozen": MODEL_PARTS[answers["model"]][0] if answers["use_freezing"] else None,
        "ema": answers["use_ema"],
        "mixup": answers["use_mixup"],
        "smoothing": SMOOTHING if answers["use_label_smoothing"] else 0.0,
    }
    report = out / "report.json"
    shared = tempfile.gettempdir()  # this process's own temp folder (conftest.py): the runs' shared synthetic images
    args = (str(project / "src"), package_of(project), commands, str(report), watch, answers["use_distributed"], shared)
    child = forkserver.Process(target=smoke_child.run, args=args)
    child.start()
    child.join(SMOKE_TIMEOUT)
    if child.is_alive():
        child.kill()
        pytest.fail(f"smoke run exceeded {SMOKE_TIMEOUT} s")
    log = report.with_suffix(".log").read_text()
    assert child.exitcode == 0 and report.exists(), log[-3000:]
    seen = json.loads(report.read_text())
    assert seen["exit_codes"] == [0] * len(commands), log[-3000:]

    produced = Run(
        folder=run,
        log=log,
        model=answers["model"],
        device=device,
        precision=precision,
        commands=len(commands),
        checkpoint_epochs=seen["checkpoint_epochs"],
        one_process_group=answers["use_distributed"],
        scaled=scaled,
        seen=seen,
    )
    assert seen["losses"] >= 2, "the training loss was not seen"
    check_updates(produced)
    check_run(produced, features_on(answers))


def check_updates(run: Run) -> None:
    """The optimizer updates the runs attempted (smoke_child._watch_updates), judged by the steps really taken: with
    fp16's GradScaler some are skipped, and a skipped one must leave no trace (no EMA update, no share of grad_norm:
    the checks of those tricks). At least two taken steps are required, so that clipping and the EMA are always seen
    at work."""
    updates = [update for epoch in run.seen["epochs"] for update in epoch]
    taken = [update for update in updates if update["taken"]]
    pattern = [(update["taken"], update.get("scale")) for update in updates]
    assert len(run.seen["epochs"]) == len(run.rows), (run.seen["epochs"], run.rows)  # a train_one_epoch per row
    assert run.scaled or len(taken) == len(updates), f"a step skipped without a GradScaler: {pattern}"
    assert len(taken) >= 2, f"only {len(taken)} of {len(updates)} optimizer steps taken (taken, scale): {pattern}"
    assert len(run.seen["step_norms"]) == len(taken), (run.seen["step_norms"], pattern)


@pytest.mark.usefixtures("quick_renders")
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
@pytest.mark.parametrize("name", GPU_CASES)
def test_combination_trains_on_cuda(name, cookies, forkserver, scratch):
    answers = ACCEPTED[name]
    smoke(forkserver, baked_project(cookies, **answers), answers, scratch, "cuda")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, NEEDS_CUDA])])
@pytest.mark.parametrize("name", EXTREMES)
def test_every_model_trains_with_every_trick_on_and_every_trick_off(name, device, cookies, forkserver, scratch):
    model, on, tracker = EXTREMES[name]
    answers = {**ACCEPTED[min(ACCEPTED)], **answers_for(TRICKS if on else [], tracker), "model": model}
    smoke(forkserver, baked_project(cookies, **answers), answers, scratch, device)


@pytest.mark.parametrize("name", REJECTED)
def test_refused_combination_fails_with_its_message_and_no_output(name, tmp_path, capfd):
    assert_refused_for_what_it_needs(tmp_path, capfd, REJECTED[name])


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
        if key != "model":  # drawn evenly; the models: below
            assert min(sum(r[key] == option for r in ACCEPTED.values()) for option in options) >= len(ACCEPTED) // 8


def test_every_model_trains_every_value_of_any_three_tricks_together():
    """Each model, not only the built-in one, trains with every combination of three tricks' values that an accepted
    combination has, each trick at both values with every tracker, every precision x DDP x checkpointing cell of the
    GPU check, and each task."""
    possible = {triple: {tuple(a[t] for t in triple) for a in ACCEPTED.values()} for triple in _triples()}
    for model in CHOICES["model"]:
        rows = [a for a in ACCEPTED.values() if a["model"] == model]
        for triple in _triples():
            missing = possible[triple] - {tuple(a[t] for t in triple) for a in rows}
            assert not missing, (model, triple, missing)
        for trick in TRICKS:
            pairs = {(a[trick], a["tracker"]) for a in rows}
            assert pairs == {(a[trick], a["tracker"]) for a in ACCEPTED.values()}, (model, trick)
        cells = {(precision_of(a), a["use_distributed"], a["use_checkpointing"]) for a in rows}
        assert cells == set(itertools.product(["fp32", *CHOICES["amp_precision"]], [False, True], [False, True]))
        assert {a["task"] for a in rows} == set(CHOICES["task"]), model  # each model learns each task


def _triples():
    return itertools.combinations(TRICKS, 3)


def test_every_accepted_combination_is_smoke_trained_not_a_sample():
    def names(test) -> list[str]:
        return next(mark.args[1] for mark in test.pytestmark if mark.name == "parametrize")

    # Every assignment of cookiecutter.json's yes/no answers, judged by the pre-generation hook's own rules
    assignments = [
        dict(zip(YES_NO, values, strict=True)) for values in itertools.product([False, True], repeat=len(YES_NO))
    ]
    refused = [answers for answers in assignments if refused_by_the_hook(**answers)]
    assert (len(ACCEPTED), len(REJECTED)) == (len(assignments) - len(refused), len(refused))
    assert sorted(tuple(answers[key] for key in YES_NO) for answers in REJECTED.values()) == sorted(
        tuple(answers.values()) for answers in refused
    ), "the matrix refuses other combinations than the hook"
    assert list(names(test_combination_renders_clean_and_trains_on_cpu)) == list(ACCEPTED)
    assert list(names(test_combination_trains_on_cuda)) == (list(ACCEPTED) if GPU_LANE == "full" else GPU_SAMPLE)


def test_the_gpu_lane_sample_covers_every_model_precision_ddp_and_checkpointing():
    """scripts/gpu-check.sh's short mode (GPU_LANE=sample): every model x precision x DDP x checkpointing cell once,
    and every value of every trick met with every model and every precision."""
    rows = [ACCEPTED[name] for name in GPU_SAMPLE]
    cells = {(a["model"], precision_of(a), a["use_distributed"], a["use_checkpointing"]) for a in rows}
    assert len(GPU_SAMPLE) == len(set(GPU_SAMPLE)) == len(cells) == len(CHOICES["model"]) * 3 * 2 * 2
    for trick in TRICKS:
        for value in (False, True):
            for key, options in {"model": CHOICES["model"], "precision": ["fp32", *CHOICES["amp_precision"]]}.items():
                for option in options:
                    if trick == "use_amp" and key == "precision":
                        continue  # fp32 is mixed precision off, bf16 and fp16 are it on
                    assert any(a[trick] == value and _choices(a)[key] == option for a in rows), (trick, value, option)
