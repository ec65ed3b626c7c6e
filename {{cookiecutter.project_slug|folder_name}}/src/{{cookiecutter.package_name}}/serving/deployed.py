"""An exported file (`export`) as it is shipped: run by its runtime (onnxruntime for ONNX, TorchScript, a
torch.export program) on images prepared as its sidecar `<file>.json` says. No model definition of this repo is
imported: the file and its sidecar are all a consumer needs."""

import json
import logging
import math
import sys
import warnings
from pathlib import Path

import torch
from torchvision.transforms import v2

from ..config import EXPORT_FORMATS, MAX_IMAGE_SIZE
from ..core.errors import ModelError, UserError, first_line
from .predictions import predict_images

EXPORT_EXTRA = 'pip install -e ".[export]"'
EMBEDDED = "preprocessing.json"  # the sidecar's copy inside a TorchScript or torch.export file
SIDECAR_KEYS = ("format", "model", "input", "preprocessing", "output", "classes", {{ '"thresholds", ' if cookiecutter.task == "multi_label" }}"source")
MAX_NORMALISATION = 1e3  # a mean or std of pixels in [0, 1]: anything past it is a mistake


def sidecar_path(model_file: Path) -> Path:
    return model_file.with_name(model_file.name + ".json")


def format_of(model_file: Path) -> str:
    for name, suffix in EXPORT_FORMATS.items():
        if model_file.suffix == suffix:
            return name
    suffixes = ", ".join(f"{suffix} ({name})" for name, suffix in EXPORT_FORMATS.items())
    raise UserError(f"--model-file {model_file}: an exported file is {suffixes}; write one with export")


def _check_sidecar(sidecar) -> None:
    """What preprocessing and the predictions read from the sidecar, each of the right kind and size: pixels are
    scaled to [0, 1], so a mean or std far outside it, or a std of 0, turns every image into infinities or NaN."""
    if not isinstance(sidecar, dict) or not isinstance(sidecar.get("preprocessing", {}), dict):
        raise ValueError("it is not an object with an object for its preprocessing")
    classes, given = sidecar["classes"], sidecar["preprocessing"]
    if not isinstance(classes, list) or not classes or not all(isinstance(name, str) for name in classes):
        raise ValueError("its classes are not a list of names")
    if not all(type(given[key]) is int and 1 <= given[key] <= MAX_IMAGE_SIZE for key in ("resize", "crop")):
        raise ValueError(f"its resize and crop are not whole numbers from 1 to {MAX_IMAGE_SIZE}")
    for key in ("mean", "std"):
        values = given[key]
        if not isinstance(values, list) or len(values) != 3 or not all(type(v) in (int, float) for v in values):
            raise ValueError(f"its {key} is not three numbers")
        if not all(math.isfinite(value) for value in values):
            raise ValueError(f"its {key} is not three finite numbers")
    if not all(abs(value) <= MAX_NORMALISATION for value in given["mean"]):
        raise ValueError(f"its mean is not three numbers from -{MAX_NORMALISATION:g} to {MAX_NORMALISATION:g}")
    if not all(1 / MAX_NORMALISATION <= value <= MAX_NORMALISATION for value in given["std"]):
        raise ValueError(f"its std is not three numbers from {1 / MAX_NORMALISATION:g} to {MAX_NORMALISATION:g}")
    if type(given["grayscale"]) is not bool:
        raise ValueError("its grayscale is not true or false")
{% if cookiecutter.task == "multi_label" %}
    thresholds = sidecar["thresholds"]
    if not isinstance(thresholds, list) or len(thresholds) != len(classes):
        raise ValueError("its thresholds are not one per class")
    if not all(type(value) in (int, float) and 0 <= value <= 1 for value in thresholds):
        raise ValueError("its thresholds are not numbers from 0 to 1")
{% endif %}


def read_sidecar(model_file: Path) -> dict:
    path = sidecar_path(model_file)
    try:
        sidecar = json.loads(path.read_text(encoding="utf-8"))
        _check_sidecar(sidecar)
    except (OSError, ValueError, TypeError, KeyError, RecursionError) as exc:
        reason = f"it lacks {exc}" if isinstance(exc, KeyError) else first_line(exc)
        reason = "it is nested deeper than a sidecar is" if isinstance(exc, RecursionError) else reason
        reason = "it does not exist" if isinstance(exc, FileNotFoundError) else reason
        raise ModelError(f"{path}, the preprocessing of {model_file}, is unusable ({reason}); export again") from None
    return sidecar


def preprocessing(sidecar: dict) -> v2.Compose:
    """The validation transform the model was trained with, rebuilt from the sidecar's numbers."""
    given = sidecar["preprocessing"]
    steps = [v2.ToImage(), v2.Grayscale(num_output_channels=3)] if given["grayscale"] else [v2.ToImage()]
    steps += [v2.Resize(given["resize"]), v2.CenterCrop(given["crop"]), v2.ToDtype(torch.float32, scale=True)]
    return v2.Compose([*steps, v2.Normalize(given["mean"], given["std"])])


def onnx_session(path: Path):
    try:
        import onnxruntime
    except ImportError:
        raise ModelError(f"ONNX files run with onnxruntime: {EXPORT_EXTRA}") from None
    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def load_exported(path: Path, file_format: str):
    """A function from a float32 NCHW batch to its logits, running the exported file."""
    return open_exported(path, file_format)[0]


def open_exported(path: Path, file_format: str) -> tuple:
    """load_exported's function, and the copy of the sidecar that the file carries (None where it carries none)."""
    try:
        if file_format == "onnx":
            session = onnx_session(path)
            name = session.get_inputs()[0].name
            carried = session.get_modelmeta().custom_metadata_map  # export writes a JSON value per sidecar key
            copy = {key: _decoded(carried[key]) for key in SIDECAR_KEYS if key in carried} or None
            return lambda batch: torch.from_numpy(session.run(None, {name: batch.numpy()})[0]), copy
        extra = {EMBEDDED: ""}
        if file_format == "exported-program":
            export_log = logging.getLogger("torch.export")  # it logs a traceback before it raises
            level = export_log.level
            export_log.setLevel(logging.CRITICAL)
            try:
                run = torch.export.load(path, extra_files=extra).module()
            finally:
                export_log.setLevel(level)
        else:
            with warnings.catch_warnings():  # TorchScript is deprecated in favour of torch.export, and says so
                warnings.simplefilter("ignore")
                run = torch.jit.load(path, map_location="cpu", _extra_files=extra)
        text = extra[EMBEDDED]
        return run, _decoded(text.decode(errors="replace") if isinstance(text, bytes) else text) if text else None
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 (each runtime raises its own kinds on a file it cannot read)
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
        raise ModelError(f"{path} is not a readable {file_format} file ({reason})") from None


def _decoded(text: str):
    """A JSON value as written, or the text itself where it is none: it then differs from the sidecar's value."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def check_carried(path: Path, sidecar: dict, carried) -> None:
    """The sidecar beside a file is the one exported with it: a file replaced by another model's (the same classes,
    maybe) would otherwise run with this one's classes and preprocessing, or give another model's answers."""
    if carried is None:
        print(f"note: {path} carries no copy of its sidecar; {sidecar_path(path)} is taken as it is", file=sys.stderr)
        return
    own = carried if isinstance(carried, dict) else {}  # a copy that is no object differs in every key
    differ = [key for key in SIDECAR_KEYS if own.get(key) != sidecar.get(key)]
    if differ:
        raise ModelError(
            f"{sidecar_path(path)} is not the sidecar {path} was exported with (they differ in {', '.join(differ)}); "
            "keep each file with its own sidecar, or export again"
        )


def predict_exported(model_file: str, images: list[str], output: str, top_k: int) -> list[dict]:
    path = Path(model_file)
    file_format = format_of(path)
    sidecar = read_sidecar(path)
    run, carried = open_exported(path, file_format)
    check_carried(path, sidecar, carried)
    crop, classes = sidecar["preprocessing"]["crop"], sidecar["classes"]
    try:  # one blank image first: a file and a sidecar that do not belong together fail here, in one line
        with torch.inference_mode():  # as predict_images runs it: TorchScript specialises a graph on the first mode
            scores = run(torch.zeros(1, 3, crop, crop)).shape[-1]
    except Exception as exc:  # noqa: BLE001 (each runtime raises its own kinds)
        reason = first_line(exc)
        raise ModelError(f"{path} does not take the {crop} px images its sidecar describes ({reason})") from None
    if scores != len(classes):
        raise ModelError(f"{path} gives {scores} class scores, its sidecar names {len(classes)} classes; export again")
{% if cookiecutter.task == "multi_label" %}
    return predict_images(run, preprocessing(sidecar), classes, images, output, top_k, sidecar["thresholds"])
{% else %}
    return predict_images(run, preprocessing(sidecar), classes, images, output, top_k)
{% endif %}
