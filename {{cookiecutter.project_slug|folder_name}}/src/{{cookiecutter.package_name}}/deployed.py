"""An exported file (`export`) as it is shipped: run by its runtime (onnxruntime for ONNX, TorchScript, a
torch.export program) on images prepared as its sidecar `<file>.json` says. No model definition of this repo is
imported: the file and its sidecar are all a consumer needs."""

import json
import logging
import math
import warnings
from pathlib import Path

import torch
from torchvision.transforms import v2

from .config import EXPORT_FORMATS, MAX_IMAGE_SIZE
from .errors import ModelError, UserError, first_line
from .predictions import predict_images

EXPORT_EXTRA = 'pip install -e ".[export]"'


def sidecar_path(model_file: Path) -> Path:
    return model_file.with_name(model_file.name + ".json")


def format_of(model_file: Path) -> str:
    for name, suffix in EXPORT_FORMATS.items():
        if model_file.suffix == suffix:
            return name
    suffixes = ", ".join(f"{suffix} ({name})" for name, suffix in EXPORT_FORMATS.items())
    raise UserError(f"--model-file {model_file}: an exported file is {suffixes}; write one with export")


def _check_sidecar(sidecar) -> None:
    """What preprocessing and the predictions read from the sidecar, each of the right kind."""
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
    if not all(value > 0 for value in given["std"]) or type(given["grayscale"]) is not bool:
        raise ValueError("its std is not positive or its grayscale not true or false")


def read_sidecar(model_file: Path) -> dict:
    path = sidecar_path(model_file)
    try:
        sidecar = json.loads(path.read_text(encoding="utf-8"))
        _check_sidecar(sidecar)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        reason = f"it lacks {exc}" if isinstance(exc, KeyError) else first_line(exc)
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
    try:
        if file_format == "onnx":
            session = onnx_session(path)
            name = session.get_inputs()[0].name
            return lambda batch: torch.from_numpy(session.run(None, {name: batch.numpy()})[0])
        if file_format == "exported-program":
            export_log = logging.getLogger("torch.export")  # it logs a traceback before it raises
            level = export_log.level
            export_log.setLevel(logging.CRITICAL)
            try:
                return torch.export.load(path).module()
            finally:
                export_log.setLevel(level)
        with warnings.catch_warnings():  # TorchScript is deprecated in favour of torch.export, and says so
            warnings.simplefilter("ignore")
            return torch.jit.load(path, map_location="cpu")
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 (each runtime raises its own kinds on a file it cannot read)
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
        raise ModelError(f"{path} is not a readable {file_format} file ({reason})") from None


def predict_exported(model_file: str, images: list[str], output: str, top_k: int) -> list[dict]:
    path = Path(model_file)
    file_format = format_of(path)
    sidecar = read_sidecar(path)
    run = load_exported(path, file_format)
    crop, classes = sidecar["preprocessing"]["crop"], sidecar["classes"]
    try:  # one blank image first: a file and a sidecar that do not belong together fail here, in one line
        with torch.inference_mode():  # as predict_images runs it: TorchScript specialises a graph on the first mode
            scores = run(torch.zeros(1, 3, crop, crop)).shape[-1]
    except Exception as exc:  # noqa: BLE001 (each runtime raises its own kinds)
        reason = first_line(exc)
        raise ModelError(f"{path} does not take the {crop} px images its sidecar describes ({reason})") from None
    if scores != len(classes):
        raise ModelError(f"{path} gives {scores} class scores, its sidecar names {len(classes)} classes; export again")
    return predict_images(run, preprocessing(sidecar), classes, images, output, top_k)
