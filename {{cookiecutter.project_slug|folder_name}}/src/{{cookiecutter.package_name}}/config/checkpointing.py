{% if cookiecutter.use_checkpointing %}
"""Checkpointing's options, and what a resumed run may change (training/continuation.py refuses anything else)."""

import re
from dataclasses import dataclass

from ..core.errors import UserError
from ..core.options import option

CHECKPOINT_EVERY = re.compile(r"([1-9][0-9]*)(min)?")  # optimizer steps, or minutes
# What a resume may change: where, how fast and for how long the run goes on. Every other saved field shaped the
# checkpoint's weights, optimizer state and metrics, and a resume that changes one is refused. Mid-epoch, the epoch's
# length is kept too: the saved step is a place in that epoch.
RESUME_MAY_CHANGE = {
    "epochs",
    "patience",
    "max_steps_per_epoch",
    "output_dir",  # a resume into another folder, or a run folder copied
    "data_root",
    "device",
    "gpus",
    "num_workers",  # the weights are the same with any number
    "deterministic",
    "channels_last",
    "compile",
    "activation_checkpointing",
    "plots",
    "profile",
    "detect_anomaly",
    "checkpoint_every",
{% if cookiecutter.use_amp %}
    "precision",  # fp16 on a GPU is bf16 or fp32 on a CPU
{% endif %}
{% if cookiecutter.use_distributed %}
    "nproc",
    "dist_timeout",
{% endif %}
{% if cookiecutter.tracker != "none" %}
    "{{ cookiecutter.tracker }}",
{% endif %}
}


@dataclass
class Options:
    resume: str | None = option(None, "checkpoint to continue from, or auto: the newest valid one in --output-dir")
    checkpoint_every: str | None = option(
        None, "also save last.pt mid-epoch: every N optimizer steps, or every N minutes as Nmin (e.g. 10min)"
    )
    per_invocation = {"resume"}  # a flag of one command: config.yaml never keeps it

    def check(self) -> None:
        if self.init_from and self.resume:
            raise UserError("--init-from starts a new run from other weights, --resume continues this one: pass one")
        if self.checkpoint_every is not None and not CHECKPOINT_EVERY.fullmatch(str(self.checkpoint_every)):
            raise UserError(f"--checkpoint-every takes steps or minutes (500, 10min), got {self.checkpoint_every}")
{% endif %}
