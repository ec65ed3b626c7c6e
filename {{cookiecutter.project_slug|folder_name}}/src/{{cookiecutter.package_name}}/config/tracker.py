{% if cookiecutter.tracker != "none" %}
"""The experiment tracker's options (reports/tracking.py)."""

{% if cookiecutter.tracker == "mlflow" %}
import os
{% endif %}
from dataclasses import dataclass

from ..core.options import option


@dataclass
class Options:
{% if cookiecutter.tracker == "tensorboard" %}
    tensorboard: bool = option(True, "write TensorBoard logs into <output dir>/tensorboard")
{% elif cookiecutter.tracker == "mlflow" %}
    mlflow: bool = option(True, "log the run to MLflow")
    tracking_uri: str | None = option(
        None, "MLflow store: a folder (an SQLite store in it) or a server URI (auto: $MLFLOW_TRACKING_URI or mlruns)"
    )
    experiment: str = option("{{ cookiecutter.project_slug | escaped }}", "the MLflow experiment the run is logged under")

    def resolve(self) -> dict:
        """--tracking-uri, else $MLFLOW_TRACKING_URI, else mlruns/ where the command runs; a folder made absolute."""
        uri = self.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "mlruns"
        return {"tracking_uri": uri if "://" in uri else os.path.abspath(uri)}
{% elif cookiecutter.tracker == "wandb" %}
    wandb: bool = option(True, "log the run to Weights & Biases (offline unless WANDB_MODE=online)")
    experiment: str = option("{{ cookiecutter.project_slug | escaped }}", "the W&B project the run is logged under")
{% endif %}
{% endif %}
