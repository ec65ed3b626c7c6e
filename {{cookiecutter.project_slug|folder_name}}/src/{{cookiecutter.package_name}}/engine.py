{% set stops_mid_epoch = cookiecutter.use_checkpointing and not cookiecutter.use_distributed %}
"""One training epoch and one evaluation pass. Statistics stay on the device until the epoch ends."""

import itertools
import sys
import time

import torch
from torch import nn
from tqdm import tqdm

{% if cookiecutter.use_amp %}
from .amp import autocast, scaled_step
{% endif %}
{% if cookiecutter.use_distributed %}
from .distributed import all_reduce, is_main, sync_gradients
{% endif %}
from .errors import TrainingDiverged
from .metrics import confusion_matrix

ADVICE = "lower --lr{{ ' or --clip-grad-norm' if cookiecutter.use_grad_clipping else '' }} and start again"


PROGRESS_SECONDS = 30  # without a terminal, a progress line this often


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


def _batches(loader, max_steps: int | None, description: str):
    steps = len(loader) if max_steps is None else min(max_steps, len(loader))
    batches = itertools.islice(loader, steps)
{% if cookiecutter.use_distributed %}
    if not is_main():  # rank 0 alone shows progress
        return tqdm(batches, total=steps, disable=True)
{% endif %}
    if not sys.stderr.isatty():
        return ProgressLines(batches, steps, description)
    return tqdm(batches, total=steps, desc=description, leave=False)


{% set loss_targets = "soft_targets" if cookiecutter.use_mixup else "targets" %}
def train_one_epoch(
    model,
    loader,
    criterion,
    optimizer,
    device,
    cfg,
{% if cookiecutter.use_amp %}
    scaler,
{% endif %}
{% if cookiecutter.use_mixup %}
    mix=None,
{% endif %}
{% if cookiecutter.use_ema %}
    ema=None,
{% endif %}
{% if stops_mid_epoch %}
    stop=None,
{% endif %}
) -> dict:
    model.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)
{% if cookiecutter.use_grad_clipping %}
    grad_norm_sum = torch.zeros((), device=device)
{% endif %}
    first_bad_step = torch.full((), -1, device=device)  # NaN/Inf guard without a host sync per step
    seen = steps = {{ 'updates = ' if cookiecutter.use_grad_clipping else '' }}0
    batches = _batches(loader, cfg.max_steps_per_epoch, "train")
    memory_format = torch.channels_last if cfg.channels_last else torch.contiguous_format
    for images, targets in batches:
        images = images.to(device, non_blocking=True, memory_format=memory_format)
        targets = targets.to(device, non_blocking=True)
        # --accumulate-steps: the optimizer steps once per group of batches, on their mean gradient
        group_start = steps - steps % cfg.accumulate_steps
        group_size = min(cfg.accumulate_steps, len(batches) - group_start)
        update = steps + 1 == group_start + group_size
{% if cookiecutter.use_distributed %}
        sync_gradients(model, update)  # the inner batches of a group skip DDP's all-reduce
{% endif %}
{% if cookiecutter.use_mixup %}
        images, soft_targets = mix(images, targets) if mix else (images, targets)
        targets = soft_targets.argmax(1) if mix else targets  # train_acc: the larger share of each mixed image
{% endif %}
{% if cookiecutter.use_amp %}
        with autocast(cfg.precision, device):
            logits = model(images)
            loss = criterion(logits, {{ loss_targets }})  # raw logits: CrossEntropyLoss applies log-softmax
{% else %}
        logits = model(images)
        loss = criterion(logits, {{ loss_targets }})  # raw logits: CrossEntropyLoss applies log-softmax
{% endif %}
        if steps == group_start:
            # Cleared here, just before the backward that refills them, as in PyTorch's examples: the allocator can
            # hand the freed memory straight back (cleared after the step, glibc's malloc page-faulted more).
            optimizer.zero_grad(set_to_none=True)
{% if cookiecutter.use_amp %}
        scaler.scale(loss / group_size).backward()
{% else %}
        (loss / group_size).backward()
{% endif %}
        if update:
{% if cookiecutter.use_amp %}
            scaler.unscale_(optimizer)  # the true gradients from here on (the step would unscale them anyway)
{% endif %}
{% if cookiecutter.use_grad_clipping %}
            if cfg.clip_grad_norm:
                norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad_norm, cfg.clip_grad_norm_type)
{% endif %}
{# What follows an optimizer step that was taken: each trick adds its lines here, and under fp16's GradScaler
    they are skipped with the step. #}
{% set after_step %}
{% if cookiecutter.use_ema %}
if ema:
    ema.update_parameters(model)
{% endif %}
{% if cookiecutter.use_grad_clipping %}
if cfg.clip_grad_norm:
    grad_norm_sum += norm
    updates += 1
{% endif %}
{% endset %}
{% if cookiecutter.use_amp and after_step.strip() %}
            if scaled_step(scaler, optimizer):  # False when fp16's scaler skipped the step: inf/NaN gradients
{{ after_step | trim | indent(16, first=True) }}
{% elif cookiecutter.use_amp %}
            scaled_step(scaler, optimizer)
{% else %}
            optimizer.step()
{% if after_step.strip() %}
{{ after_step | trim | indent(12, first=True) }}
{% endif %}
{% endif %}
        first_bad_step = torch.where((first_bad_step < 0) & ~loss.detach().isfinite(), steps + 1, first_bad_step)
        loss_sum += loss.detach() * len(targets)
        correct += (logits.argmax(1) == targets).sum()
        seen += len(targets)
        steps += 1
{% if stops_mid_epoch %}
        if stop:  # SIGTERM/SIGINT arrived: this step is done, leave the rest of the epoch
            break
{% endif %}
{% if cookiecutter.use_distributed %}
    # One host sync per epoch, with sums over every rank so all ranks report the same figures (and all stop
    # together if any rank's loss diverged).
    totals = [loss_sum, correct, torch.tensor(float(seen), device=device), first_bad_step >= 0]
    loss_sum, correct, seen, diverged = all_reduce(torch.stack([t.to(loss_sum.dtype) for t in totals])).tolist()
    if diverged:
        where = f"at step {first_bad_step.item()}" if first_bad_step.item() >= 0 else "on another rank"
        raise TrainingDiverged(f"the training loss became NaN or infinite {where}; {ADVICE}")
    stats = {"train_loss": loss_sum / seen, "train_acc": correct / seen}
{% else %}
    if first_bad_step.item() >= 0:
        raise TrainingDiverged(f"the training loss became NaN or infinite at step {first_bad_step.item()}; {ADVICE}")
    stats = {"train_loss": loss_sum.item() / seen, "train_acc": correct.item() / seen}
{% endif %}
{% if cookiecutter.use_grad_clipping %}
    if cfg.clip_grad_norm:
        stats["grad_norm"] = grad_norm_sum.item() / max(updates, 1)  # mean norm before clipping, same on all ranks
{% endif %}
    return stats


@torch.inference_mode()
{% if cookiecutter.use_amp %}
def evaluate(model, loader, device, num_classes: int, max_steps=None, precision: str = "fp32") -> dict:
{% else %}
def evaluate(model, loader, device, num_classes: int, max_steps=None) -> dict:
{% endif %}
    """Loss and confusion matrix on hard labels, with plain cross-entropy whatever the training loss."""
    model.eval()
    criterion = nn.CrossEntropyLoss(reduction="sum")
    loss_sum = torch.zeros((), device=device)
    matrix = torch.zeros(num_classes, num_classes, dtype=torch.long, device=device)
    for images, targets in _batches(loader, max_steps, "val"):
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
{% if cookiecutter.use_amp %}
        with autocast(precision, device):
            logits = model(images)
{% else %}
        logits = model(images)
{% endif %}
        loss_sum += criterion(logits.float(), targets)
        matrix += confusion_matrix(targets, logits.argmax(1), num_classes)
{% if cookiecutter.use_distributed %}
    all_reduce(matrix)  # exact: every image was evaluated by exactly one rank
    all_reduce(loss_sum)
{% endif %}
    matrix = matrix.cpu()
    seen = int(matrix.sum())
    return {"val_loss": loss_sum.item() / seen, "val_acc": matrix.trace().item() / seen, "confusion": matrix}
