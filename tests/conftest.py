import fcntl
import functools
import multiprocessing
import multiprocessing.util
import os
import runpy
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import jinja2
import pytest
from binaryornot.check import is_binary
from cookiecutter.exceptions import FailedHookException
from matrix import ACCEPTED, EXTREMES, REJECTED
from render import SYSTEM_TEMP, SYSTEM_TEMP_VARIABLE, baked_project


def pytest_configure(config):
    os.environ["OMP_NUM_THREADS"] = "1"  # many workers on 2 cores: threads would only fight
    os.environ["WANDB_MODE"] = "offline"  # whatever this machine's W&B settings: no network, no account
    # W&B lists every installed package into each run at its start (0.3 s a run, thousands of runs here): not ours
    os.environ["WANDB_X_SAVE_REQUIREMENTS"] = "false"
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
    if not hasattr(config, "workerinput"):  # the run's first process: its workers, started later, inherit this
        os.environ[LANE_LOCK] = str(private / "processes-lane.lock")
        # and so does every process the suite starts (`python -m cookiecutter`, the audit script, torchrun): a render
        # in a child must not leave its hooks in the system temp dir, which test_hooks watches from another worker
        os.environ[SYSTEM_TEMP_VARIABLE] = str(SYSTEM_TEMP)
        os.environ["TMPDIR"] = str(private)
    jinja2.Environment.compile = _compile_once


_compiled, _compile = {}, jinja2.Environment.compile


def _compile_once(env, source, name=None, filename=None, raw=False, defer_init=False):
    """cookiecutter builds a fresh Jinja environment per render and so compiles every template file again: two
    thirds of a render. The code Jinja compiles depends only on the source and the environment's syntax
    settings, never on the answers, so the matrix compiles each distinct template text once per process."""
    if not isinstance(source, str):
        return _compile(env, source, name, filename, raw, defer_init)
    syntax = (env.trim_blocks, env.lstrip_blocks, env.keep_trailing_newline, env.newline_sequence, env.optimized)
    key = (source, name, filename, raw, defer_init, syntax, tuple(sorted(env.extensions)))
    if key not in _compiled:
        _compiled[key] = _compile(env, source, name, filename, raw, defer_init)
    return _compiled[key]


# What renders and their tests import, loaded once in the fork server (imports only: no torch op, no thread, no CUDA).
PRELOAD = [
    "torch",
    "torch.distributed",
    "torch.utils.tensorboard",
    "torchvision",
    "torchvision.transforms.v2",  # every render's data.py: 16 ms a run
    "torch.distributed.run",  # torchrun's elastic launcher, which the DDP renders import: 20 ms a run
    "torch.utils.serialization",  # the smoke runs' settings for torch.save
    "torchinfo",
    "tqdm",
    "yaml",
    "numpy",
    "PIL.Image",
    "matplotlib.pyplot",
    # the trackers' own imports: 1.5-2 s a run with MLflow or W&B, half the matrix (both import no thread)
    "mlflow",
    "mlflow.store.db.utils",
    "mlflow.store.tracking.sqlalchemy_store",
    "sqlalchemy.dialects.sqlite",  # what an MLflow run's first call imports: 30 ms a run
    "wandb",
    "wandb.sdk.launch.inputs.internal",
    # what forked suites import before their first test: pytest and its plugins (hypothesis's imports hypothesis as a
    # suite ends, 1.3 s), and the generated tests' own libraries
    "pytest",
    "hypothesis",
    "optuna",
    "onnx",
    "onnxruntime",
    "sklearn.metrics",
    "smoke_child",
    "frozen_heap",  # last
]


@pytest.fixture(scope="session")
def forkserver():
    """Children forked from a server that imported torch once (and ran no torch op): ~3 s saved per run."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


@pytest.fixture
def scratch(tmp_path):
    """A folder for a smoke run's outputs in memory where the system has /dev/shm: checkpoints are written with
    fsync, which costs real milliseconds on a disk and nothing in tmpfs, across thousands of runs."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="smoke-", dir=shm))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def quick_renders(monkeypatch):
    """Renders as cookiecutter makes them, minus two costs that do not depend on the answers (the matrix's 768 renders):
    the hooks run in this process instead of a new interpreter each (40 ms a render: they use the standard library
    only and run as __main__ in their folder; a non-zero exit or an exception fails the render as cookiecutter's own
    runner fails it, with what the hook said on stderr), and whether a template file is binary is read once per file,
    not once per render. For renders that must succeed: every other render, refusals included, runs the hooks as
    users do."""
    import cookiecutter.generate
    import cookiecutter.hooks

    def run_script(script_path: str, cwd=".") -> None:
        here = os.getcwd()
        os.chdir(cwd)
        try:
            runpy.run_path(script_path, run_name="__main__")
        except SystemExit as stop:
            if stop.code not in (None, 0):
                print(stop.code, file=sys.stderr)
                raise FailedHookException(f"Hook script failed (exit status: {stop.code})") from None
        except Exception as exc:
            traceback.print_exc()
            raise FailedHookException(f"Hook script failed ({exc!r})") from None
        finally:
            os.chdir(here)

    monkeypatch.setattr(cookiecutter.hooks, "run_script", run_script)
    monkeypatch.setattr(cookiecutter.generate, "is_binary", _template_file_is_binary)


def _template_file_is_binary(path: str) -> bool:
    return _is_binary(os.path.abspath(path))  # cookiecutter passes it relative to the template's folder


@functools.cache
def _is_binary(path: str) -> bool:
    return is_binary(path)


@pytest.fixture(scope="session")
def default_project(cookies_session) -> Path:
    return baked_project(cookies_session)


MATRIX_TESTS = {  # test: (what it counts, how many there are)
    "test_combination_renders_clean_and_trains_on_cpu": (
        "accepted combinations smoke-trained on CPU (each rendered and checked)",
        len(ACCEPTED),
    ),
    "test_combination_trains_on_cuda": ("on CUDA", len(ACCEPTED)),
    "test_every_model_trains_with_every_trick_on_and_every_trick_off": (
        "model x all-on/all-off runs",
        2 * len(EXTREMES),
    ),
    "test_refused_combination_fails_with_its_message_and_no_output": ("refused by the hook as expected", len(REJECTED)),
}


@pytest.hookimpl(trylast=True)  # after the slowest durations and the short summary: the last lines before pytest's
def pytest_terminal_summary(terminalreporter):
    """Say how much of the combination matrix really ran, from the passed cases (skips are not passes)."""
    passed = [r for r in terminalreporter.stats.get("passed", []) if r.when == "call"]
    parts = []
    for name, (what, total) in MATRIX_TESTS.items():
        ran = [r.duration for r in passed if f"::{name}[" in r.nodeid]
        cost = f" ({sum(ran) / len(ran):.2f} s each, {sum(ran):.0f} s of worker time)" if ran else ""
        parts.append(f"{len(ran)} of {total} {what}{cost}")
    if any(f"::{name}[" in r.nodeid for r in passed for name in MATRIX_TESTS):
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
    for line in time_table(terminalreporter.stats, terminalreporter.config):
        terminalreporter.write_line(line)


LANE_LOCK = "TORCH_TEMPLATE_PROCESSES_LANE"  # the file whose lock the tests marked `processes` take in turn


@pytest.hookimpl(tryfirst=True, wrapper=True)  # outermost: the wait for the lane is not counted in the test's timeout
def pytest_runtest_protocol(item, nextitem):
    """The lane of multi-process tests (torchrun jobs, signals, kills: marked `processes`): they run one at a time
    across the workers, each beside one worker's other test at most, so that the ranks of a job get the cores they
    wait on. scripts/test.sh runs 2 workers; alone (no pytest-xdist) there is nothing to wait for."""
    lock = os.environ.get(LANE_LOCK)
    if lock is None or item.get_closest_marker("processes") is None:
        return (yield)
    with open(lock, "a") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        try:
            return (yield)
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


STARTED = pytest.StashKey[float]()


def pytest_sessionstart(session):
    session.config.stash[STARTED] = time.monotonic()


def time_table(stats: dict, config) -> list[str]:
    """Where the time went, so that a regression shows in every CI log: per test file, its cases and the seconds the
    workers spent in them (set-up, call and tear-down), costliest first; the run's wall time (and the set-up's, when
    scripts/test.sh noted when it started); and what one more yes/no prompt would add to the matrix."""
    reports = [r for kind in stats.values() for r in kind if getattr(r, "nodeid", "") and hasattr(r, "duration")]
    if not reports:
        return []
    files: dict[str, tuple[set, list]] = {}
    for report in reports:  # warnings have no node and no duration
        cases, seconds = files.setdefault(report.nodeid.split("::")[0], (set(), [0.0]))
        cases.add(report.nodeid)
        seconds[0] += report.duration
    workers = config.getoption("numprocesses", None) or 1  # pytest-xdist's -n
    wall = time.monotonic() - config.stash.get(STARTED, time.monotonic())
    total = sum(seconds[0] for _, seconds in files.values())
    lines = ["time table:", f"{'file':<32} {'cases':>6} {'worker s':>9} {'share':>6}"]
    for file, (cases, seconds) in sorted(files.items(), key=lambda item: -item[1][1][0]):
        lines.append(f"{file.removeprefix('tests/'):<32} {len(cases):>6} {seconds[0]:>9.0f} {seconds[0] / total:>6.0%}")
    lines.append(f"{'all':<32} {sum(len(cases) for cases, _ in files.values()):>6} {total:>9.0f}")
    started = os.environ.get("SUITE_STARTED")  # seconds since the epoch as scripts/test.sh began, set-up included
    setup = f", after {time.time() - float(started) - wall:.0f} s of set-up" if started else ""
    lines.append(f"wall time: {wall:.0f} s on {workers} worker(s){setup}")
    matrix = [r for r in reports if "::test_combination_renders_clean_and_trains_on_cpu[" in r.nodeid]
    if matrix:  # a new prompt doubles the matrix: as many more combinations as it has now, at what one costs here
        more = len(ACCEPTED) * sum(r.duration for r in matrix) / len({r.nodeid for r in matrix})
        lines.append(
            f"one more yes/no prompt: about {len(ACCEPTED)} more combinations to render, check and smoke-train, "
            f"+{more:.0f} s of worker time (+{more / workers:.0f} s of wall time on {workers} worker(s))"
        )
    return lines


LONG = ("::test_named_render_passes_its_own_suite", "::test_generated_tests_pass", "test_mutations.py::")  # longest 1st


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: the shares are of what runs
def pytest_collection_modifyitems(items):
    """Each case that runs a whole generated suite takes minutes: deal them out so that every worker starts with its
    share of them, and the thousands of short cases fill in around them. The lane of multi-process tests goes first
    on the first worker, in turn, while the other starts on its long cases. pytest-xdist's worksteal gives each
    worker a contiguous share of the list (then balances by stealing from the ends), hence this order."""

    def weight(item) -> int | None:
        return next((i for i, part in enumerate(LONG) if part in item.nodeid), None)

    lane = [item for item in items if item.get_closest_marker("processes")]
    rest = [item for item in items if not item.get_closest_marker("processes")]
    long = sorted((i for i in rest if weight(i) is not None), key=lambda i: ("[all-on" not in i.nodeid, weight(i)))
    short = [item for item in rest if weight(item) is None]
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    ordered, left = [], len(items)
    for worker in range(workers):
        share = left // (workers - worker)  # what worksteal hands this worker
        mine = (lane if worker == 0 else []) + long[worker::workers]
        take = max(share - len(mine), 0)
        ordered += mine + short[:take]
        short, left = short[take:], left - len(mine) - take
    items[:] = ordered + short
