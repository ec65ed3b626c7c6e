"""Jinja filters of this template (cookiecutter loads them through `_extensions`)."""

import json

from jinja2.ext import Extension


def escaped(value: str) -> str:
    """`value` escaped for the inside of a double-quoted Python or TOML string, whatever it contains.

    Used as `"{{ cookiecutter.x | escaped }}"`, so template files stay valid Python and TOML unrendered.
    """
    return json.dumps(value, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f")


class EscapedExtension(Extension):
    def __init__(self, environment):
        super().__init__(environment)
        environment.filters["escaped"] = escaped
