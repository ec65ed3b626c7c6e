import ast
import csv
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from {{ cookiecutter.package_name }} import cli
from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.core import runtime
from {{ cookiecutter.package_name }}.core.errors import DeviceError

no_accelerator = pytest.mark.skipif(torch.accelerator.is_available(), reason="checks a machine without an accelerator")
SMOKE = ["--epochs", "1", "--batch-size", "4", "--device", "cpu", "--num-workers", "0"]


{% if cookiecutter.task == "multi_label" %}
def test_train_evaluate_predict_on_an_image_folder(image_folder, tmp_path, capsys):
    """Class folders are multi-label data of one label per image."""
    run = tmp_path / "run"
    args = ["train", "--data", str(image_folder), "--image-size", "32", "--output-dir", str(run), *SMOKE]
    assert main(args) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith(f": {run / 'model.pt'}")

    training_report = (run / "per_class.csv").read_bytes()
    assert main(["evaluate", "--weights", str(run / "model.pt"), "--device", "cpu"]) == 0
    assert capsys.readouterr().out.startswith("mAP ")
    (evaluation,) = run.glob("eval-model-images-*")  # its own folder: the training run's report stays as it was
    assert (run / "per_class.csv").read_bytes() == training_report
    with open(evaluation / "per_class.csv") as file:
        rows = list(csv.DictReader(file))
    assert [r["class"] for r in rows] == ["cats", "dogs", "micro avg", "macro avg", "samples avg"]
    assert sum(int(r["support"]) for r in rows[:2]) == 6  # the 6 validation images, one label each
    assert not (evaluation / "confusion_matrix.csv").exists()

    photo = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), (200, 40, 40)).save(photo)
    output = tmp_path / "predictions.csv"
    command = ["predict", "--weights", str(run / "model.pt"), str(photo), "--output", str(output), "--top-k", "2"]
    assert main(command) == 0
    path, labels, *ranked = capsys.readouterr().out.strip("\n").split("\t")  # notices go to stderr
    probabilities = {name: float(probability) for name, probability in zip(ranked[::2], ranked[1::2], strict=True)}
    assert path == str(photo) and sorted(probabilities) == ["cats", "dogs"]
    assert labels == ";".join(name for name in ("cats", "dogs") if probabilities[name] >= 0.5)  # --threshold 0.5
    with open(output) as file:
        (written,) = list(csv.DictReader(file))
    assert (written["path"], written["labels"], written["class_1"]) == (path, labels, ranked[0])
    assert float(written["probability_1"]) == pytest.approx(float(ranked[1]), abs=1e-4)
{% else %}
def test_train_evaluate_predict_on_an_image_folder(image_folder, tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--data", str(image_folder), "--image-size", "32", "--output-dir", str(run), *SMOKE]
    assert main(args) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith(f": {run / 'model.pt'}")

    training_reports = {name: (run / name).read_bytes() for name in ("per_class.csv", "confusion_matrix.csv")}
    assert main(["evaluate", "--weights", str(run / "model.pt"), "--device", "cpu"]) == 0
    assert capsys.readouterr().out.startswith("accuracy ")
    (evaluation,) = run.glob("eval-model-images-*")  # its own folder: the training run's reports stay as they were
    assert {name: (run / name).read_bytes() for name in training_reports} == training_reports
    with open(evaluation / "per_class.csv") as file:
        rows = list(csv.DictReader(file))
    assert [r["class"] for r in rows] == ["cats", "dogs", "micro avg", "macro avg", "weighted avg"]
    assert sum(int(r["support"]) for r in rows[:2]) == 6
    assert (evaluation / "confusion_matrix.csv").read_text().startswith("true \\ predicted,cats,dogs")

    photo = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), (200, 40, 40)).save(photo)
    output = tmp_path / "predictions.csv"
    assert main(["predict", "--weights", str(run / "model.pt"), str(photo), "--output", str(output)]) == 0
    path, label, probability = capsys.readouterr().out.strip().split("\t")  # notices go to stderr
    assert path == str(photo) and label in ("cats", "dogs") and 0.5 <= float(probability) <= 1
    with open(output) as file:
        (written,) = list(csv.DictReader(file))
    assert (written["path"], written["class_1"]) == (path, label)
    assert float(written["probability_1"]) == pytest.approx(float(probability), abs=1e-4)
{% endif %}


NO_ACCELERATOR = "no GPU or other accelerator is available: running on the CPU."


@no_accelerator
def test_auto_device_falls_back_to_cpu_with_one_line_unless_the_cpu_was_chosen(tiny_config, capsys):
    args = ["train", "--max-steps-per-epoch", "1", "--output-dir", tiny_config.output_dir, *SMOKE[:4]]
    assert main([*args, "--gpus", "0"]) == 0
    captured = capsys.readouterr()  # a notice: on stderr, so that stdout carries results only
    assert captured.err.count(NO_ACCELERATOR) == 1 and "accelerator" not in captured.out
    assert main([*args, "--gpus", "cpu", "--overwrite"]) == 0
    assert NO_ACCELERATOR not in capsys.readouterr().err  # the CPU was chosen: no news


@pytest.mark.parametrize("kind", ["cuda", "mps", "xpu"])
def test_auto_trains_on_the_accelerator_torch_finds_and_one_named_but_missing_is_one_line(monkeypatch, kind):
    """Faked: torch.accelerator answers as on a machine with a `kind` device (an NVIDIA GPU, a Mac, an Intel GPU)."""
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: torch.device(kind))
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: 1)
    assert runtime.resolve_device("auto", "0") == runtime.resolve_device(kind, "0") == torch.device(kind, 0)
    assert runtime.resolve_device("auto", "cpu") == runtime.resolve_device("cpu", "0") == torch.device("cpu")
    for other in {"mps", "xpu"} - {kind}:
        with pytest.raises(DeviceError, match=f"^--device {other} was asked for but this machine has none; pass --"):
            runtime.resolve_device(other, "0")


@no_accelerator
@pytest.mark.parametrize("kind", ["cuda", "mps", "xpu"])
def test_a_device_this_machine_lacks_is_one_line(kind, tiny_config, capsys):
    args = ["train", "--max-steps-per-epoch", "1", "--output-dir", tiny_config.output_dir, *SMOKE[:4]]
    assert main([*args, "--device", kind, "--gpus", "0"]) == DeviceError.exit_code
    err = capsys.readouterr().err
    assert err.startswith(f"error: --device {kind} was asked for but") and len(err.splitlines()) == 1, err
    assert not Path(tiny_config.output_dir).exists()  # refused before anything was written


def test_the_readmes_code_map_has_a_row_for_each_sub_package_and_module_from_its_docstring():
    package = Path(cli.__file__).parent
    code_map = (package.parents[1] / "README.md").read_text().partition("| module | what it does |")[2]
    rows = re.findall(r"^\| `([\w/]+(?:\.py|/))` \| (.+) \|$", code_map.partition("\n\n")[0], re.M)
    modules = [path.relative_to(package).as_posix() for path in package.rglob("*.py") if path.name[0] != "_"]
    sub_packages = [path.parent.relative_to(package).as_posix() + "/" for path in package.glob("*/__init__.py")]
    assert [name for name, _ in rows] == sorted(modules + sub_packages)
    for name, what in rows:
        source = package / name / "__init__.py" if name.endswith("/") else package / name
        docstring = " ".join((ast.get_docstring(ast.parse(source.read_text())) or "").split())
        assert what and docstring.startswith(what.replace("\\|", "|")), name


def test_help_answers_without_importing_torch():
    """torch and torchvision take seconds to import: --help and a bad flag must not wait for them."""
    probe = (
        "import sys\n"
        "from {{ cookiecutter.package_name }}.cli import main\n"
        "try:\n"
        "    main(['train', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('torch' in sys.modules, 'matplotlib' in sys.modules, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert "--epochs" in done.stdout and done.stderr.split() == ["False", "False"], done.stderr


@pytest.mark.parametrize("package", ["tricks", "config"])
def test_a_plug_in_module_without_what_it_needs_is_one_line_and_a_helper_module_is_left_alone(package, tmp_path):
    """The modules of tricks/ and config/ are found by name: one the user adds must have what the package needs,
    and a helper module (its name starts with _) is not taken for one."""
    import shutil

    copy = tmp_path / "src" / "{{ cookiecutter.package_name }}"
    shutil.copytree(Path(cli.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / package / "_helpers.py").write_text("X = 1\n")
    code = "from {{ cookiecutter.package_name }}.cli import main\nmain(['train', '--help'])"
    probe = [sys.executable, "-c", code]
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    done = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--epochs" in done.stdout, done.stderr
    (copy / package / "extra.py").write_text("X = 1\n")
    done = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60)
    where = f"src/{{ cookiecutter.package_name }}/{package}/extra.py"
    assert done.returncode == 1 and done.stderr.startswith(f"error: {where} has no Options"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("gpus", ["0,,1", "1,1", "a,b", "-1"])
def test_bad_gpu_ids_get_one_line_and_exit_code_2(gpus, capsys, tmp_path):
    assert main(["train", "--output-dir", str(tmp_path / "run"), "--gpus", gpus]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not a list of distinct GPU ids" in err and len(err.strip().splitlines()) == 1


def test_predict_explains_an_unreadable_image(tiny_config, tmp_path, capsys):
    assert main(["train", "--max-steps-per-epoch", "1", "--output-dir", tiny_config.output_dir, *SMOKE]) == 0
    (tmp_path / "broken.png").write_bytes(b"no image")
    weights = f"{tiny_config.output_dir}/model.pt"
    assert main(["predict", "--weights", weights, str(tmp_path / "broken.png"), "--device", "cpu"]) == 3
    err = capsys.readouterr().err
    assert f"skipped: cannot read image {tmp_path / 'broken.png'} (UnidentifiedImageError)" in err
    assert "none of the 1 file(s) is a readable image" in err


@pytest.mark.parametrize("answer", ["cpu", "none", ""])
def test_cpu_none_or_nothing_hide_every_gpu(monkeypatch, answer):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    runtime.select_gpus(answer)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_gpu_ids_are_exported_before_cuda_starts_in_a_fresh_process(tmp_path):
    probe = (
        "import os, torch\n"
        "from {{ cookiecutter.package_name }} import cli\n"
        "from {{ cookiecutter.package_name }}.training import train\n"
        "seen = lambda cfg: print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['CUBLAS_WORKSPACE_CONFIG'])\n"
        "train.train = lambda cfg: seen(cfg) or print(torch.cuda.is_initialized())\n"
        "raise SystemExit(cli.main(['train', '--gpus', '2,3', '--deterministic']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[1])}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2,3", ":4096:8", "False"]  # deterministic cuBLAS needs it before it starts


def test_every_option_of_train_is_documented_in_the_readme():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    flags = [f"`--{field.name.replace('_', '-')}" for field in dataclasses.fields(TrainConfig)]
    assert [flag for flag in flags if flag not in readme] == []
