"""The training tricks of this project, one module each, which the run finds here and plugs into its loop.

A trick's module holds:
- a docstring: `Name: what it is.`, then what it does for the user (the README's section on it was written from it);
- `Options`, a dataclass whose fields join the configuration (each a `train` flag and a config.yaml key), with, where
  it has them, `check()`, which refuses bad values, `resolve()`, which fills in its automatic values, and `off`, the
  values that switch the trick off (a run saved before the project had the trick goes on with it off);
- `FILES`, where it writes files into the run folder: name -> what it holds (the README lists them; --overwrite
  removes them);
- `build(cfg, num_classes)`, which returns a `Trick`, or None where the flags switch it off.

The run calls every trick's hooks at the few points below, in this order; a hook a trick leaves out does nothing.
Adding a trick is adding a module here: nothing else in the package changes (a helper module's name starts with _).
"""

from ..core.options import plugin_modules


class Trick:
    """The loop's extension points."""

    order = 0  # tricks that replace layers go first (lower), so that the others see the layers that train
    epoch_sums = False  # True: state() holds only sums of the epoch so far, which an epoch's end starts afresh

    def prepare(self, model, device):
        """The plain model on the CPU, before the optimizer takes its parameters and it moves to `device`: the model
        to train."""
        return model

    def param_groups(self, model, groups: list[dict]) -> list[dict]:
        """The optimizer's parameter groups (trainable parameters, split by weight decay): the groups to optimize."""
        return groups

    def criterion(self, criterion):
        """The training loss, a CrossEntropyLoss with the class weights: the loss to train with (validation keeps
        plain cross-entropy)."""
        return criterion

    def start(self, model, optimizer, scheduler):
        """The model on its device, unwrapped, with its optimizer and schedule: the schedule to step each epoch."""
        return scheduler

    def batch(self, images, targets):
        """Each training batch, on the device, before the forward pass (targets may become class probabilities)."""
        return images, targets

    def before_step(self, model) -> None:
        """Before each optimizer step, on the gradients it will take: those of the whole accumulation group, in true
        units (a loss scaler has unscaled them)."""

    def after_step(self, model) -> None:
        """After each optimizer step taken (under fp16 the scaler skips a step whose gradients overflowed)."""

    def after_batch(self, progress, update: bool) -> bool:
        """After each batch, counted into `progress` (the epoch's steps and sums); `update`: an optimizer step ended
        it. True stops the epoch there."""
        return False

    def after_epoch(self, epoch: int, model, validate) -> dict:
        """The epoch trained and validated: figures for its row of metrics.csv. `validate(net)` measures a model."""
        return {}

    def state(self) -> dict:
        """Objects with a `state_dict` that a checkpoint keeps under these names: a run continued goes on exactly."""
        return {}

    def final_weights(self, model, training_pass, validate) -> dict:
        """The run over: file name -> weights to save in the run folder (before model.pt, which marks the run done).
        `training_pass()` gives a pass over the training data, for a trick that measures something on it."""
        return {}


MODULES = plugin_modules(__name__, __path__, ("Options", "build"), "a trick module")
OPTIONS = [module.Options for module in MODULES]  # config/'s TrainConfig has the fields of each
OFF = {name: value for options in OPTIONS for name, value in getattr(options, "off", {}).items()}  # every trick off
FILES = [name for module in MODULES for name in getattr(module, "FILES", {})]  # what each writes into a run folder


def build_tricks(cfg, num_classes: int) -> list[Trick]:
    """The tricks this run uses, in the order their hooks are called."""
    built = (module.build(cfg, num_classes) for module in MODULES)
    return sorted((trick for trick in built if trick is not None), key=lambda trick: trick.order)
