{% if cookiecutter.tracker != "none" %}
"""The run logged to {{ {"tensorboard": "TensorBoard", "mlflow": "MLflow", "wandb": "Weights & Biases"}[cookiecutter.tracker] }} as it trains (reports/tracking.py), by the main process."""

from ..reports.metrics import MONITOR
from ..reports.tracking import Tracker, ending_tracked_runs
from .run import Run


class Tracked(Run):
    """A run whose epochs and results are logged to the experiment tracker too."""

    @classmethod
    def guarding(cls, train):
        return ending_tracked_runs(super().guarding(train))

    def restore(self, stateful: dict, data, cfg) -> list[dict]:
        self.tracker = Tracker(self.out, cfg, on=cfg.{{ cookiecutter.tracker }} and self.runtime.is_main)
{% if cookiecutter.use_checkpointing and cookiecutter.tracker in ("mlflow", "wandb") %}
        # its run id: a resumed run logs into the same tracked run
        return super().restore(stateful | {"tracker": self.tracker}, data, cfg)
{% else %}
        return super().restore(stateful, data, cfg)
{% endif %}

    def begin(self, first_epoch: int) -> None:
        super().begin(first_epoch)
        self.tracker.start(first_epoch)

    def end_epoch(self, rows: list[dict], val: dict) -> None:
        self.tracker.log_epoch(rows[-1], val, self.classes)
        super().end_epoch(rows, val)

    def finish(self, best: dict) -> None:
        super().finish(best)
        self.tracker.finish(best[MONITOR])
{% endif %}
