"""The output dir of a run: one run at a time, never a folder of other files, a clean --overwrite, nothing left of
killed writes; and every command says in one line when it cannot write, instead of a traceback."""

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import listing
from PIL import Image

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.core.files import LOCK_FILE
from {{ cookiecutter.package_name }}.core.run_folder import RunFolder, releasing_run_folders
from {{ cookiecutter.package_name }}.serving.inference import default_evaluation_dir
from {{ cookiecutter.package_name }}.training import train as train_module

SMOKE = ["--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "16", "--device", "cpu", "--no-plots"]
SMOKE += ["--model", "small_cnn"]  # whatever the default: the layer `fc` below is its


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]  # notices may come before it
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def test_a_second_run_into_a_folder_in_use_stops_with_one_line(tmp_path, capsys):
    busy = RunFolder(tmp_path / "run", overwrite=False)
    busy.claim()  # as a run in another process holds it
    assert main(["train", *SMOKE, "--output-dir", str(tmp_path / "run")]) == 5
    assert "another training run is writing into" in one_line_error(capsys)
    assert os.listdir(tmp_path / "run") == [LOCK_FILE]  # the other run's
    (tmp_path / "run" / "classes.txt").write_text("a\nb\n")  # that run has begun to write its files
    assert main(["train", *SMOKE, "--output-dir", str(tmp_path / "run")]) == 5
    assert "another training run is writing into" in one_line_error(capsys)  # not "files no run wrote"


@releasing_run_folders
def claim_and_fork(folder: Path) -> multiprocessing.Process:
    """A run that forks a process which outlives it, as persistent DataLoader workers can."""
    RunFolder(folder, overwrite=False).claim()
    child = multiprocessing.get_context("fork").Process(target=signal.pause, daemon=True)
    child.start()
    return child


WITHOUT_POSIX = """
import importlib, os, pkgutil, signal, sys
sys.modules["fcntl"] = None  # as on Windows, with what else this package could reach for there
del signal.SIGUSR1, signal.SIGCHLD, os.fchmod
import {{ cookiecutter.package_name }} as package
for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    if module.name != package.__name__ + ".__main__":  # it would run the command line
        importlib.import_module(module.name)
from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.core.files import hold
args = ["train", *sys.argv[1:]]
first = main(args)
held = hold(sys.argv[-1])  # as a run in another process holds the folder
print("exit codes", first, main([*args, "--overwrite"]))  # --overwrite: past "holds a finished run", to the lock
"""


def test_every_module_imports_and_a_run_guards_its_folder_without_fcntl_or_the_other_posix_calls(tmp_path):
    """Windows has no fcntl, SIGUSR1, SIGCHLD or os.fchmod: every module imports without them, a run trains, and a
    second run into a folder in use is refused (filelock, here through its fallback for systems without locks)."""
    run = tmp_path / "run"
    # its own folders and tracking store: a lock file that flock left in a shared one reads as held without flock
    env = {key: value for key, value in os.environ.items() if not key.endswith("TRACKING_URI")}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_POSIX, *SMOKE, "--output-dir", str(run)],
        env=env | {"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "OMP_NUM_THREADS": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "exit codes 0 5" in done.stdout, done.stderr
    assert "another training run is writing into" in done.stderr and (run / "model.pt").is_file()
    assert "Warning" not in done.stderr  # filelock's note on its fallback: the refusal stays one line


def test_a_process_forked_during_a_run_does_not_keep_its_folder_locked_after_it(tmp_path):
    child = claim_and_fork(tmp_path / "run")
    try:
        claim_and_fork(tmp_path / "run").kill()  # the same process goes on: a test, a notebook, a tune's next trial
    finally:
        child.kill()


def test_a_run_that_another_run_wrote_into_as_it_started_is_refused_not_continued(tmp_path, capsys, monkeypatch):
    """The checks read the folder before the run claims it; another run that ended meanwhile (its newer epochs, or
    a finished model.pt) would be continued from a stale state or replaced. Here the other run trains while this
    one builds its data, between the checks and the claim."""
    run, left, real_build_data = tmp_path / "run", {}, train_module.build_data

    def build_data_as_another_run_trains(*args, **kwargs):
        monkeypatch.setattr(train_module, "build_data", real_build_data)
        assert main(["train", *SMOKE, "--output-dir", str(run)]) == 0  # the other run, from start to end
        left.update(files_in(run))
        return real_build_data(*args, **kwargs)

    monkeypatch.setattr(train_module, "build_data", build_data_as_another_run_trains)
    assert main(["train", *SMOKE, "--output-dir", str(run)]) == 5
    assert "another training run wrote into" in one_line_error(capsys)
    assert left and files_in(run) == left  # the other run's files, as it left them


def files_in(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


def test_a_link_planted_as_the_lock_of_a_folder_of_other_files_is_left_as_it_is(tmp_path, capsys):
    mine, target = tmp_path / "mine", tmp_path / "precious.txt"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    target.write_text("keep")
    (mine / LOCK_FILE).symlink_to(target)
    assert main(["train", *SMOKE, "--output-dir", str(mine)]) == 5
    assert "holds files that no training run wrote (notes.txt)" in one_line_error(capsys)
    assert (mine / LOCK_FILE).is_symlink() and target.read_text() == "keep"


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(fingerprint, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("# my notes\nepochs: 3\n")
    (mine / "classes.txt").write_text("my own list\n")
    before = fingerprint(mine)
    for extra in ([], ["--overwrite"]):  # --overwrite replaces a run, never other files
        assert main(["train", *SMOKE, "--output-dir", str(mine), *extra]) == 5
        assert "holds files that no training run wrote (classes.txt, config.yaml)" in one_line_error(capsys)
    assert fingerprint(mine) == before


def test_overwrite_starts_from_an_empty_run_folder_and_keeps_other_files(tmp_path):
    run = tmp_path / "run"
    assert main(["train", *SMOKE, "--output-dir", str(run)]) == 0
    for path in run.rglob("*"):  # every file the run wrote: each must go, or be written anew by the next run
        if path.is_file() and path.name != LOCK_FILE:
            path.write_bytes(b"stale")
    (run / "eval-model-old").mkdir()
    (run / "eval-model-old" / "per_class.csv").write_text("old")
    (run / "features_fc.npy").write_bytes(b"old")
    (run / "split.csv").write_text("path,label,split\nold.png,cat,val\n")
    (run / "notes.txt").write_text("mine")
    (run / "backbone.pt").write_bytes(b"mine")  # names the run never writes, however they look
    (run / "eval-mine").mkdir()
    (run / ".model.pt.k2j4.tmp").write_bytes(b"left by a kill")
    assert main(["train", *SMOKE, "--output-dir", str(run), "--overwrite"]) == 0
    left = listing(run)
    assert not [name for name in left if name.startswith(("eval-model", "features_", "split.csv", "."))], left
    assert (run / "notes.txt").read_text() == "mine" and (run / "model.pt").is_file()
    assert (run / "backbone.pt").read_bytes() == b"mine" and (run / "eval-mine").is_dir()
    assert not [path for path in run.rglob("*") if path.is_file() and path.read_bytes() == b"stale"]


def test_a_planted_link_in_place_of_an_evaluation_folder_is_replaced(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    assert main(["train", *SMOKE, "--output-dir", str(run)]) == 0
    outside.mkdir()
    evaluation = default_evaluation_dir(str(run / "model.pt"), "synthetic", tta=False)
    evaluation.symlink_to(outside, target_is_directory=True)
    assert main(["evaluate", "--weights", str(run / "model.pt"), "--device", "cpu"]) == 0
    assert list(outside.iterdir()) == [] and not evaluation.is_symlink()
    assert (evaluation / "per_class.csv").is_file()
    chosen = tmp_path / "reports"  # a link the user names with --output-dir is theirs: followed
    chosen.symlink_to(outside, target_is_directory=True)
    weights = str(run / "model.pt")
    assert main(["evaluate", "--weights", weights, "--device", "cpu", "--output-dir", str(chosen)]) == 0
    assert chosen.is_symlink() and (outside / "per_class.csv").is_file()


def test_evaluations_of_other_data_or_with_tta_get_folders_of_their_own(tmp_path):
    weights = str(tmp_path / "model.pt")
    folders = {default_evaluation_dir(weights, data, tta) for data in ("a/test", "b/test") for tta in (False, True)}
    assert len(folders) == 4 and all(folder.name.startswith("eval-model-test-") for folder in folders)


@pytest.mark.slow
def test_a_full_disk_during_training_is_one_line(tmp_path):
    """A file-size limit stands in for a full disk: the first weights or checkpoint file cannot be written."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "train", *SMOKE]
    resource = pytest.importorskip("resource")  # POSIX only, as is the file-size limit
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))  # noqa: E731
    done = subprocess.run(
        [*command, "--output-dir", str(tmp_path / "run")], env=env, preexec_fn=limit, capture_output=True, text=True
    )
    assert done.returncode == 5, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: cannot write ")
    assert not list((tmp_path / "run").glob(".*.tmp"))  # nothing half-written is left


def test_commands_that_cannot_write_say_so_in_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SMOKE, "--output-dir", str(run)]) == 0
    capsys.readouterr()
    (tmp_path / "file").write_text("not a folder")
    blocked = str(tmp_path / "file" / "out")  # stands in for a read-only folder (root may write anywhere)
    weights, image = str(run / "model.pt"), tmp_path / "image.png"
    (run / "learning_curves.png").mkdir()  # plot cannot replace it
    Image.new("RGB", (32, 32)).save(image)
    commands = [
        ["evaluate", "--weights", weights, "--device", "cpu", "--output-dir", blocked],
        ["predict", "--weights", weights, str(image), "--device", "cpu", "--output", blocked + ".csv"],
        ["features", "--weights", weights, "--layer", "fc", "--device", "cpu", "--output", blocked],
        ["plot", str(run)],
    ]
    for command in commands:
        assert main(command) == 5, command
        message = one_line_error(capsys)
        advice = "a folder stands in its place" if command[0] == "plot" else "a file stands where the path needs"
        assert "cannot write" in message and advice in message, command  # advice that fits the reason


def test_predict_never_writes_over_a_file_that_holds_no_predictions(fingerprint, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SMOKE, "--output-dir", str(run)]) == 0
    capsys.readouterr()
    before = fingerprint(run / "model.pt")
    image = tmp_path / "image.png"
    Image.new("RGB", (32, 32)).save(image)
    predict = ["predict", "--weights", str(run / "model.pt"), str(image), "--device", "cpu", "--output"]
    assert main([*predict, str(run / "model.pt")]) == 2
    assert "exists and holds no predictions" in one_line_error(capsys)
    assert fingerprint(run / "model.pt") == before
    assert main([*predict, str(tmp_path / "p.csv")]) == 0 and main([*predict, str(tmp_path / "p.csv")]) == 0
    text = (tmp_path / "p.csv").read_bytes()
    header = b"path,{{ 'labels,' if cookiecutter.task == 'multi_label' }}class_1,probability_1\n"
    assert text.startswith(header) and b"\r" not in text  # plain line ends
    assert torch.load(run / "model.pt", weights_only=True)  # still the weights
    assert main([*predict, str(tmp_path)]) == 2
    assert one_line_error(capsys) == f"error: --output {tmp_path} is a folder; give a file name such as predictions.csv"
