"""Each trick alone, all of them and none: present exactly when chosen, clean, tested, and training."""

import csv
from pathlib import Path

import pytest
import torch
import yaml
from helpers import (
    CLIP,
    CONFIG_KEYS,
    GENERATED_TESTS,
    TRACES,
    TRICKS,
    answers_for,
    assert_ruff_clean,
    bake,
    baked_project,
    epochs_trained,
    feature_files,
    last_output_dir,
    own_pytest_run,
    package_of,
    run_in,
    smoke_flags,
    with_requirements,
)

COMBINATIONS = {
    "none": [],
    "all": TRICKS,
    **{trick.removeprefix("use_"): with_requirements([trick]) for trick in TRICKS},
}


@pytest.fixture(scope="module", params=COMBINATIONS, ids=str)
def combination(request, cookies_session) -> tuple[list[str], Path]:
    tricks = COMBINATIONS[request.param]
    return tricks, baked_project(cookies_session, **answers_for(tricks))


ANSWER_FILES = {".cookiecutter.json", "answers.json"}  # they list every prompt, on or off, by design


def render_text(project: Path) -> str:
    files = [p for p in project.rglob("*") if p.is_file() and p.name not in ANSWER_FILES]
    return "\n".join(str(p.relative_to(project)) + "\n" + p.read_text() for p in files)


def test_each_trick_leaves_a_trace_exactly_when_on(combination):
    tricks, project = combination
    text = render_text(project).lower()
    for trick, words in TRACES.items():
        found = [word for word in words if word in text]
        if trick in tricks:
            assert found, f"{trick} is on but none of {words} appear"
        else:
            assert not found, f"{trick} is off but {found} appear"


def test_files_exist_exactly_when_their_feature_is_on(combination):
    tricks, project = combination
    package = Path("src", package_of(project))
    for feature, paths in feature_files().items():
        for path in paths:
            assert (project / path.format(package=package)).is_file() == (feature in tricks), path


def test_render_is_ruff_clean(combination):
    assert_ruff_clean(combination[1])


def files_testing(project: Path, tricks: list[str]) -> list[str]:
    """The render's test files that exist, or read differently, because of these tricks: their own files (the
    hook's table) and every test file with a Jinja branch on one of them."""
    own = {Path(path).name for trick in tricks for path in feature_files()[trick] if path.startswith("tests/")}
    branched = {
        path.name
        for path in GENERATED_TESTS.glob("test_*.py")
        if any(f"cookiecutter.{trick}" in path.read_text() for trick in tricks)
    }
    return [f"tests/{name}" for name in sorted(own | branched) if (project / "tests" / name).is_file()]


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in COMBINATIONS if name not in ("all", "none")])
def test_generated_tests_pass(name, cookies):
    """Each trick alone: the fast lane of the tests it adds or changes. Every test of the generated suite runs in the
    all-on, all-off and default renders (test_install.py) and in the default render of each model (test_bake.py)."""
    project = baked_project(cookies, **answers_for(COMBINATIONS[name]))
    files = files_testing(project, COMBINATIONS[name])
    assert files, f"{name} adds and changes no test"
    run_in(project, "-m", "pytest", "-q", *own_pytest_run(), "-m", "not slow", *files)


def test_smoke_run_with_every_chosen_trick_active(combination, tmp_path):
    tricks, project = combination
    package, run = package_of(project), tmp_path / "run"
    flags = smoke_flags(tricks, "small_cnn")
    common = ["train", "--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "8", "--output-dir", str(run)]
    done = run_in(project, "-m", package, *common, *flags)
    with open(run / "metrics.csv") as file:
        row = next(csv.DictReader(file))
    assert torch.isfinite(torch.tensor([float(row["train_loss"]), float(row["val_loss"])])).all()
    saved = yaml.safe_load((run / "config.yaml").read_text())
    for trick, keys in CONFIG_KEYS.items():
        assert all((key in saved) == (trick in tricks) for key in keys), trick
    if "use_freezing" in tricks:
        assert "frozen parameters:" in done.stdout
    if "use_sync_bn" in tricks:
        assert "keeping BatchNorm" in done.stderr
    if "use_layerwise_lr" in tricks:
        assert float(row["lr[fc]"]) == pytest.approx(10 * float(row["lr"]))
    if "use_grad_clipping" in tricks:
        assert float(row["grad_norm"]) > CLIP  # the norm before clipping: every step was clipped
    if "use_checkpointing" in tricks:
        assert torch.load(run / "last.pt", weights_only=True)["epoch"] == 1
        done = run_in(project, "-m", package, *common, *flags, "--resume", "auto", "--epochs", "2")
        assert "resumed from" in done.stdout and epochs_trained(done.stdout) == [2]
        assert torch.load(run / "last.pt", weights_only=True)["epoch"] == 2


def test_sync_bn_without_distributed_training_is_refused(cookies, capfd):
    result = bake(cookies, use_sync_bn=True, use_distributed=False)
    assert result.exit_code != 0
    message = "ERROR: use_sync_bn synchronises BatchNorm across the processes of a multi-GPU job, so it needs"
    assert message in capfd.readouterr().err
    assert list(last_output_dir(cookies).iterdir()) == []
