import multiprocessing
import multiprocessing.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import baked_project
from matrix import RENDER_CHUNKS


def pytest_configure(config):
    os.environ["OMP_NUM_THREADS"] = "1"  # many workers on 2 cores: threads would only fight
    # multiprocessing makes its own temp dir and removes it at exit, after our cleanup: give it the system one.
    multiprocessing.util.get_temp_dir()
    # cookiecutter leaves every rendered hook behind as a temp file (won't fix upstream): keep them
    # out of the system temp dir by pointing this process's temp dir at a private folder.
    private = Path(tempfile.mkdtemp(prefix="torch-template-tests-"))
    tempfile.tempdir = str(private)
    # cookiecutter called directly (not through pytest-cookies) keeps replay files in the home dir: not ours.
    settings = private / "cookiecutter-config.yaml"
    settings.write_text(f"replay_dir: {private / 'replay'}\ncookiecutters_dir: {private / 'templates'}\n")
    os.environ["COOKIECUTTER_CONFIG"] = str(settings)
    config.add_cleanup(lambda: shutil.rmtree(private, ignore_errors=True))


PRELOAD = ["torch", "torchvision", "torchinfo", "tqdm", "yaml", "numpy", "PIL.Image", "smoke_child"]


@pytest.fixture(scope="session")
def forkserver():
    """Children forked from a server that imported torch once (and ran no torch op): ~3 s saved per run."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


@pytest.fixture(scope="session")
def default_project(cookies_session) -> Path:
    return baked_project(cookies_session)


MATRIX_TESTS = {
    "test_every_combination_renders_clean": "rendered and checked",
    "test_combination_trains_on_cpu": "trained on CPU",
    "test_combination_trains_on_cuda": "trained on CUDA",
    "test_refused_combination_fails_with_its_message_and_no_output": "refused by the hook as expected",
}


def pytest_terminal_summary(terminalreporter):
    """Say how much of the combination matrix really ran (skips are not passes)."""
    passed = [r for r in terminalreporter.stats.get("passed", []) if r.when == "call"]
    counts = {name: sum(f"::{name}[" in r.nodeid for r in passed) for name in MATRIX_TESTS}
    # a passed group counts its renders: ids are [NN-of-MM]
    groups = [
        int(r.nodeid.split("[")[1][:2]) - 1 for r in passed if "::test_every_combination_renders_clean[" in r.nodeid
    ]
    counts["test_every_combination_renders_clean"] = sum(len(RENDER_CHUNKS[group]) for group in groups)
    if any(counts.values()):
        parts = [f"{count} {MATRIX_TESTS[name]}" for name, count in counts.items()]
        terminalreporter.write_line("combination matrix: " + "; ".join(parts))
    outcomes = [
        outcome
        for outcome in ("passed", "failed")
        for r in terminalreporter.stats.get(outcome, [])
        if r.when == "call" and "::test_each_breakage_is_caught_by_the_tests_that_guard_it[" in r.nodeid
    ]
    if outcomes:
        caught = outcomes.count("passed")
        terminalreporter.write_line(f"mutation check: {caught} of {len(outcomes)} breakages caught by the tests")
