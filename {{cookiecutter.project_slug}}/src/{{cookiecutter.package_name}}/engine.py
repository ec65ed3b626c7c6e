"""One training epoch and one evaluation pass. Statistics stay on the device until the epoch ends (T11/T43)."""

import itertools

import torch
from torch import nn
from tqdm import tqdm

from .metrics import confusion_matrix


def _batches(loader, max_steps: int | None, description: str):
    steps = len(loader) if max_steps is None else min(max_steps, len(loader))
    # tqdm hides itself when stdout is not a terminal (disable=None), so logs stay clean.
    return tqdm(itertools.islice(loader, steps), total=steps, desc=description, leave=False, disable=None)


def train_one_epoch(model, loader, criterion, optimizer, device, max_steps=None) -> dict:
    model.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)
    seen = 0
    for images, targets in _batches(loader, max_steps, "train"):
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        logits = model(images)
        loss = criterion(logits, targets)  # raw logits: CrossEntropyLoss applies log-softmax itself (T10)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach() * len(targets)
        correct += (logits.argmax(1) == targets).sum()
        seen += len(targets)
    return {"train_loss": loss_sum.item() / seen, "train_acc": correct.item() / seen}


@torch.inference_mode()
def evaluate(model, loader, criterion, device, num_classes: int, max_steps=None) -> dict:
    model.eval()
    loss_sum = torch.zeros((), device=device)
    matrix = torch.zeros(num_classes, num_classes, dtype=torch.long, device=device)
    for images, targets in _batches(loader, max_steps, "val"):
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        logits = model(images)
        loss_sum += criterion(logits, targets) * len(targets)
        matrix += confusion_matrix(targets, logits.argmax(1), num_classes)
    matrix = matrix.cpu()
    seen = int(matrix.sum())
    return {"val_loss": loss_sum.item() / seen, "val_acc": matrix.trace().item() / seen, "confusion": matrix}


def make_criterion() -> nn.Module:
    return nn.CrossEntropyLoss()
