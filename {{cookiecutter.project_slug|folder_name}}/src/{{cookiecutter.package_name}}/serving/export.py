"""`export`: trained weights as a file to ship (ONNX, TorchScript or a torch.export program), kept only once the file
gives the logits PyTorch gives on validation images. The preprocessing a consumer needs goes beside it, in
`<file>.json`, and for ONNX into the model's metadata too."""

import contextlib
import glob
import hashlib
import io
import json
import os
import shutil
{% if cookiecutter.use_checkpointing %}
import sys
{% endif %}
import tempfile
import warnings
from pathlib import Path

import torch

from ..config import EXPORT_FORMATS, EXPORT_TOLERANCE
from ..core.errors import DataError, ModelError, OutputError, UserError, first_line, one_line
from ..core.files import cannot_write, hold, replacing, unlock
from ..data.loaders import build_data
from ..data.sources import GRAYSCALE
from ..data.transforms import eval_resize
from .deployed import EXPORT_EXTRA, load_exported, sidecar_path
from .inference import load_run
{% if cookiecutter.task == "multi_label" %}
from .thresholds import load_thresholds
{% endif %}

ONNX_OPSET = 18
PARITY_IMAGES = 8
BATCH = torch.export.Dim("batch")  # every format takes any number of images


def default_output(weights: Path, file_format: str) -> Path:
    """model.onnx, model.pt2 and model.torchscript.pt beside model.pt (the weights themselves are a .pt too)."""
    stem = f"{weights.stem}.torchscript" if file_format == "torchscript" else weights.stem
    return weights.with_name(stem + EXPORT_FORMATS[file_format])


def _check_output(out: Path, weights: Path, file_format: str) -> None:
    """Only an earlier export (it has a sidecar) is replaced; the suffix tells predict --model-file the format."""
    suffix = EXPORT_FORMATS[file_format]
    if out.suffix != suffix:
        raise UserError(f"--output {out} must end in {suffix} for --format {file_format}")
    if out.is_dir() or (out.exists() and (out.resolve() == weights.resolve() or not sidecar_path(out).is_file())):
        raise UserError(f"--output {out} exists and is not an earlier export; pick another file name")


{% if cookiecutter.task == "multi_label" %}
def describe(cfg, classes: list[str], file_format: str, source: dict | None = None, thresholds=None) -> dict:
    """The sidecar: what goes in (preprocessing, layout), what comes out (a logit per class, in this order, and the
    probability from which each class is predicted), and the weights it came from (their digest tells two runs'
    exports apart, where config and classes are alike)."""
{% else %}
def describe(cfg, classes: list[str], file_format: str, source: dict | None = None) -> dict:
    """The sidecar: what goes in (preprocessing, layout), what comes out (a logit per class, in this order), and the
    weights it came from (their digest tells two runs' exports apart, where config and classes are alike)."""
{% endif %}
    preprocessing = {
        "grayscale": cfg.data in GRAYSCALE,  # gray images, read as RGB, then as three equal channels
        "resize": eval_resize(cfg.data, cfg.image_size),  # the shorter side, bilinear
        "crop": cfg.image_size,  # the centre square
        "scale": "divide by 255",
        "mean": cfg.mean,
        "std": cfg.std,
    }
    layout = "float32 NCHW, channels in RGB order; any batch size"
{% if cookiecutter.task == "multi_label" %}
    thresholds = [cfg.threshold] * len(classes) if thresholds is None else thresholds
    return {"format": file_format, "model": cfg.model, "input": layout, "preprocessing": preprocessing,
            "output": "logits, one per class (the sigmoid gives each class's probability)", "classes": classes,
            "thresholds": thresholds, **({"source": source} if source else {})}  # fmt: skip
{% else %}
    return {"format": file_format, "model": cfg.model, "input": layout, "preprocessing": preprocessing,
            "output": "logits, one per class (softmax gives probabilities)", "classes": classes,
            **({"source": source} if source else {})}  # fmt: skip
{% endif %}


def describe_source(weights: Path) -> dict:
    """The weights file by name and SHA-256 digest{% if cookiecutter.use_checkpointing %}, and where a mid-epoch checkpoint stopped (said on stderr too){% endif %}."""
    try:
        with open(weights, "rb") as file:
            source = {"weights": weights.name, "sha256": hashlib.file_digest(file, "sha256").hexdigest()}
    except OSError as exc:
        raise ModelError(f"cannot read {weights} ({first_line(exc)})") from None
{% if cookiecutter.use_checkpointing %}
    snapshot = _mid_epoch(weights)
    if snapshot:
        source["mid_epoch"] = snapshot
        what = f"a mid-epoch snapshot ({snapshot}): its weights were never validated; the sidecar says so"
        print(f"note: {weights} is {what}", file=sys.stderr)
{% endif %}
    return source
{% if cookiecutter.use_checkpointing %}


def _mid_epoch(weights: Path) -> str | None:
    """Where a checkpoint written in the middle of an epoch stopped ("step 3 of epoch 2"); None for other weights."""
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)  # mmap: no tensor is read
        return f"step {int(state['progress'][0]['step'])} of epoch {int(state['epoch']) + 1}"
    except Exception:  # noqa: BLE001 (weights without those keys, or in a file torch cannot map: an epoch's end)
        return None
{% endif %}


def parity_images(cfg) -> tuple[torch.Tensor, str]:
    """A batch of validation images as training saw them, or random inputs when the data is not at hand."""
    try:
        images = next(iter(build_data(cfg, torch.device("cpu"), train=False).val))[0][:PARITY_IMAGES]
        return images, "validation images"
    except DataError as exc:
        print(f"no validation images ({one_line(exc)}): comparing on random inputs")
        return torch.randn(PARITY_IMAGES, 3, cfg.image_size, cfg.image_size), "random inputs"


def _onnx(model, example: torch.Tensor, path: str, sidecar: dict) -> None:
    try:
        import onnxscript  # noqa: F401 (torch.onnx's exporter needs it)
    except ImportError:
        raise ModelError(f"ONNX export needs onnx and onnxscript: {EXPORT_EXTRA}") from None
    program = torch.onnx.export(
        model, (example,), dynamo=True, input_names=["images"], output_names=["logits"],
        dynamic_shapes=({0: BATCH},), opset_version=ONNX_OPSET, verbose=False,
    )  # fmt: skip
    program.model.metadata_props.update({key: json.dumps(value) for key, value in sidecar.items()})
    program.save(path)


def _torchscript(model, example: torch.Tensor, path: str, sidecar: dict) -> None:
    traced, buffer = torch.jit.trace(model, example), io.BytesIO()
    torch.jit.save(traced, buffer, _extra_files={"preprocessing.json": json.dumps(sidecar)})
    Path(path).write_bytes(buffer.getbuffer())  # written by Python: a full disk is an OSError, not an abort in C++


def _exported_program(model, example: torch.Tensor, path: str, sidecar: dict) -> None:
    program, buffer = torch.export.export(model, (example,), dynamic_shapes=({0: BATCH},)), io.BytesIO()
    torch.export.save(program, buffer, extra_files={"preprocessing.json": json.dumps(sidecar)})
    Path(path).write_bytes(buffer.getbuffer())


WRITERS = {"onnx": _onnx, "torchscript": _torchscript, "exported-program": _exported_program}


@contextlib.contextmanager
def _folder_lock(out: Path):
    """One writer at a time in the output's folder (the lock a training run holds on its folder): two exports into
    one file would leave the model of one beside the sidecar of the other."""
    lock = hold(out.parent)
    if lock is None:
        raise OutputError(f"{out.parent} is in use by a training run or another export; try when it ends")
    try:
        yield
    finally:
        unlock(lock)


def _remove_leftovers(out: Path) -> None:
    """What exports into `out` killed before they ended left (their staging folders and files); the caller holds the
    folder's lock, so none of it is in use."""
    for leftover in out.parent.glob(f".{glob.escape(out.name)}.*.tmp*"):
        with contextlib.suppress(OSError):
            shutil.rmtree(leftover) if leftover.is_dir() and not leftover.is_symlink() else leftover.unlink()


@torch.no_grad()
def export_model(
    weights: str, file_format: str, output: str | None = None, tolerance: float = EXPORT_TOLERANCE
) -> Path:
    if not tolerance >= 0:  # NaN included
        raise UserError(f"--tolerance must be a number from 0 up, got {tolerance}")
    source = Path(weights)
    out = Path(output) if output else default_output(source, file_format)
    _check_output(out, source, file_format)
    cfg, classes, model = load_run(weights, torch.device("cpu"))
    model = model.float().eval()
    images, kind = parity_images(cfg)
    example = images.repeat(2, 1, 1, 1)[: max(2, len(images))]  # a batch of one would fix the batch size at 1
{% if cookiecutter.task == "multi_label" %}
    thresholds = load_thresholds(weights, classes, cfg.threshold).tolist()  # the fitted ones, where evaluate saved them
    sidecar = describe(cfg, classes, file_format, describe_source(source), thresholds)
{% else %}
    sidecar = describe(cfg, classes, file_format, describe_source(source))
{% endif %}
    with _folder_lock(out):
        _remove_leftovers(out)
        with (
            _staging(out) as staged,  # the file under its own name: ONNX names its weights file (.data) after it
            replacing(sidecar_path(out), "w") as side,  # replaced just before the file: the two go together
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")  # the exporters' notes on tracing and deprecations, not about this model
            WRITERS[file_format](model, example, str(staged), sidecar)
            expected, got = model(images), load_exported(staged, file_format)(images)
            difference = (expected - got).abs().max().item()
{% if cookiecutter.task == "multi_label" %}
            limits = torch.tensor(thresholds)
            agreement = ((expected.sigmoid() >= limits) == (got.sigmoid() >= limits)).all(1).float().mean().item()
            found = f"logits within {difference:.1e} of PyTorch's, the same labels for {100 * agreement:.0f} %"
{% else %}
            agreement = (expected.argmax(1) == got.argmax(1)).float().mean().item()
            found = f"logits within {difference:.1e} of PyTorch's, the same top-1 class for {100 * agreement:.0f} %"
{% endif %}
            print(f"parity on {len(images)} {kind}: {found}")
            if not difference <= tolerance:  # NaN included
                raise ModelError(
                    f"the {file_format} file's logits differ from PyTorch's by up to {difference:.2e}, more than "
                    f"--tolerance {tolerance:g}; {out} was not written"
                )
            side.write(json.dumps(sidecar, indent=2) + "\n")
    print(f"{file_format}: {out} (preprocessing and classes in {sidecar_path(out)})")
    return out


@contextlib.contextmanager
def _staging(out: Path):
    """A path named as `out`, in a hidden folder beside it; when the block ends without error, what was written there
    (the file, and the external weights of an ONNX file over 2 GB) replaces `out` and its companions."""
    try:
        folder = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    except OSError as exc:
        raise cannot_write(out, exc) from None
    try:
        staged = folder / out.name
        yield staged
        data = out.with_name(out.name + ".data")
        if (folder / data.name).exists():
            os.replace(folder / data.name, data)  # first: the file names its weights file, which must be there
        elif data.exists():
            data.unlink()  # an earlier, larger export's weights
        os.replace(staged, out)
    except OSError as exc:
        raise cannot_write(out, exc) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
