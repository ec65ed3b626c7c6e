"""Renders: clean files, lint-free code, passing generated tests, and training that really learns."""

import csv
import json
from pathlib import Path

import pytest
import yaml
from checks import assert_ruff_clean, assert_valid_files, tomllib
from PIL import Image
from render import CHOICES, baked_project, package_of
from runners import own_pytest_run, pytest_in_fork, run_in
from tricks import NAMED, TRICKS, answers_for


@pytest.fixture(scope="module", params=CHOICES["model"])
def model_project(request, cookies_session) -> Path:
    return baked_project(cookies_session, model=request.param)


def test_render_has_no_leftover_jinja_and_valid_files(model_project):
    assert_valid_files(model_project)
    package = package_of(model_project)
    assert (model_project / "src" / package / "__main__.py").is_file()
    scripts = tomllib.loads((model_project / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {model_project.name: f"{package}.cli:main"}


def test_render_is_ruff_clean(model_project):
    assert_ruff_clean(model_project)


# Measured with `<project> train --epochs 1 --device cpu` on an idle 2-core machine (synthetic data, fp32)
SECONDS_PER_EPOCH = {"small_cnn": 1.6, "resnet18": 9.7, "mobilenet_v3_small": 4.3, "efficientnet_b0": 11.5}


def test_readme_says_what_an_epoch_of_the_chosen_model_costs(model_project):
    """A newcomer's first `train` uses the default model: the README's claim must be that model's, not small_cnn's."""
    model = json.loads((model_project / ".cookiecutter.json").read_text())["cookiecutter"]["model"]
    (line,) = [line for line in (model_project / "README.md").read_text().splitlines() if line.endswith("CPU cores")]
    claimed = float(line.split("~")[1].split()[0])
    assert f"{model}: ~" in line and 0.5 <= claimed / SECONDS_PER_EPOCH[model] <= 2, line


SUITE_TIMEOUT = 1500  # a generated suite's lane beside the other worker
# name: (the render, its tests, without fcntl). All-on holds every generated test there is: both its lanes run, the
# slow one (real subprocesses, signals and worker processes) in the lane of multi-process tests; all-off and the
# defaults (what most users render) run their fast lane, the defaults' as on a system without fcntl (Windows): the
# folder locks through filelock's fallback, the others' through flock. Multi-label, all-on for the other task, runs its
# fast lane: its slow one is all-on's again (subprocesses, signals, workers), but for the task.
SUITES = {
    "all-on": ("all-on", "not slow", False),
    "all-on-slow": ("all-on", "slow", False),
    "defaults-without-fcntl": ("defaults", "not slow", True),
    "all-off": ("all-off", "not slow", False),
    "multi-label": ("multi-label", "not slow", False),
}


@pytest.mark.slow
@pytest.mark.timeout(SUITE_TIMEOUT + 60)
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.processes] if "slow" in n else []) for n in SUITES]
)
def test_named_render_passes_its_own_suite(name, cookies, forkserver, tmp_path):
    """Each named render's suite, run once, in the render (test_install.py installs them)."""
    render, lane, without_fcntl = SUITES[name]
    args = ["-q", *own_pytest_run(), "-m", lane]
    project = baked_project(cookies, **NAMED[render])
    code, summary = pytest_in_fork(forkserver, project, args, tmp_path / "log", SUITE_TIMEOUT, without_fcntl)
    assert code == 0, f"{name}: exit {code} (None: ran past {SUITE_TIMEOUT} s)\n{summary}"


# The model prompt changes one value of the render's code, the default model (and test_model.py, which tests it): the
# rest of each model's suite is the defaults' suite again, on another network (tiny_config trains the default model).
# Every model runs test_model.py; one, the quickest torchvision one, also runs the files whose tests depend on the
# network's own layers and state: export and its parity, features by layer, memory layouts and compile, the loop,
# bitwise resume with BatchNorm's buffers, clipping and smoothing on its gradients and logits. Its data, command-line,
# report, config and tune tests run on small_cnn only: they test the pipeline around the model (about 75 s of worker
# time).
NETWORK_LANE_MODEL = "mobilenet_v3_small"
MODEL_LANE = ["tests/test_model.py"]
NETWORK_LANE = [*MODEL_LANE, *(f"tests/test_{name}.py" for name in ("export", "features", "speed_tricks", "train",
                "checkpoint", "grad_clipping", "label_smoothing"))]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(SUITE_TIMEOUT + 60)
@pytest.mark.parametrize("model", CHOICES["model"][1:])
def test_generated_tests_pass(model, cookies, forkserver, tmp_path):
    """The generated tests of the default render of each other model (small_cnn's: the defaults above)."""
    project = baked_project(cookies, model=model)
    tests = NETWORK_LANE if model == NETWORK_LANE_MODEL else MODEL_LANE
    args = ["-q", *own_pytest_run(), "-m", "not slow", *tests]
    code, summary = pytest_in_fork(forkserver, project, args, tmp_path / "log", SUITE_TIMEOUT)
    assert code == 0, f"{model}: exit {code} (None: ran past {SUITE_TIMEOUT} s)\n{summary}"


def test_smoke_training_step_in_a_subprocess(model_project, tmp_path):
    package = package_of(model_project)
    args = ["train", "--data", "synthetic", "--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "8"]
    done = run_in(model_project, "-m", package, *args, "--output-dir", str(tmp_path / "run"))
    assert done.stdout.strip().splitlines()[-1].endswith(f": {tmp_path / 'run' / 'model.pt'}")
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["model"] == model_project_model(model_project)


def model_project_model(project: Path) -> str:
    text = (project / "src" / package_of(project) / "config" / "__init__.py").read_text()
    return text.split('model: str = option("', 1)[1].split('"', 1)[0]


@pytest.mark.slow
def test_demo_learns_the_synthetic_data(default_project, tmp_path):
    """The README's demo: defaults everywhere. Proves the loop learns, not merely runs."""
    done = run_in(default_project, "-m", package_of(default_project), "train", "--output-dir", str(tmp_path))
    with open(tmp_path / "metrics.csv") as file:
        rows = list(csv.DictReader(file))
    best = max(float(row["val_acc"]) for row in rows)
    assert best >= 0.90, done.stdout
    assert float(rows[0]["val_acc"]) < best  # it got there by training
    assert done.stdout.strip().splitlines()[-1].startswith(f"best val_acc {best:.4f}")


def test_image_folder_trains_evaluates_and_predicts(default_project, tmp_path):
    root = tmp_path / "images"
    for split, count in (("train", 8), ("val", 4)):
        for label, colour in (("red", (220, 30, 30)), ("blue", (30, 30, 220))):
            (root / split / label).mkdir(parents=True)
            for i in range(count):
                Image.new("RGB", (48, 40), tuple(c + 3 * i for c in colour)).save(root / split / label / f"{i}.png")
    package, run = package_of(default_project), tmp_path / "run"
    common = ["--device", "cpu", "--num-workers", "0"]
    run_in(default_project, "-m", package, "train", "--data", str(root), "--epochs", "2", "--image-size", "32",
           "--batch-size", "4", "--output-dir", str(run), *common)  # fmt: skip
    assert (run / "classes.txt").read_text().split() == ["blue", "red"]

    done = run_in(default_project, "-m", package, "evaluate", "--weights", str(run / "model.pt"), *common)
    assert done.stdout.startswith("accuracy ")
    with open(run / "per_class.csv") as file:
        assert [row["support"] for row in csv.DictReader(file)] == ["4", "4", "8", "8", "8"]

    image = root / "val" / "red" / "0.png"
    predict = ["-m", package, "predict", "--weights", str(run / "model.pt"), "--output", str(tmp_path / "p.csv")]
    done = run_in(default_project, *predict, str(image))
    path, label, probability = done.stdout.strip().splitlines()[-1].split("\t")
    assert path == str(image) and label in ("red", "blue") and 0.5 <= float(probability) <= 1
    assert (tmp_path / "p.csv").read_text().splitlines()[1].startswith(f"{image},{label},")


def test_longest_allowed_package_name_is_still_ruff_clean(cookies):
    assert_ruff_clean(baked_project(cookies, project_slug="a" * 60, package_name="b" * 40, **answers_for(TRICKS)))
