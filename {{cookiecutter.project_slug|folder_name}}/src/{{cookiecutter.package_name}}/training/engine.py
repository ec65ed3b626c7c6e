"""One training epoch and one evaluation pass. Statistics stay on the device until the epoch ends."""

import itertools
import sys
import time
from dataclasses import dataclass

import torch
from torch import nn
from tqdm import tqdm

{% if cookiecutter.use_distributed %}
from ..core.distributed import DataParallel
{% endif %}
from ..core.errors import TrainingDiverged
from ..core.runtime import Runtime as PlainRuntime
{% if cookiecutter.task == "multi_label" %}
from ..reports.multi_label import correct, multi_label_metrics
{% else %}
from ..reports.metrics import confusion_matrix, correct
{% endif %}
{% if cookiecutter.use_amp %}
from .amp import MixedPrecision
{% endif %}

ADVICE = "lower --lr{{ ' or --clip-grad-norm' if cookiecutter.use_grad_clipping else '' }} and start again"


PROGRESS_SECONDS = 30  # without a terminal, a progress line this often


class Runtime({{ "MixedPrecision, " if cookiecutter.use_amp }}{{ "DataParallel, " if cookiecutter.use_distributed }}PlainRuntime):
    """How this repo's loop runs: a feature that changes how a step runs joins as a base class (core/runtime.py names
    what it may change)."""


class ProgressLines:
    """Where a progress bar cannot show (a log file, a scheduler's output), a short line every PROGRESS_SECONDS:
    a long epoch is not silent, and the log stays readable."""

    def __init__(self, batches, total: int, description: str):
        self.batches, self.total, self.description = batches, total, description

    def __len__(self) -> int:
        return self.total

    def __iter__(self):
        start = last = time.monotonic()
        for step, batch in enumerate(self.batches, 1):
            yield batch
            now = time.monotonic()
            if now - last >= PROGRESS_SECONDS and step < self.total:
                percent, left = round(100 * step / self.total), (now - start) / step * (self.total - step)
                done = f"{self.description} {step}/{self.total} steps ({percent} %), {now - start:.0f} s"
                print(f"  {done}, about {left:.0f} s to go", file=sys.stderr, flush=True)
                last = now


def _batches(loader, max_steps: int | None, description: str, done: int = 0, shown: bool = True):
    """The batches left of an epoch of at most `max_steps` of which `done` are trained (the loader skips those), with
    progress `shown` (by the main process alone)."""
    steps = len(loader) if max_steps is None else min(max_steps - done, len(loader))
    batches = itertools.islice(loader, steps)
    if not shown:
        return tqdm(batches, total=steps, disable=True)
    if not sys.stderr.isatty():
        return ProgressLines(batches, steps, description)
    return tqdm(batches, total=steps, desc=description, leave=False)


@dataclass
class Progress:
    """An epoch's steps and running sums, on the device until the epoch ends: with them, an epoch stopped partway
    goes on with the same accumulation groups and reports the figures of the whole epoch."""

    step: int
    seen: int
    loss_sum: torch.Tensor
    correct: torch.Tensor
    first_bad_step: torch.Tensor  # NaN/Inf guard without a host sync per step

    @classmethod
    def start(cls, device: torch.device) -> "Progress":
        zero = torch.zeros((), device=device)
        return cls(0, 0, zero, zero.long(), torch.full((), -1, device=device))


def train_one_epoch(
    model,
    loader,
    criterion,
    optimizer,
    runtime: Runtime,
    tricks=(),
    progress=None,
    accumulate_steps: int = 1,
    max_steps: int | None = None,
    channels_last: bool = False,
) -> dict:
    """`runtime`: the device, and how a step runs there; `tricks`: what plugs into the loop (tricks/__init__.py names
    the hooks); `progress`: where the epoch stands, when it does not start from its first batch. The optimizer steps
    once per `accumulate_steps` batches, on their mean gradient; `max_steps` cuts the epoch short."""

    def before_step():  # the tricks that read or change the gradients the step is about to take
        for trick in tricks:
            trick.before_step(model)

    model.train()
    device = runtime.device
    progress = progress or Progress.start(device)
    batches = _batches(loader, max_steps, "train", progress.step, runtime.is_main)
    total_steps = progress.step + len(batches)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    for images, targets in batches:
        images = images.to(device, non_blocking=True, memory_format=memory_format)
        targets = targets.to(device, non_blocking=True)
        group_start = progress.step - progress.step % accumulate_steps
        group_size = min(accumulate_steps, total_steps - group_start)  # a short last group: its own mean
        update = progress.step + 1 == group_start + group_size
        runtime.start_batch(model, update)
        for trick in tricks:
            images, targets = trick.batch(images, targets)
        with runtime.forward_pass():
            logits = model(images)
            loss = criterion(logits, targets)  # raw logits: CrossEntropyLoss applies log-softmax
        if progress.step == group_start:
            # Cleared here, just before the backward that refills them, as in PyTorch's examples: the allocator can
            # hand the freed memory straight back (cleared after the step, glibc's malloc page-faulted more).
            optimizer.zero_grad(set_to_none=True)
        runtime.backward(loss / group_size)
        if update:
            taken = runtime.step(optimizer, before_step)
            for trick in tricks if taken else ():
                trick.after_step(model)
        unseen_bad = (progress.first_bad_step < 0) & ~loss.detach().isfinite()
        progress.first_bad_step = torch.where(unseen_bad, progress.step + 1, progress.first_bad_step)
        progress.loss_sum += loss.detach() * len(targets)
        progress.correct += correct(logits.detach(), targets)
        progress.seen += len(targets)
        progress.step += 1
        if any([trick.after_batch(progress, update) for trick in tricks]):  # a list: every hook runs
            break
    # One host sync per epoch, with sums over every process so all report the same figures (and all stop together
    # if any one's loss diverged).
    first_bad_step, seen = progress.first_bad_step, torch.tensor(float(progress.seen), device=device)
    totals = [progress.loss_sum, progress.correct, seen, first_bad_step >= 0]
    loss_sum, right, seen, diverged = runtime.total(torch.stack([t.to(torch.float) for t in totals])).tolist()
    if diverged:
        where = f" at step {first_bad_step.item()}" if first_bad_step.item() >= 0 else " in another process"
        raise TrainingDiverged(f"the training loss became NaN or infinite{where}; {ADVICE}")
    return {"train_loss": loss_sum / seen, "train_acc": right / seen}


{% if cookiecutter.task == "multi_label" %}
@torch.inference_mode()
def evaluate(model, loader, runtime: Runtime, num_classes: int, max_steps=None, thresholds=0.5) -> dict:
    """Loss (plain binary cross-entropy whatever the training loss) and the multi-label figures at `thresholds` (one,
    or one per class), with the probabilities and targets of every image they come from."""
    model.eval()
    device = runtime.device
    logits, targets = [], []
    for images, batch_targets in _batches(loader, max_steps, "val", shown=runtime.is_main):
        with runtime.forward_pass():
            logits.append(model(images.to(device, non_blocking=True)).float())
        targets.append(batch_targets.to(device, non_blocking=True).float())
    # every image evaluated by exactly one process (maybe none in one): the processes' rows are the whole split once
    none = torch.empty(0, num_classes, device=device)
    logits, targets = (runtime.gather(torch.cat(part or [none])).double() for part in (logits, targets))
    loss = nn.functional.binary_cross_entropy_with_logits(logits, targets)  # the mean over images and classes
    probabilities = logits.sigmoid()
    figures = multi_label_metrics(probabilities, targets, thresholds)
    val = {"val_loss": loss.item(), "val_acc": figures.pop("exact_match")}  # every label right: sklearn's accuracy
    val |= {f"val_{name}": value for name, value in figures.items()}
    return val | {"probabilities": probabilities.cpu(), "targets": targets.cpu()}
{% else %}
@torch.inference_mode()
def evaluate(model, loader, runtime: Runtime, num_classes: int, max_steps=None) -> dict:
    """Loss and confusion matrix on hard labels, with plain cross-entropy whatever the training loss."""
    model.eval()
    device = runtime.device
    criterion = nn.CrossEntropyLoss(reduction="sum")
    loss_sum = torch.zeros((), device=device)
    matrix = torch.zeros(num_classes, num_classes, dtype=torch.long, device=device)
    for images, targets in _batches(loader, max_steps, "val", shown=runtime.is_main):
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with runtime.forward_pass():
            logits = model(images)
        loss_sum += criterion(logits.float(), targets)
        matrix += confusion_matrix(targets, logits.argmax(1), num_classes)
    runtime.total(matrix)  # exact: every image was evaluated by exactly one process
    runtime.total(loss_sum)
    matrix = matrix.cpu()
    seen = int(matrix.sum())
    return {"val_loss": loss_sum.item() / seen, "val_acc": matrix.trace().item() / seen, "confusion": matrix}
{% endif %}
