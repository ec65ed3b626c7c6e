"""`Run`: what a training run does around its epochs, in the places a feature that records the run can extend."""

from pathlib import Path

from ..core.errors import OutputError
from ..data.loaders import start_epoch
from ..tricks import Trick


class Run(Trick):
    """A run's life around its epochs: it checks its folder before anything is written, restores what an earlier
    start left, trains its epochs, records each, and ends. This one trains every epoch from the first, keeps only
    the final files, and refuses a folder that holds a finished run. A feature that records the run (train.py lists
    this repo's) extends these methods: an override that adds to one calls super(), one that replaces it comes before
    the others among the bases. Of a trick's hooks the epoch loop calls the run's per-batch ones (after_batch)."""

    best_file: str | None = None  # the file that keeps the best epoch's weights

    def __init__(self, out: Path, cfg, runtime):
        self.out, self.cfg, self.runtime = out, cfg, runtime  # cfg as given; restore() brings the settled one
        self.stopped = False  # the epoch loop ended partway
        self.check()

    @classmethod
    def guarding(cls, train):
        """`train` with what a feature must do however a run ends around it."""
        return train

    @classmethod
    def prepare(cls, cfg):
        """`cfg` as this start of the run takes it, before its automatic values are filled in."""
        return cfg

    def check(self) -> None:
        """Before anything is written: a run this folder must not take refused."""
        if (self.out / "model.pt").exists() and not self.cfg.overwrite:
            raise OutputError(f"{self.out} holds a finished run; pass --overwrite or another --output-dir")

    def restore(self, stateful: dict, data, cfg) -> list[dict]:
        """The metrics rows of the epochs already trained, with the objects of `stateful` as they were then; train()
        appends each new epoch's row to this list. `cfg`: the config the run trains with from here on."""
        self.cfg, self.loader, self.classes = cfg, data.train, data.classes
        return []

    def begin(self, first_epoch: int) -> None:
        """Once the run folder is claimed, before the first epoch this start trains."""

    def epochs(self, epochs):
        return epochs

    def start_epoch(self, epoch: int):
        """Before an epoch: the loader set for it, and where the epoch stands (None: at its start)."""
        start_epoch(self.loader, epoch)

    def end_epoch(self, rows: list[dict], val: dict) -> None:
        """After an epoch's row is written."""

    def end_epochs(self) -> None:
        """After the epoch loop, before the final weights."""

    def finish(self, best: dict) -> None:
        """After the final files, with the best epoch's row."""
