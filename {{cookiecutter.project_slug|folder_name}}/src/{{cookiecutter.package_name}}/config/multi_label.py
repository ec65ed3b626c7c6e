{% if cookiecutter.task == "multi_label" %}
"""Multi-label classification's options: where a probability becomes a predicted label."""

from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option


@dataclass
class Options:
    threshold: float = option(0.5, "predict a label where its probability reaches this")

    def check(self) -> None:
        if not 0 < self.threshold < 1:
            raise UserError(f"--threshold must be between 0 and 1 (a probability), got {self.threshold}")
{% endif %}
