"""`export` and `predict --model-file`: each format gives PyTorch's logits at any batch size, carries the
preprocessing a consumer needs, and predicts as the weights do."""

import csv
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
import torch
from conftest import SYNTHETIC_CLASSES, listing
from filelock import FileLock
from PIL import Image

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.config import EXPORT_FORMATS, EXPORT_TOLERANCE, TrainConfig
from {{ cookiecutter.package_name }}.data.loaders import build_data
from {{ cookiecutter.package_name }}.data.transforms import build_transform
from {{ cookiecutter.package_name }}.serving import export as export_module
from {{ cookiecutter.package_name }}.serving.deployed import load_exported, preprocessing, sidecar_path
from {{ cookiecutter.package_name }}.serving.export import describe, export_model
from {{ cookiecutter.package_name }}.serving.inference import load_run
{% if cookiecutter.use_checkpointing %}
from {{ cookiecutter.package_name }}.training import checkpoint
{% endif %}
from {{ cookiecutter.package_name }}.training.train import train

CPU = torch.device("cpu")
FORMATS = list(EXPORT_FORMATS)


def trained(config: TrainConfig, model: str) -> Path:
    return train(replace(config, model=model))["weights"]


@pytest.fixture(scope="module")
def small_cnn_weights(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("export") / "run"
    config = TrainConfig(data="synthetic", epochs=1, batch_size=16, max_steps_per_epoch=2, device="cpu", plots=False)
    return trained(replace(config, output_dir=str(run)), "small_cnn")


def validation_images(weights: Path) -> torch.Tensor:
    cfg, _, _ = load_run(str(weights), CPU)
    return next(iter(build_data(cfg, CPU, train=False).val))[0]


def assert_exports_match(weights: Path, file_format: str, tmp_path: Path) -> Path:
    """Exported, then run at batch sizes 1 and 7 through the file's dynamic batch axis: PyTorch's logits."""
    out = export_model(str(weights), file_format, str(tmp_path / f"model{EXPORT_FORMATS[file_format]}"))
    _, classes, model = load_run(str(weights), CPU)
    run = load_exported(out, file_format)
    images = validation_images(weights)
    for size in (1, 7):
        with torch.no_grad():
            expected = model(images[:size])
        got = run(images[:size])
        assert got.shape == (size, len(classes))
        torch.testing.assert_close(got, expected, atol=EXPORT_TOLERANCE, rtol=0)
    return out


@pytest.mark.parametrize("file_format", FORMATS)
def test_each_format_gives_pytorchs_logits_at_any_batch_size_and_carries_its_preprocessing(
    small_cnn_weights, tmp_path, file_format, capsys
):
    out = assert_exports_match(small_cnn_weights, file_format, tmp_path)
    assert "parity on 8 validation images: logits within" in capsys.readouterr().out
    cfg, classes, _ = load_run(str(small_cnn_weights), CPU)
    sidecar = json.loads(sidecar_path(out).read_text())
    assert sidecar["classes"] == classes and sidecar["format"] == file_format
    given = sidecar["preprocessing"]
    assert (given["mean"], given["std"], given["crop"], given["resize"]) == (cfg.mean, cfg.std, cfg.image_size, 32)
    if file_format == "onnx":
        proto = onnx.load(str(out))
        metadata = {entry.key: json.loads(entry.value) for entry in proto.metadata_props}
        assert metadata["preprocessing"] == given and metadata["classes"] == classes
        assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # a named, dynamic batch axis
        assert proto.opset_import[0].version >= 18
    assert carried_copy(out, file_format) == sidecar  # read back by the format's own runtime
    digest = hashlib.sha256(small_cnn_weights.read_bytes()).hexdigest()
    assert sidecar["source"] == {"weights": "model.pt", "sha256": digest}

    image = tmp_path / "one.png"
    Image.new("RGB", (40, 30), (90, 160, 20)).save(image)
    sidecar_path(out).write_text(json.dumps(sidecar | {"classes": classes[::-1]}))  # the same names, each elsewhere
    assert main(["predict", "--model-file", str(out), str(image), "--output", str(tmp_path / "p.csv")]) == 4
    err = capsys.readouterr().err
    assert f"error: {sidecar_path(out)} is not the sidecar {out} was exported with (they differ in classes)" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "p.csv").exists()


def carried_copy(out: Path, file_format: str) -> dict:
    """The sidecar that an exported file carries inside: ONNX metadata, or a preprocessing.json in the archive."""
    if file_format == "onnx":
        return {entry.key: json.loads(entry.value) for entry in onnx.load(str(out)).metadata_props}
    extra = {"preprocessing.json": ""}
    if file_format == "torchscript":
        torch.jit.load(out, _extra_files=extra)
    else:
        torch.export.load(out, extra_files=extra)
    return json.loads(extra["preprocessing.json"])


def copied_run(weights: Path, to: Path, change=None) -> Path:
    """The run folder of `weights` copied, its model.pt changed in place by `change` (a function of the state)."""
    shutil.copytree(weights.parent, to)
    if change:
        state = torch.load(to / "model.pt", weights_only=True)
        change(state)
        torch.save(state, to / "model.pt")
    return to / "model.pt"


def test_a_file_replaced_by_another_runs_export_is_refused_in_one_line(small_cnn_weights, tmp_path, capsys):
    """Two runs of one config have the same classes and preprocessing: the weights' digest tells their files apart."""
    ours = copied_run(small_cnn_weights, tmp_path / "a")
    theirs = copied_run(small_cnn_weights, tmp_path / "b", lambda state: state["fc.bias"].add_(0.5))
    mine, other = (export_model(str(weights), "torchscript") for weights in (ours, theirs))
    image = tmp_path / "one.png"
    Image.new("RGB", (32, 32), (20, 90, 200)).save(image)
    predict = ["predict", "--model-file", str(mine), str(image), "--output", str(tmp_path / "p.csv")]
    assert main(predict) == 0
    capsys.readouterr()
    shutil.copyfile(other, mine)  # cp b/model.torchscript.pt a/model.torchscript.pt
    assert main(predict) == 4
    err = capsys.readouterr().err
    assert f"error: {sidecar_path(mine)} is not the sidecar {mine} was exported with (they differ in source)" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("broken", ["one logit off", "two classes swapped"])
def test_an_export_off_in_one_logit_or_with_two_classes_swapped_is_refused(
    small_cnn_weights, tmp_path, monkeypatch, capsys, broken
):
    images = validation_images(small_cnn_weights)[: export_module.PARITY_IMAGES]
    with torch.no_grad():
        logits = load_run(str(small_cnn_weights), CPU)[2](images)
    assert (logits[:, 0] - logits[:, 1]).abs().max() > 2 * EXPORT_TOLERANCE  # the two classes' logits differ

    def wrong(path, file_format):
        run = load_exported(path, file_format)

        def logits_of(batch):
            found = run(batch).clone()
            if broken == "one logit off":
                found[-1, -1] += 2 * EXPORT_TOLERANCE  # one image, one class
            else:
                found[:, [0, 1]] = found[:, [1, 0]]
            return found

        return logits_of

    monkeypatch.setattr(export_module, "load_exported", wrong)
    out = tmp_path / "model.pt2"
    args = ["--format", "exported-program", "--output", str(out)]
    assert main(["export", "--weights", str(small_cnn_weights), *args]) == 4
    assert "error: the exported-program file's logits differ from PyTorch's by up to" in capsys.readouterr().err
    assert listing(tmp_path) == []


def test_an_export_of_data_resized_larger_than_its_crop_predicts_as_its_weights(image_folder, tmp_path):
    """Photos are resized to more than the crop, then cropped: the sidecar must give both sizes, each in its place."""
    cfg = TrainConfig(
        data=str(image_folder), image_size=24, epochs=1, batch_size=4, device="cpu", plots=False,
        output_dir=str(tmp_path / "run"), num_workers=0,
    )  # fmt: skip
    weights = trained(cfg, "small_cnn")
    out = export_model(str(weights), "torchscript", str(tmp_path / "model.pt"))
    given = json.loads(sidecar_path(out).read_text())["preprocessing"]
    assert given["crop"] == 24 < given["resize"]
    image = tmp_path / "wide.png"
    pixels = torch.randint(0, 256, (30, 70, 3), generator=torch.Generator().manual_seed(3), dtype=torch.uint8)
    Image.fromarray(pixels.numpy()).save(image)
    args = ["--top-k", "2"]
    expected = top_class(["--weights", str(weights), "--device", "cpu", *args], image, tmp_path / "weights.csv")
    found = top_class(["--model-file", str(out), *args], image, tmp_path / "exported.csv")
    assert found[0] == expected[0] and found[1] == pytest.approx(expected[1], abs=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("file_format", FORMATS)
def test_a_torchvision_model_exports_in_each_format(tiny_config, tmp_path, file_format):
    assert_exports_match(trained(tiny_config, "resnet18"), file_format, tmp_path)


@pytest.mark.slow
def test_a_timm_model_exports_to_onnx(tiny_config, tmp_path):
    assert_exports_match(trained(tiny_config, "timm/test_resnet"), "onnx", tmp_path)


@pytest.mark.parametrize(
    "data",
    ["synthetic", "mnist", "folder"],  # a dataset's own size, gray images, photos (resized larger, then cropped)
)
def test_the_sidecars_preprocessing_is_the_validation_transform(tmp_path, data):
    source = str(tmp_path) if data == "folder" else data
    cfg = TrainConfig(data=source, image_size=24, mean=[0.4, 0.5, 0.6], std=[0.2, 0.25, 0.3])
    image = Image.fromarray(torch.randint(0, 256, (37, 53, 3), dtype=torch.uint8).numpy())
    expected = build_transform(source, cfg.image_size, cfg.mean, cfg.std)(image)
    sidecar = json.loads(json.dumps(describe(cfg, ["a", "b"], "onnx")))  # as a consumer reads it
    torch.testing.assert_close(preprocessing(sidecar)(image), expected)


@pytest.mark.parametrize("file_format", FORMATS)
def test_predict_from_an_exported_file_equals_predict_from_the_weights(small_cnn_weights, tmp_path, file_format):
    out = export_model(str(small_cnn_weights), file_format, str(tmp_path / f"model{EXPORT_FORMATS[file_format]}"))
    images = tmp_path / "images"
    images.mkdir()
    for i, size in enumerate([(40, 30), (32, 32), (17, 64)]):
        pixels = torch.randint(0, 256, (*size, 3), generator=torch.Generator().manual_seed(i), dtype=torch.uint8)
        Image.fromarray(pixels.numpy()).save(images / f"{i}.png")
    args = [str(images), "--top-k", "3", "--output"]
    assert main(["predict", "--weights", str(small_cnn_weights), "--device", "cpu", *args, str(tmp_path / "a")]) == 0
    assert main(["predict", "--model-file", str(out), *args, str(tmp_path / "b")]) == 0
    ours, theirs = ([*csv.DictReader((tmp_path / name).open())] for name in ("a", "b"))
    assert [row["path"] for row in theirs] == [row["path"] for row in ours] and len(ours) == 3
    for mine, exported in zip(ours, theirs, strict=True):
        for rank in (1, 2, 3):
            assert exported[f"class_{rank}"] == mine[f"class_{rank}"]
            assert float(exported[f"probability_{rank}"]) == pytest.approx(float(mine[f"probability_{rank}"]), abs=1e-5)


def test_predict_from_an_exported_file_needs_no_model_definition(small_cnn_weights, tmp_path):
    out = export_model(str(small_cnn_weights), "exported-program", str(tmp_path / "model.pt2"))
    image = tmp_path / "one.png"
    Image.new("RGB", (32, 32), (200, 30, 30)).save(image)
    package = "{{ cookiecutter.package_name }}"
    script = f"import sys; from {package}.cli import main; print(main(sys.argv[1:]), sorted(sys.modules))"
    args = ["predict", "--model-file", str(out), str(image), "--output", str(tmp_path / "p.csv")]
    env = {**os.environ, "PYTHONPATH": str(Path(export_module.__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=120)
    code, modules = done.stdout.splitlines()[-1].split(" ", 1)
    assert code == "0", done.stderr
    assert f"'{package}.models'" not in modules and f"'{package}.training.train'" not in modules, modules
    assert f"'{package}.serving.deployed'" in modules  # what it runs on instead


def test_an_export_that_differs_from_pytorch_is_refused_and_nothing_is_written(
    small_cnn_weights, tmp_path, monkeypatch, capsys
):
    def off_by_a_little(path, file_format):
        run = load_exported(path, file_format)
        return lambda images: run(images) + 2 * EXPORT_TOLERANCE

    monkeypatch.setattr(export_module, "load_exported", off_by_a_little)
    out = tmp_path / "model.onnx"
    assert main(["export", "--weights", str(small_cnn_weights), "--format", "onnx", "--output", str(out)]) == 4
    err = capsys.readouterr().err
    assert "error: the onnx file's logits differ from PyTorch's by up to 2.00e-03, more than --tolerance 0.001" in err
    assert listing(tmp_path) == []  # neither the file, nor its sidecar, nor a temporary file


def test_bad_export_and_model_file_requests_are_one_line(small_cnn_weights, tmp_path, capsys, monkeypatch):
    weights = str(small_cnn_weights)
    (tmp_path / "notes.onnx").write_text("mine")
    (tmp_path / "model.pt2").write_bytes(b"not a program")
    sidecar = describe(load_run(weights, CPU)[0], ["a", "b"], "exported-program")
    (tmp_path / "model.pt2.json").write_text(json.dumps(sidecar))
    real = export_model(weights, "onnx", str(tmp_path / "real.onnx"))
    sidecar_path(real).write_text(json.dumps(sidecar))  # not the one it carries: two classes, and others
    odd = [("odd", "classes", "ab"), ("nan", "mean", [float("nan")] * 3), ("huge", "resize", 100_000),
           ("far", "mean", [1e300, 0, 0]), ("flat", "std", [0.2, 0, 0.2]),
           ("tiny", "std", [1e-300, 0.2, 0.2])]  # fmt: skip
    for name, key, value in odd:
        (tmp_path / f"{name}.onnx").write_bytes(real.read_bytes())
        changed = json.loads(json.dumps(sidecar))
        (changed if key == "classes" else changed["preprocessing"])[key] = value
        sidecar_path(tmp_path / f"{name}.onnx").write_text(json.dumps(changed))
    (tmp_path / "deep.onnx").write_bytes(real.read_bytes())
    sidecar_path(tmp_path / "deep.onnx").write_text("[" * 100_000 + "]" * 100_000)
    image = tmp_path / "one.png"
    Image.new("RGB", (8, 8)).save(image)
    beside = export_model(weights, "torchscript")  # in the run folder, where evaluate reads its config
    cases = [
        (["export", "--weights", weights, "--format", "torchscript", "--output", str(tmp_path / "m.onnx")],
         "must end in .pt for --format torchscript"),
        (["export", "--weights", weights, "--format", "onnx", "--output", str(tmp_path / "notes.onnx")],
         "exists and is not an earlier export"),
        (["export", "--weights", str(tmp_path / "none.pt"), "--format", "onnx"], "does not exist"),
        (["predict", "--model-file", str(tmp_path / "notes.onnx"), str(image)], "notes.onnx.json, the preprocessing"),
        (["predict", "--model-file", str(tmp_path / "model.pt2"), str(image)], "is not a readable exported-program"),
        (["predict", "--model-file", str(tmp_path / "model.bin"), str(image)], "an exported file is .onnx (onnx)"),
        (["predict", "--model-file", str(tmp_path / "model.pt2"), "--tta", str(image)], "--tta works with --weights"),
        (["predict", "--model-file", str(real), str(image)], "real.onnx.json is not the sidecar"),
        (["predict", "--model-file", str(tmp_path / "odd.onnx"), str(image)], "its classes are not a list of names"),
        (["predict", "--model-file", str(tmp_path / "nan.onnx"), str(image)], "its mean is not three finite numbers"),
        (["predict", "--model-file", str(tmp_path / "huge.onnx"), str(image)], "not whole numbers from 1 to 4096"),
        (["predict", "--model-file", str(tmp_path / "far.onnx"), str(image)], "mean is not three numbers from -1000"),
        (["predict", "--model-file", str(tmp_path / "flat.onnx"), str(image)], "std is not three numbers from 0.001"),
        (["predict", "--model-file", str(tmp_path / "tiny.onnx"), str(image)], "std is not three numbers from 0.001"),
        (["predict", "--model-file", str(tmp_path / "deep.onnx"), str(image)], "it is nested deeper than a sidecar"),
        (["export", "--weights", weights, "--format", "onnx", "--tolerance", "-1"], "--tolerance must be a number"),
        (["export", "--weights", weights, "--format", "onnx"], "is in use by a training run or another export"),
        (["evaluate", "--weights", str(beside), "--device", "cpu"], "is an exported file, not weights; run it with"),
    ]  # fmt: skip
    with FileLock(small_cnn_weights.parent / ".lock"):  # as a run training into that folder holds it
        for args, message in cases:
            assert main(args) != 0, args
            err = capsys.readouterr().err
            assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)
    assert (tmp_path / "notes.onnx").read_text() == "mine"
    assert not Path("predictions.csv").exists()  # none of them predicted

    proto = onnx.load(str(real))  # a file from elsewhere, that carries no sidecar: its own scores are checked
    del proto.metadata_props[:]
    onnx.save(proto, str(real))
    assert main(["predict", "--model-file", str(real), str(image)]) == 4
    assert capsys.readouterr().err.splitlines() == [
        f"note: {real} carries no copy of its sidecar; {sidecar_path(real)} is taken as it is",
        f"error: {real} gives {SYNTHETIC_CLASSES} class scores, its sidecar names 2 classes; export again",
    ]

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # not installed
    (tmp_path / "notes.onnx.json").write_text(json.dumps(sidecar))
    assert main(["predict", "--model-file", str(tmp_path / "notes.onnx"), str(image)]) == 4
    assert 'error: ONNX files run with onnxruntime: pip install -e ".[export]"' in capsys.readouterr().err


def test_an_onnx_file_over_2_gb_ships_with_its_weights_file_and_kills_leave_nothing(
    small_cnn_weights, tmp_path, monkeypatch
):
    """Over 2 GB, ONNX keeps the weights in `<file>.data`, named in the file: it must be named after the file shipped,
    not after a temporary one. Staging left by a killed export goes with the next one."""
    from torch.onnx._internal.exporter import _onnx_program

    ship = tmp_path / "ship"
    ship.mkdir()
    (ship / ".model.onnx.k1ll.tmp").mkdir()  # a killed export's staging folder
    (ship / ".model.onnx.json.k1ll.tmp").write_text("{")
    monkeypatch.setattr(_onnx_program, "_LARGE_MODEL_THRESHOLD", 0)  # every model counts as large
    out = export_model(str(small_cnn_weights), "onnx", str(ship / "model.onnx"))
    assert listing(ship) == ["model.onnx", "model.onnx.data", "model.onnx.json"]
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in ship.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    images = validation_images(small_cnn_weights)
    torch.testing.assert_close(load_exported(copy / "model.onnx", "onnx")(images), load_exported(out, "onnx")(images))
    monkeypatch.undo()  # small again: the weights inside the file, the old weights file gone
    export_model(str(small_cnn_weights), "onnx", str(ship / "model.onnx"))
    assert listing(ship) == ["model.onnx", "model.onnx.json"]


def test_a_timm_vit_predicts_from_each_exported_format(tiny_config, tmp_path):
    """TorchScript fixes a graph for the first grad mode it runs in: predict must run it in one mode throughout."""
    weights = trained(replace(tiny_config, output_dir=str(tmp_path / "vit")), "timm/test_vit")
    image = tmp_path / "one.png"
    Image.new("RGB", (40, 30), (90, 160, 20)).save(image)
    expected = top_class(["--weights", str(weights), "--device", "cpu"], image, tmp_path / "weights.csv")
    for file_format in FORMATS:
        out = export_model(str(weights), file_format)
        found = top_class(["--model-file", str(out)], image, tmp_path / f"{file_format}.csv")
        assert found[0] == expected[0] and found[1] == pytest.approx(expected[1], abs=1e-5)


def top_class(args: list[str], image: Path, output: Path) -> tuple[str, float]:
    assert main(["predict", *args, str(image), "--output", str(output)]) == 0
    row = next(csv.DictReader(output.open()))
    return row["class_1"], float(row["probability_1"])


def test_predict_names_the_files_of_a_folder_that_are_no_images(small_cnn_weights, tmp_path, capsys):
    folder = tmp_path / "photos"
    (folder / "sub").mkdir(parents=True)
    for name in ("0.png", "sub/1.png"):
        Image.new("RGB", (32, 32), (200, 30, 30)).save(folder / name)
    for name in ("notes.txt", "labels.csv", "sub/readme.md", "x.json"):
        (folder / name).write_text("no image")
    args = ["predict", "--weights", str(small_cnn_weights), "--device", "cpu", "--output", str(tmp_path / "p.csv")]
    assert main([*args, str(folder)]) == 0
    others = ", ".join(str(folder / name) for name in ("labels.csv", "notes.txt", "sub/readme.md"))
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"4 file(s) that are not images by their names skipped: {others}, ..."
    assert len(err) == 2 and err[1].startswith("2 predictions written")
    assert main([*args, str(folder / "sub" / "readme.md"), str(folder / "sub")]) == 0  # a file named: an image or not
    assert "1 unreadable file(s) skipped" in capsys.readouterr().err
    shutil.rmtree(folder / "sub")
    (folder / "0.png").unlink()
    assert main([*args, str(folder)]) == 3
    err = capsys.readouterr().err
    assert err.strip().endswith(f"error: no images in {folder}; 3 file(s) that are not images by their names skipped: "
                                f"{folder / 'labels.csv'}, {folder / 'notes.txt'}, {folder / 'x.json'}")  # fmt: skip
    assert len(err.strip().splitlines()) == 1


def test_weights_that_give_no_finite_scores_predict_nothing(small_cnn_weights, tmp_path, capsys):
    weights = copied_run(small_cnn_weights, tmp_path / "run", lambda state: state["fc.bias"].fill_(math.nan))
    image = tmp_path / "one.png"
    Image.new("RGB", (32, 32)).save(image)
    output = tmp_path / "p.csv"
    assert main(["predict", "--weights", str(weights), "--device", "cpu", str(image), "--output", str(output)]) == 4
    err = capsys.readouterr().err
    assert f"error: the model's scores for {image} are not all finite numbers; no predictions were written" in err
    assert len(err.strip().splitlines()) == 1 and not output.exists()


def test_the_tolerance_is_stated_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert f"(default {EXPORT_TOLERANCE:g})" in capsys.readouterr().out
{% if cookiecutter.use_checkpointing %}


def test_a_checkpoint_exports_as_the_weights_do(small_cnn_weights, tmp_path, capsys):
    out = export_model(str(small_cnn_weights.with_name("last.pt")), "onnx", str(tmp_path / "last.onnx"))
    sidecar = json.loads(sidecar_path(out).read_text())
    assert sidecar["classes"] == load_run(str(small_cnn_weights), CPU)[1]
    assert "mid_epoch" not in sidecar["source"] and "mid-epoch" not in capsys.readouterr().err  # an epoch's end


def test_a_mid_epoch_checkpoint_exports_with_a_notice_and_its_sidecar_says_so(tiny_config, tmp_path, capsys):
    cfg = replace(tiny_config, model="small_cnn", checkpoint_every="1")
    with pytest.raises(KeyboardInterrupt), pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint.Checkpoints, "end_epoch", _interrupted)
        train(cfg)
    last = Path(cfg.output_dir) / "last.pt"
    state = torch.load(last, weights_only=True)
    assert (state["epoch"], state["progress"][0]["step"]) == (0, 2)  # step 2 of epoch 1
    capsys.readouterr()
    out = export_model(str(last), "torchscript", str(tmp_path / "snapshot.pt"))
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"note: {last} is a mid-epoch snapshot (step 2 of epoch 1): its weights were never validated; "
                   "the sidecar says so"]  # fmt: skip
    assert json.loads(sidecar_path(out).read_text())["source"]["mid_epoch"] == "step 2 of epoch 1"


def _interrupted(self, rows, val) -> None:
    raise KeyboardInterrupt  # where the epoch would be saved: the mid-epoch checkpoint of its last step stays
{% endif %}
