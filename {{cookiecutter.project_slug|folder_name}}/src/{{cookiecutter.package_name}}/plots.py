"""Pictures of a run (T44): learning curves and a confusion-matrix heatmap, as PNG files."""

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed, also on servers
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from .errors import UserError  # noqa: E402
from .files import replacing  # noqa: E402


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def learning_curves(rows: list[dict]) -> Figure:
    """Loss, accuracy and the learning rate of every parameter group, by epoch."""
    epochs = [int(row["epoch"]) for row in rows]
    figure, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
    panels = {"loss": [key for key in rows[0] if key.endswith("_loss")]}
    panels["accuracy"] = [key for key in rows[0] if key.endswith("_acc")]
    panels["learning rate"] = [key for key in rows[0] if key == "lr" or key.startswith("lr[")]
    for axis, (title, keys) in zip(axes, panels.items(), strict=True):
        for key in keys:
            axis.plot(epochs, [float(row[key]) for row in rows], marker="o", label=key)
        axis.set(title=title, xlabel="epoch")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers: no 1.5 ticks
        axis.legend()
    return figure


def confusion_figure(matrix: list[list[int]], classes: list[str]) -> Figure:
    """Rows are true classes, columns predicted ones; each cell shows its count."""
    size = max(4.0, 0.5 * len(classes) + 2)
    figure, axis = plt.subplots(figsize=(size + 1, size), layout="constrained")
    image = axis.imshow(matrix, cmap="Blues")
    figure.colorbar(image, ax=axis)
    axis.set(xlabel="predicted", ylabel="true", title="confusion matrix")
    axis.set_xticks(range(len(classes)), classes, rotation=90)
    axis.set_yticks(range(len(classes)), classes)
    if len(classes) <= 30:  # beyond that the numbers would not be readable
        top = max(max(row) for row in matrix) or 1
        for i, row in enumerate(matrix):
            for j, count in enumerate(row):
                axis.text(j, i, count, ha="center", va="center", color="white" if count > top / 2 else "black")
    return figure


def save(figure: Figure, path: Path) -> Path:
    with replacing(path) as file:
        figure.savefig(file, format="png", dpi=100, bbox_inches="tight")  # the colour bar's labels included
    plt.close(figure)
    return path


def plot_run(run_dir: str | Path) -> list[Path]:
    """learning_curves.png from metrics.csv and confusion_matrix.png from confusion_matrix.csv, in the run dir."""
    run_dir = Path(run_dir)
    if not (run_dir / "metrics.csv").is_file() and not (run_dir / "confusion_matrix.csv").is_file():
        raise UserError(f"{run_dir} has no metrics.csv or confusion_matrix.csv; pass the output dir of a run")
    written = []
    if (run_dir / "metrics.csv").is_file():
        written.append(save(learning_curves(read_csv(run_dir / "metrics.csv")), run_dir / "learning_curves.png"))
    if (run_dir / "confusion_matrix.csv").is_file():
        rows = read_csv(run_dir / "confusion_matrix.csv")
        classes = [row.pop(next(iter(row))) for row in rows]
        matrix = [[int(count) for count in row.values()] for row in rows]
        written.append(save(confusion_figure(matrix, classes), run_dir / "confusion_matrix.png"))
    return written
