"""Each trick alone, all of them and none: present exactly when chosen, clean, tested, and training."""

from pathlib import Path

import pytest
import torch
from checks import assert_ruff_clean, code_run_by
from render import CHOICES, GENERATED_TESTS, baked_project, package_of
from runners import Run, cpu_mixed_precision, own_pytest_run, pytest_in_fork, run_in
from test_bake import MODEL_LANE, NETWORK_LANE, NETWORK_LANE_MODEL, SUITE_TIMEOUT, SUITES
from test_matrix import CUDA
from tricks import (
    NAMED,
    REGISTRY,
    TRACKERS,
    TRACKING_FILES,
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

# name -> answers: every trick on, none, each trick alone (with what it needs), each tracker alone
COMBINATIONS = {
    "none": NAMED["all-off"],
    "all": NAMED["all-on"],
    **{REGISTRY[trick].short: answers_for([trick], "none") for trick in TRICKS},
    **{tracker.short: answers_for([], tracker.prompt.removeprefix("tracker=")) for tracker in TRACKERS},
}


# What each lane alone is about: its trick, not the one it needs (SyncBN's DDP, whose own lane runs DDP's tests), or its
# tracker
ABOUT = {REGISTRY[trick].short: {trick} for trick in TRICKS} | {tracker.short: {tracker.prompt} for tracker in TRACKERS}


@pytest.fixture(scope="module", params=COMBINATIONS, ids=str)
def combination(request, cookies_session) -> tuple[set[str], Path]:
    answers = COMBINATIONS[request.param]
    return features_on(answers), baked_project(cookies_session, **answers)


ANSWER_FILES = {".cookiecutter.json", "answers.json"}  # they list every prompt, on or off, by design


def render_text(project: Path) -> str:
    files = [p for p in project.rglob("*") if p.is_file() and p.name not in ANSWER_FILES]
    return "\n".join(str(p.relative_to(project)) + "\n" + p.read_text() for p in files)


def test_each_trick_leaves_a_trace_exactly_when_on(combination):
    tricks, project = combination
    assert_traces_exactly_for(render_text(project), tricks)


@pytest.mark.parametrize("name", COMBINATIONS)
def test_each_trick_leaves_a_trace_exactly_when_on_in_a_multi_label_render_too(name, cookies_session):
    """The same combinations for the other task: what the task adds names no trick that is off (a render only)."""
    answers = COMBINATIONS[name] | {"task": "multi_label"}
    assert_traces_exactly_for(render_text(baked_project(cookies_session, **answers)), features_on(answers))


def test_files_exist_exactly_when_their_feature_is_on(combination):
    tricks, project = combination
    assert_files_exactly_for(project, tricks)


def test_render_is_ruff_clean(combination):
    assert_ruff_clean(combination[1])


def files_testing(project: Path, about: set[str]) -> list[str]:
    """The render's test files that a lane of one trick or one tracker alone runs: the trick's own files (the
    registry's) and test_config.py (generated from the config: every option of the trick reaches what it configures);
    a tracker's own files and every test file with a Jinja branch on the tracker. A trick's branches in other files run
    with it on in the all-on render and off in the others; a tracker's, only in a render of that tracker."""
    own = {Path(path).name for trick in about & set(REGISTRY) for path in REGISTRY[trick].files} | {"test_config.py"}
    trackers = {prompt for prompt in about if prompt.startswith("tracker=")}
    own |= {Path(path).name for path in TRACKING_FILES} if trackers else set()
    branched = {
        path.name
        for path in GENERATED_TESTS.glob("test_*.py")
        if trackers and "cookiecutter.tracker" in path.read_text()
    }
    return [f"tests/{name}" for name in sorted(own | branched) if (project / "tests" / name).is_file()]


@pytest.mark.slow
@pytest.mark.timeout(SUITE_TIMEOUT + 60)
@pytest.mark.parametrize("name", [name for name in COMBINATIONS if name not in ("all", "none")])
def test_generated_tests_pass(name, cookies, forkserver, tmp_path):
    """Each trick and each tracker alone: the fast lane of its tests (files_testing). The whole generated suite runs in
    the all-on render, its fast lane in the all-off and default renders, and the files where the network matters in
    another model's (test_bake.py)."""
    project = baked_project(cookies, **COMBINATIONS[name])
    files = files_testing(project, ABOUT[name])
    assert files, f"{name} adds and changes no test"
    args = ["-q", *own_pytest_run(), "-m", "not slow", *files]
    code, summary = pytest_in_fork(forkserver, project, args, tmp_path / "suite.log", SUITE_TIMEOUT)
    assert code == 0, f"{name}: exit {code} (None: ran past {SUITE_TIMEOUT} s)\n{summary}"


def smoke_in_subprocesses(project: Path, features: set[str], run: Path) -> Run:
    """Two steps with every chosen trick on, each command (and its resume) in a fresh interpreter as a user starts
    it: `python -m <package> train`, on whatever device the machine has, as no process group."""
    tricks = [trick for trick in TRICKS if trick in features]
    flags = smoke_flags(tricks, "small_cnn")
    if "tracker=mlflow" in features:
        flags += ["--tracking-uri", str(mlflow_store(run))]
    train = ["train", "--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "8", "--output-dir", str(run)]
    commands, log, checkpoint_epochs = smoke_commands([*train, *flags], tricks), "", []
    for command in commands:
        done = run_in(project, "-m", package_of(project), *command)
        log += done.stdout + done.stderr
        if (run / "last.pt").exists():
            checkpoint_epochs.append(torch.load(run / "last.pt", weights_only=True)["epoch"])
    mixed = CHOICES["amp_precision"][0] if CUDA else cpu_mixed_precision()  # the render's default, or the CPU's
    precision = mixed if "use_amp" in tricks else "fp32"
    return Run(run, log, "small_cnn", "auto", precision, len(commands), checkpoint_epochs)


# Every trick alone and each tracker alone are combinations of the matrix too, smoke-trained there with the same checks
# in forked children (test_matrix.py): in fresh interpreters, as a user starts them, every trick at once and none.
SUBPROCESS_SMOKES = ("all", "none")


@pytest.mark.parametrize("name", SUBPROCESS_SMOKES)
def test_smoke_run_with_every_chosen_trick_active(name, cookies_session, tmp_path):
    tricks = features_on(COMBINATIONS[name])
    project = baked_project(cookies_session, **COMBINATIONS[name])
    check_run(smoke_in_subprocesses(project, tricks, tmp_path / "run"), tricks)


NEEDING = [trick for trick in TRICKS if REGISTRY[trick].requires]


@pytest.mark.parametrize("trick", NEEDING, ids=[REGISTRY[trick].short for trick in NEEDING])
def test_a_trick_without_the_one_it_needs_is_refused(trick, tmp_path, capfd):
    assert_refused_for_what_it_needs(tmp_path, capfd, {trick: True, REGISTRY[trick].requires: False})


def test_no_generated_test_file_runs_twice_on_the_same_code(cookies_session):
    """Across the lanes of generated tests this suite declares (test_bake's SUITES and model lanes, each trick and each
    tracker alone here), no generated test file runs twice with the same text on the same modules (checks.code_run_by):
    a lane added to these tables that only repeats another's work fails here. The digest is strict: the generated
    conftest imports train, which imports nearly every module, so two files differ wherever their renders do."""
    runs = {f"{render} render": (NAMED[render], None) for render, *_ in SUITES.values()}  # its lanes split its tests
    runs |= {f"{model} render": ({"model": model}, NETWORK_LANE if model == NETWORK_LANE_MODEL else MODEL_LANE)
             for model in CHOICES["model"][1:]}  # fmt: skip
    runs |= {f"{name} alone": (COMBINATIONS[name], name) for name in COMBINATIONS if name not in ("all", "none")}
    ran_by = {}
    for run, (answers, files) in runs.items():
        project = baked_project(cookies_session, **answers)
        if isinstance(files, str):  # a lane alone: the files it runs
            files = files_testing(project, ABOUT[files])
        for file in files or sorted(f"tests/{path.name}" for path in (project / "tests").glob("test_*.py")):
            ran_by.setdefault(code_run_by(project, project / file), []).append(f"{file} of the {run}")
    assert not [runs for runs in ran_by.values() if len(runs) > 1]
