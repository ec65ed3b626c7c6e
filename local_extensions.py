"""Jinja filters of this template (cookiecutter loads them through `_extensions`)."""

import json
import sys
from pathlib import Path

from cookiecutter.exceptions import FailedHookException
from jinja2.ext import Extension

# The choice prompts and their options, read beside this file: the template's own, whatever a replay file says.
TEMPLATE = json.loads((Path(__file__).resolve().parent / "cookiecutter.json").read_text(encoding="utf-8"))
TEMPLATE_CHOICES = {
    key: value for key, value in TEMPLATE.items() if isinstance(value, list) and not key.startswith("_")
}


def escaped(value: str) -> str:
    """`value` escaped for the inside of a double-quoted Python or TOML string, whatever it contains.

    Used as `"{{ cookiecutter.x | escaped }}"`, so template files stay valid Python and TOML unrendered.
    """
    return json.dumps(value, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f")


def folder_name(slug: str) -> str:
    """The project folder's name, checked where it is rendered: cookiecutter creates that folder before the
    pre-generation hook runs (which checks the slug's form), so a slug such as '../elsewhere' from a replay
    file must be refused here, before anything exists."""
    if not slug or slug.startswith(".") or any(sep in slug for sep in ("/", "\\", "\0")):
        print(
            f"ERROR: project_slug {slug[:60]!r} must be a plain folder name, without / or \\ and not starting "
            "with a dot; e.g. 'flower-classifier'",
            file=sys.stderr,
        )
        raise FailedHookException("Stopping generation: the project_slug answer was refused")
    return slug


def gpus(answer: str) -> str:
    """The gpu_ids answer as the default of --gpus: 'cpu' for CPU only (an empty answer, 'cpu' or 'none')."""
    ids = answer.replace(" ", "")
    return "cpu" if ids.lower() in ("", "cpu", "none") else ids


class EscapedExtension(Extension):
    def __init__(self, environment):
        super().__init__(environment)
        environment.filters["escaped"] = escaped
        environment.filters["folder_name"] = folder_name
        environment.filters["gpus"] = gpus
        environment.globals["template_choices"] = TEMPLATE_CHOICES
