{% if cookiecutter.use_checkpointing %}
"""Checkpoints of a run: `last.pt` after every epoch, `best.pt` by MONITOR (reports/metrics.py), and in the middle of an
epoch every --checkpoint-every or at the step a stop signal arrives.
"""

import time
from pathlib import Path

from ..config.checkpointing import CHECKPOINT_EVERY
{% if cookiecutter.use_distributed %}
from ..core.distributed import Agreement, continue_after_restart, is_distributed
{% endif %}
from ..core.errors import ModelError
{% if cookiecutter.use_distributed %}
from ..core.launcher import note_run_folder
{% endif %}
from ..data.loaders import start_epoch
from ..reports.metrics import stopped_early
from .checkpoint_file import ClassNames, save_checkpoints
from .continuation import FITTING, check_continuation, find_checkpoint, resume, resumed_progress
from .engine import Progress
from .run import Run
from .stop_signals import GracefulStop, catching_stop_signals, current_stop


class Checkpoints(Run):
    """A run that can be continued (--resume) from its checkpoints: after each epoch, and in the middle of one every
    --checkpoint-every (optimizer steps or minutes) and at the step a stop signal arrives. A mid-epoch checkpoint is
    written after an optimizer step, so a signal inside a group of --accumulate-steps batches lets the group finish
    first."""

    best_file = "best.pt"

    def __init__(self, out: Path, cfg, runtime):
        stop = current_stop()  # train()'s: a signal as it started stops it at once
        self.stop = GracefulStop() if stop is None else stop  # (a GracefulStop is falsy until a signal comes)
        self.saved = None
        super().__init__(out, cfg, runtime)
        every = CHECKPOINT_EVERY.fullmatch(str(cfg.checkpoint_every)) if cfg.checkpoint_every else None
        count, minutes = every.groups() if every else (None, None)
        self.every_steps = int(count) if count and not minutes else None
        self.every_seconds = int(count) * 60 if minutes else None
        self.steps, self.clock, self.due = 0, time.monotonic(), False
{% if cookiecutter.use_distributed %}
        self.agreement = Agreement() if is_distributed() else None  # every rank saves and stops at the same step
{% endif %}

    @classmethod
    def guarding(cls, train):
        return catching_stop_signals(super().guarding(train))
{% if cookiecutter.use_distributed %}

    @classmethod
    def prepare(cls, cfg):
        # a worker restarted by torchrun --max-restarts: from the newest checkpoint
        return continue_after_restart(super().prepare(cfg))
{% endif %}

    def check(self) -> None:
        self.found = find_checkpoint(self.cfg.resume, self.out)
        check_continuation(self.out, self.found, self.cfg)

    def restore(self, stateful: dict, data, cfg) -> list[dict]:
        super().restore(stateful, data, cfg)
        self.stateful = stateful | {"classes": ClassNames(data.classes)}  # a resume onto other classes is refused
        self.metrics, self.changes = resume(self.found, self.stateful, data.train.order, self.cfg)
        # changes: every resume's so far: each checkpoint holds them, changes.csv shows them
        self.resumed = resumed_progress(self.found, self.runtime.device)
        return self.metrics
{% if cookiecutter.use_distributed %}

    def begin(self, first_epoch: int) -> None:
        super().begin(first_epoch)
        note_run_folder(self.out)  # for --nproc's launcher, to name the checkpoint to continue from if a worker dies
{% endif %}

    def epochs(self, epochs):
        """The epochs to train; none more once a stop was asked for, and none at all when the restored epochs stopped
        early (the run was cut short after that, before its final files)."""
        epochs = super().epochs(epochs)
        if self.resumed is None and stopped_early(self.metrics, self.cfg.patience):  # a partway epoch is finished
            epochs = range(0)
{% if cookiecutter.use_distributed %}
        try:
            yield from self.stop.epochs(epochs)
        finally:
            if self.agreement:
                self.agreement.drain()
{% else %}
        return self.stop.epochs(epochs)
{% endif %}

    def start_epoch(self, epoch: int) -> Progress | None:
        progress, self.resumed = self.resumed, None
        steps = min(len(self.loader), self.cfg.max_steps_per_epoch or len(self.loader))
        if progress and progress.step > steps:  # a hand-made checkpoint: the flags that make the epoch were checked
            raise ModelError(f"the checkpoint stopped at step {progress.step} of an epoch of {steps} steps; {FITTING}")
        start_epoch(self.loader, epoch, progress.step if progress else 0)
        return progress

    def after_batch(self, progress: Progress, update: bool) -> bool:
        """After each batch: save when a checkpoint is due or a stop was asked for; True to stop the epoch here."""
        self.steps += update
        timed = self.every_seconds is not None and time.monotonic() - self.clock >= self.every_seconds
        if timed:
            self.clock = time.monotonic()
{% if cookiecutter.use_distributed %}
        if self.agreement:  # a signal to any rank stops them all at one step, as if each had received it
            number, timed = self.agreement.exchange([self.stop.signal or 0, timed])
            self.stop.adopt(number)
            stop = bool(number)
        else:
            stop = bool(self.stop)
{% else %}
        stop = bool(self.stop)
{% endif %}
        self.due |= stop or timed or (self.every_steps is not None and self.steps >= self.every_steps)
        if not (update and self.due):
            return False
        save_checkpoints(self.out, self.stateful, self.loader, self.metrics, self.cfg, progress, self.changes)
        self.saved = f"step {progress.step} of epoch {len(self.metrics) + 1}"
        self.steps, self.clock, self.due, self.stopped = 0, time.monotonic(), False, bool(stop)
        return self.stopped

    def end_epoch(self, rows: list[dict], val: dict) -> None:
        super().end_epoch(rows, val)
        save_checkpoints(self.out, self.stateful, self.loader, self.metrics, self.cfg, changes=self.changes)
        self.saved, self.steps, self.clock = "the last completed epoch", 0, time.monotonic()

    def end_epochs(self) -> None:
        super().end_epochs()
        self.stop.exit_if_stopped(self.out, self.saved)
{% endif %}
