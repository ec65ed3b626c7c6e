"""Jinja filters of this template (cookiecutter loads them through `_extensions`).

Some answers are checked here rather than in the pre-generation hook, because they fail before it runs: the
project folder is created (from `folder_name`) before the hook, and `project_slug` is derived from `project_name`
(with `slugify`) while the answers are read. A refusal is one `ERROR:` line, and nothing is on disk yet.
"""

import json
import sys
from pathlib import Path
from typing import NoReturn

from cookiecutter.exceptions import FailedHookException
from jinja2 import Undefined
from jinja2.ext import Extension

# The template's own prompts, read beside this file: the template's, whatever a replay file says.
TEMPLATE = json.loads((Path(__file__).resolve().parent / "cookiecutter.json").read_text(encoding="utf-8"))
TEMPLATE_CHOICES = {
    key: value for key, value in TEMPLATE.items() if isinstance(value, list) and not key.startswith("_")
}
TEMPLATE_YES_NO = sorted(key for key, value in TEMPLATE.items() if isinstance(value, bool))
TEMPLATE_TEXT = sorted(key for key, value in TEMPLATE.items() if isinstance(value, str) and not key.startswith("_"))
TEMPLATE_EXTENSIONS = TEMPLATE["_extensions"]

MAX_FOLDER_NAME = 100  # UTF-8 bytes (characters, for a valid slug); file systems stop at 255 bytes


def refuse(problem: str, key: str) -> NoReturn:
    """Stop the render with one line, as the pre-generation hook does (cookiecutter prints the exception's
    message on a line of its own, which does not start with ERROR)."""
    print(f"ERROR: {problem}", file=sys.stderr)
    raise FailedHookException(f"Stopping generation: the {key} answer was refused")


def shown(value) -> str:
    """A non-text answer as a replay file or --extra-context spells it."""
    if isinstance(value, Undefined):  # cookiecutter renders an object answer after the text ones that use it
        return "an object"
    try:
        return json.dumps(value)[:60]
    except (TypeError, ValueError):
        return type(value).__name__


def escaped(value: str) -> str:
    """`value` escaped for the inside of a double-quoted Python or TOML string, whatever it contains.

    Used as `"{{ cookiecutter.x | escaped }}"`, so template files stay valid Python and TOML unrendered.
    """
    return json.dumps(value, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f")


def folder_name(slug: str) -> str:
    """The project folder's name, checked where it is rendered: cookiecutter creates that folder before the
    pre-generation hook runs (which checks the slug's form), so a slug such as '../elsewhere', 5, a name too long
    for the file system or one that UTF-8 cannot write (from a replay file) must be refused here, before anything
    exists."""
    if not isinstance(slug, str):
        refuse(f"project_slug must be text (a string), e.g. 'flower-classifier', not {shown(slug)}", "project_slug")
    try:
        size = len(slug.encode("utf-8"))
    except UnicodeEncodeError:
        refuse(f"project_slug {slug[:60]!r} holds a character that UTF-8 cannot encode; retype it", "project_slug")
    if not slug or slug.startswith(".") or any(sep in slug for sep in ("/", "\\", "\0")):
        refuse(
            f"project_slug {slug[:60]!r} must be a plain folder name, without / or \\ and not starting "
            "with a dot; e.g. 'flower-classifier'",
            "project_slug",
        )
    if size > MAX_FOLDER_NAME:
        length = f"{size} characters" if size == len(slug) else f"{size} bytes in UTF-8"
        refuse(
            f"project_slug {slug[:40]!r}... (the folder name, derived from the project name unless given) is "
            f"{length} long; it must be at most {MAX_FOLDER_NAME} characters: give a shorter project name",
            "project_slug",
        )
    return slug


def gpus(answer: str) -> str:
    """The gpu_ids answer as the default of --gpus: 'cpu' for CPU only (an empty answer, 'cpu' or 'none')."""
    ids = answer.replace(" ", "")
    return "cpu" if ids.lower() in ("", "cpu", "none") else ids


def tricks_on(answers) -> list[str]:
    """The yes/no prompts answered yes (each is a trick's): `{% if cookiecutter | tricks_on %}` holds for any trick, so
    that a trick added later joins the condition without an edit."""
    return [key for key in TEMPLATE_YES_NO if answers.get(key) is True]


def text_only(slugify):
    """cookiecutter's `slugify`, which derives project_slug from project_name in cookiecutter.json, refusing a
    project_name that is not text (null or an object from --extra-context) with one line instead of a traceback."""

    def slugify_text(value, *args, **kwargs):
        if not isinstance(value, str):
            refuse(
                f"project_name must be text (a string), e.g. 'Flower Classifier', not {shown(value)}", "project_name"
            )
        return slugify(value, *args, **kwargs)

    return slugify_text


def refuse_foreign_extensions() -> None:
    """Refuse an `_extensions` list (from a replay file) naming a module the template does not, before Jinja
    imports it.

    cookiecutter hands no template code the answers before it builds its Jinja environment, which imports and
    starts the listed extensions one by one, in order: the answers are read from the frame of cookiecutter's
    extension loader (`cookiecutter.environment`), which called Jinja's. So an entry listed after the template's
    own is refused before it is imported; one listed before it has been imported already (cookiecutter's doing)
    and is refused now, before anything is written. Where that frame is not found (another cookiecutter), the
    pre-generation hook refuses the list instead."""
    frame = sys._getframe(1)
    while frame is not None and not (
        frame.f_globals.get("__name__") == "cookiecutter.environment" and "context" in frame.f_locals
    ):
        frame = frame.f_back
    context = frame.f_locals["context"] if frame is not None else None
    answers = context.get("cookiecutter") if isinstance(context, dict) else None
    listed = answers.get("_extensions", []) if isinstance(answers, dict) else []
    foreign = [str(name) for name in listed if str(name) not in TEMPLATE_EXTENSIONS] if isinstance(listed, list) else []
    if foreign:
        refuse(
            f"_extensions lists {', '.join(foreign)[:80]}, which this template does not use: remove the _extensions "
            "key from the replay file (the template's own list is used)",
            "_extensions",
        )


class EscapedExtension(Extension):
    def __init__(self, environment):
        refuse_foreign_extensions()
        super().__init__(environment)
        environment.filters["escaped"] = escaped
        environment.filters["folder_name"] = folder_name
        environment.filters["gpus"] = gpus
        environment.filters["tricks_on"] = tricks_on
        if "slugify" in environment.filters:  # cookiecutter's, loaded before the template's extensions
            environment.filters["slugify"] = text_only(environment.filters["slugify"])
        environment.globals["template_choices"] = TEMPLATE_CHOICES
        environment.globals["template_yes_no"] = TEMPLATE_YES_NO
        environment.globals["template_text"] = TEMPLATE_TEXT
        environment.globals["template_extensions"] = TEMPLATE_EXTENSIONS
        environment.globals["template_dir"] = str(Path(__file__).resolve().parent)  # for the post-generation hook
