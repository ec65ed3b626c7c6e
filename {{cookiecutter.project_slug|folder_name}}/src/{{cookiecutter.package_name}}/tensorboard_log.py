{% if cookiecutter.use_tensorboard %}
"""TensorBoard: `tensorboard --logdir runs` shows every run's curves side by side."""

import contextlib
import dataclasses
import threading
from pathlib import Path

import torch
from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread
from torch.utils.tensorboard import SummaryWriter

from .errors import OutputError
from .files import cannot_write, own_folder
from .plots import confusion_figure

# metrics.csv column -> TensorBoard tag; tags that share a prefix share a chart section
TAGS = {"train_loss": "loss/train", "val_loss": "loss/val", "train_acc": "accuracy/train", "val_acc": "accuracy/val"}
{% if cookiecutter.use_ema %}
TAGS |= {"ema_val_loss": "loss/ema_val", "ema_val_acc": "accuracy/ema_val"}  # beside the trained model's curves
{% endif %}


def tag(column: str) -> str:
    """Column to tag: lr -> lr/base, lr[fc] -> lr/fc (one chart for every group), others as in TAGS."""
    if column == "lr":
        return "lr/base"
    if column.startswith("lr["):
        return "lr/" + column[3:-1]
    return TAGS.get(column, column)


_report_thread_error = threading.excepthook


def _quiet_writer_thread(args) -> None:
    """TensorBoard writes its events file from a thread. A failed write (a full disk, say) reaches the main thread
    again at the next write or flush, which says it in one line: the thread's own traceback only adds noise."""
    if not isinstance(args.thread, _AsyncWriterThread):
        _report_thread_error(args)


threading.excepthook = _quiet_writer_thread


class TensorBoardLog:
    """Scalars (and, with plots on, the confusion matrix) every epoch; the hyper-parameters with the best accuracy
    at the end."""

    def __init__(self, log_dir: Path, cfg):
        self.log_dir = log_dir
        with self.writing():
            self.writer = SummaryWriter(own_folder(log_dir))  # a planted link is replaced, not followed
        self.figures = cfg.plots  # drawing one costs about half a second per epoch
        # add_hparams takes numbers, strings and booleans only
        self.hyperparameters = {
            key: value if isinstance(value, int | float | str | bool) else str(value)
            for key, value in dataclasses.asdict(cfg).items()
        }

    @contextlib.contextmanager
    def writing(self):
        try:
            yield
        except OSError as exc:
            raise cannot_write(self.log_dir, exc) from None
        except UnicodeError:  # TensorBoard encodes its paths as UTF-8, whatever the file system allows
            name = ascii(str(self.log_dir))
            raise OutputError(f"TensorBoard cannot write into {name} (not UTF-8); pass --no-tensorboard") from None

    def log_epoch(self, row: dict, confusion: torch.Tensor, classes: list[str]) -> None:
        epoch = row["epoch"]
        with self.writing():
            for column, value in row.items():
                if column not in ("epoch", "seconds"):
                    self.writer.add_scalar(tag(column), value, epoch)
            if self.figures:
                self.writer.add_figure("confusion_matrix", confusion_figure(confusion.tolist(), classes), epoch)
            self.writer.flush()  # visible now, and kept if the run is killed

    def finish(self, best_val_acc: float) -> None:
        with self.writing():
            self.writer.add_hparams(self.hyperparameters, {"hparam/best_val_acc": best_val_acc}, run_name=".")
            self.writer.close()
{% endif %}
