"""Reading image files: an RGB or gray JPEG decoded by torchvision straight into a tensor, anything else through
Pillow, and a message that names any file that is not a readable image."""

import contextlib
import os
import stat
import warnings

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from ..core.errors import DataError

try:  # JPEGs straight to tensors: deprecated since torchvision 0.29 (for TorchCodec); without it, Pillow decodes
    from torchvision.io import ImageReadMode, decode_jpeg

    warnings.filterwarnings("ignore", "The image decoding and encoding capabilities of TorchVision", DeprecationWarning)
except ImportError:
    decode_jpeg = None

UNREADABLE = (OSError, UnidentifiedImageError, ValueError, SyntaxError, EOFError)  # what corrupt image files raise


def load_image(path: str):
    """A training or validation image: an RGB or gray JPEG decoded by torchvision straight into a uint8 tensor (no
    Pillow image to copy and convert), anything else through Pillow."""
    with contextlib.suppress(OSError):  # a missing file: Pillow says so below
        if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe would block the read, a device never end it
            raise DataError(f"image {path} is not a regular file; delete it or replace it with an image")
    try:
        with open(path, "rb") as file:
            encoded = file.read()
    except OSError:
        encoded = b""  # Pillow says below what is wrong with the file
    frame = decode_jpeg and encoded[:3] == b"\xff\xd8\xff" and _jpeg_frame(encoded)
    # gray or colour (not CMYK), and within Pillow's guard against images made to exhaust memory when decoded
    if frame and frame[2] in (1, 3) and frame[0] * frame[1] <= Image.MAX_IMAGE_PIXELS:
        try:
            return decode_jpeg(torch.frombuffer(bytearray(encoded), dtype=torch.uint8), mode=ImageReadMode.RGB)
        except RuntimeError:  # damaged after its header: Pillow names the file
            pass
    return load_rgb(path)


def _jpeg_frame(encoded: bytes) -> tuple[int, int, int] | None:
    """Height, width and channels from a JPEG's frame header (read here: Pillow's parser costs a tenth of the
    decoding), or None where the markers before it are broken."""
    position = 2
    while position + 10 <= len(encoded) and encoded[position] == 0xFF:
        marker = encoded[position + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame, not a table
            height, width = (int.from_bytes(encoded[at : at + 2], "big") for at in (position + 5, position + 7))
            return height, width, encoded[position + 9]
        position += 2 + int.from_bytes(encoded[position + 2 : position + 4], "big")
    return None


def load_rgb(path: str) -> Image.Image:
    """ImageFolder's loader, with a message that names the file a corrupt or non-image file is."""
    try:
        with Image.open(path) as image:
            if image.mode.startswith("I"):  # 16-bit (or 32-bit) gray: convert() would clip every value above 255
                deep = np.asarray(image)
                image = Image.fromarray((deep >> 8 if deep.max() > 255 else deep).astype(np.uint8))
            return image.convert("RGB")
    except Image.DecompressionBombError:  # PIL's guard against images made to exhaust memory when decoded
        raise DataError(f"image {path} has more pixels than Pillow opens safely; shrink or remove it") from None
    except UNREADABLE as exc:
        raise DataError(f"cannot read image {path} ({exc.__class__.__name__}); delete or replace the file") from None
