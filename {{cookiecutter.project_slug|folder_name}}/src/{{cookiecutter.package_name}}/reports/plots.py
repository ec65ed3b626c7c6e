{% if cookiecutter.task == "multi_label" %}
"""Pictures of a run: learning curves and each class's precision-recall curve, as PNG files."""
{% else %}
"""Pictures of a run: learning curves and a confusion-matrix heatmap, as PNG files."""
{% endif %}

import csv
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import DataError, UserError, first_line
from ..core.files import replacing

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HINT = "plot reads the folder of a training run"


def read_csv(path: Path) -> list[dict]:
    """The rows of a run's CSV; one that cannot be read, names a column twice or has a row longer than its header
    is a DataError."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:  # UTF-8 as the run wrote it; -sig: as Excel saves
            reader = csv.DictReader(file)
            rows, header = list(reader), reader.fieldnames or []
    except (OSError, UnicodeError, csv.Error) as exc:
        reason = getattr(exc, "strerror", None) or first_line(exc)  # an OSError's without the path again
        raise DataError(f"cannot read {path} ({reason}); {HINT}") from None
    repeated = [name for name, count in Counter(header).items() if count > 1]  # a dict row would keep one of them
    if repeated:
        raise DataError(f"{path}: the header names {repeated[0]!r} more than once; {HINT}")
    for number, row in enumerate(rows, 1):
        if None in row:  # DictReader's key for the values beyond the header's columns
            raise DataError(f"{path}: row {number} has more values than the header has columns; {HINT}")
    return rows


def numbers(path: Path, rows: list[dict], key: str, kind: type = float) -> list:
    """One column's values; an empty or non-numeric cell names the file, the row and the column."""
    values = []
    for number, row in enumerate(rows, 1):
        try:
            values.append(kind(row[key]))
        except (TypeError, ValueError):  # TypeError: the missing cell (None) of a short row
            raise DataError(f"{path}: {key!r} in row {number} is {row[key] or ''!r}, not a number; {HINT}") from None
    return values


def panels(columns: list[str]) -> dict[str, list[str]]:
    """The columns of each panel of the learning curves."""
    return {
        "loss": [key for key in columns if key.endswith("_loss")],
        "accuracy": [key for key in columns if key.endswith("_acc")],
        "learning rate": [key for key in columns if key == "lr" or key.startswith("lr[")],
    }


def read_metrics(path: Path) -> list[dict]:
    """metrics.csv's rows, checked: a file train did not write is named here, not drawn as an empty plot."""
    rows = read_csv(path)
    if not rows:  # the header alone tells nothing to draw either
        raise DataError(f"{path} holds no epochs (empty or a header alone); {HINT}")
    missing = [title for title, keys in panels(list(rows[0])).items() if not keys]  # a panel would stay empty
    missing = ["'epoch'"] if "epoch" not in rows[0] else missing
    if missing:
        raise DataError(f"{path} is not a metrics.csv written by train (no {' or '.join(missing)} column); {HINT}")
    for number, epoch in enumerate(numbers(path, rows, "epoch", int), 1):  # train writes 1, 2, 3, ... and no other
        if epoch != number:  # a repeated, missing or negative epoch: rows from elsewhere, or edited
            raise DataError(f"{path}: 'epoch' in row {number} is {epoch}, not {number}; {HINT}")
    for key in sum(panels(list(rows[0])).values(), []):
        numbers(path, rows, key, float)  # checked here, converted where drawn
    return rows


{% if cookiecutter.task == "multi_label" %}
def read_curves(path: Path) -> dict[str, tuple[list[float], list[float]]]:
    """precision_recall.csv as each class's recall and precision points; a file train did not write is named here."""
    rows = read_csv(path)
    if not rows or not {"class", "precision", "recall"} <= set(rows[0]):
        raise DataError(f"{path} is not a precision_recall.csv written by train (no class, precision, recall); {HINT}")
    curves: dict[str, tuple[list[float], list[float]]] = {}
    pairs = zip(rows, numbers(path, rows, "recall"), numbers(path, rows, "precision"), strict=True)
    for number, (row, recall, precision) in enumerate(pairs, 1):
        if not (0 <= recall <= 1 and 0 <= precision <= 1):
            raise DataError(f"{path}: row {number} has a precision or recall outside 0 to 1; {HINT}")
        points = curves.setdefault(row["class"], ([], []))
        points[0].append(recall)
        points[1].append(precision)
    return curves


{% else %}
def read_confusion(path: Path) -> tuple[list[list[int]], list[str]]:
    """confusion_matrix.csv as counts and class names; anything but a square table of counts is named here."""
    rows = read_csv(path)
    columns = list(rows[0]) if rows else []
    if not rows or len(columns) != len(rows) + 1:  # the class names, then one column of counts per class
        shape = f"{len(rows)} row(s) and {max(len(columns) - 1, 0)} column(s) of counts"
        raise DataError(f"{path} is not a confusion_matrix.csv written by train ({shape}, not square); {HINT}")
    classes, names = columns[1:], [row[columns[0]] for row in rows]
    for number, (name, column) in enumerate(zip(names, classes, strict=True), 1):
        if name != column:  # the true classes down the first column, the predicted ones across: the same, in order
            again = " again" if name in names[: number - 1] else ""
            raise DataError(
                f"{path}: row {number} is class {name!r}{again}, but column {number} of counts is {column!r}; {HINT}"
            )
    counts = [numbers(path, rows, key, int) for key in classes]
    for key, column in zip(classes, counts, strict=True):
        for number, count in enumerate(column, 1):
            if not 0 <= count < 2**63:  # beyond int64 matplotlib cannot draw it; below 0 it is no count
                raise DataError(f"{path}: {key!r} in row {number} is {count}, not a count from 0 to 2**63 - 1; {HINT}")
    return [list(row) for row in zip(*counts, strict=True)], names


{% endif %}
def learning_curves(rows: list[dict]) -> "Figure":
    """Loss, accuracy and the learning rate of every parameter group, by epoch."""
    from matplotlib.figure import Figure  # here: half a second to import, which a run pays only when it draws
    from matplotlib.ticker import MaxNLocator

    epochs = [int(row["epoch"]) for row in rows]
    figure = Figure(figsize=(15, 4), layout="constrained")  # no pyplot: files only, no display, nothing to close
    axes = figure.subplots(1, 3)
    for axis, (title, keys) in zip(axes, panels(list(rows[0])).items(), strict=True):
        for key in keys:
            axis.plot(epochs, [float(row[key]) for row in rows], marker="o", label=key)
        axis.set(title=title, xlabel="epoch")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole epochs: no 1.5 ticks
        axis.legend()
    return figure


{% if cookiecutter.task == "multi_label" %}
def precision_recall_figure(curves: dict[str, tuple[list[float], list[float]]]) -> "Figure":
    """Each class's precision against its recall as the threshold falls."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 5), layout="constrained")
    axis = figure.subplots()
    for name, (recall, precision) in curves.items():
        axis.step(recall, precision, where="post", label=name.replace("$", r"\$"))  # a name's $ is no math
    axis.set(xlabel="recall", ylabel="precision", title="precision-recall per class", xlim=(0, 1), ylim=(0, 1.02))
    if len(curves) <= 20:  # beyond that a legend hides the curves
        axis.legend(fontsize="small", loc="lower left")
    return figure


{% else %}
def confusion_figure(matrix: list[list[int]], classes: list[str]) -> "Figure":
    """Rows are true classes, columns predicted ones; each cell shows its count."""
    from matplotlib.figure import Figure

    size = max(4.0, 0.5 * len(classes) + 2)
    figure = Figure(figsize=(size + 1, size), layout="constrained")
    axis = figure.subplots()
    image = axis.imshow(matrix, cmap="Blues")
    figure.colorbar(image, ax=axis)
    axis.set(xlabel="predicted", ylabel="true", title="confusion matrix")
    # class names are text: a "$" in one must not start TeX-like math (parse errors would stop the run)
    axis.set_xticks(range(len(classes)), classes, rotation=90, parse_math=False)
    axis.set_yticks(range(len(classes)), classes, parse_math=False)
    if len(classes) <= 30:  # beyond that the numbers would not be readable
        top = max(max(row) for row in matrix) or 1
        for i, row in enumerate(matrix):
            for j, count in enumerate(row):
                axis.text(j, i, count, ha="center", va="center", color="white" if count > top / 2 else "black")
    return figure


{% endif %}
def save(figure: "Figure", path: Path) -> Path:
    with replacing(path) as file:
        figure.savefig(file, format="png", dpi=100, bbox_inches="tight")  # the colour bar's labels included
    return path


{% if cookiecutter.task == "multi_label" %}
def plot_run(run_dir: str | Path) -> list[Path]:
    """learning_curves.png from metrics.csv and precision_recall.png from precision_recall.csv, in the run dir."""
    run_dir = Path(run_dir)
    metrics, points = run_dir / "metrics.csv", run_dir / "precision_recall.csv"
    if not metrics.is_file() and not points.is_file():
        raise UserError(f"{run_dir} has no metrics.csv or precision_recall.csv; pass the output dir of a run")
    # both read and checked before either picture is drawn: a bad file leaves the folder as it was
    rows = read_metrics(metrics) if metrics.is_file() else None
    curves = read_curves(points) if points.is_file() else None
    written = []
    if rows is not None:
        written.append(save(learning_curves(rows), run_dir / "learning_curves.png"))
    if curves is not None:
        written.append(save(precision_recall_figure(curves), run_dir / "precision_recall.png"))
    return written
{% else %}
def plot_run(run_dir: str | Path) -> list[Path]:
    """learning_curves.png from metrics.csv and confusion_matrix.png from confusion_matrix.csv, in the run dir."""
    run_dir = Path(run_dir)
    metrics, confusion = run_dir / "metrics.csv", run_dir / "confusion_matrix.csv"
    if not metrics.is_file() and not confusion.is_file():
        raise UserError(f"{run_dir} has no metrics.csv or confusion_matrix.csv; pass the output dir of a run")
    # both read and checked before either picture is drawn: a bad file leaves the folder as it was
    rows = read_metrics(metrics) if metrics.is_file() else None
    matrix, classes = read_confusion(confusion) if confusion.is_file() else (None, None)
    written = []
    if rows is not None:
        written.append(save(learning_curves(rows), run_dir / "learning_curves.png"))
    if matrix is not None:
        written.append(save(confusion_figure(matrix, classes), run_dir / "confusion_matrix.png"))
    return written
{% endif %}
