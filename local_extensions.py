"""Jinja filters of this template (cookiecutter loads them through `_extensions`)."""

import json

from jinja2.ext import Extension


def quoted(value: str) -> str:
    """`value` as a double-quoted string literal valid in both Python and TOML, whatever it contains."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


class QuotedExtension(Extension):
    def __init__(self, environment):
        super().__init__(environment)
        environment.filters["quoted"] = quoted
