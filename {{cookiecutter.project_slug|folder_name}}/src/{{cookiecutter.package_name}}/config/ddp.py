{% if cookiecutter.use_distributed %}
"""Multi-process training's options: how many processes start here, and how long they wait for each other."""

from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option

MAX_DIST_TIMEOUT = 365 * 24 * 3600  # a year: beyond it, the process group's clock overflows


@dataclass
class Options:
    nproc: int | None = option(None, "processes to start on this machine (default: one per --gpus id on GPUs)")
    dist_timeout: int = option(600, "seconds a process waits for the others before the job stops")

    def check(self) -> None:
        for name in ("nproc", "dist_timeout"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.dist_timeout > MAX_DIST_TIMEOUT:
            raise UserError(f"--dist-timeout must be at most {MAX_DIST_TIMEOUT} s (a year), got {self.dist_timeout}")
{% endif %}
