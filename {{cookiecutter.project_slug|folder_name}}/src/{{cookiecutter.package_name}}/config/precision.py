{% if cookiecutter.use_amp %}
"""Mixed precision's option: the dtype of autocast (training/amp.py)."""

from dataclasses import dataclass

from ..core.options import option


@dataclass
class Options:
    precision: str = option("{{ cookiecutter.amp_precision | escaped }}", "autocast precision (fp32 turns it off)", choices=["fp32", "bf16", "fp16"])
{% endif %}
