"""`train(cfg)`: the whole training run, callable from the command line and from tests."""

import csv
import dataclasses
import os
import time
from pathlib import Path

import torch
from torchinfo import summary

from .config import TrainConfig, save_config
from .data import build_data, default_image_size, resolve_normalisation
from .engine import evaluate, make_criterion, train_one_epoch
from .errors import UserError
from .models import build_model
from .optim import DEFAULT_LR, build_optimizer, build_scheduler
from .runtime import resolve_device, seed_everything

METRICS_COLUMNS = ["epoch", "train_loss", "train_acc", "val_loss", "val_acc", "lr", "seconds"]


def resolve(cfg: TrainConfig) -> TrainConfig:
    """Fill in every automatic value so that the saved config reproduces the run exactly."""
    cfg = dataclasses.replace(
        cfg,
        image_size=cfg.image_size or default_image_size(cfg.data),
        lr=cfg.lr or DEFAULT_LR[cfg.optimizer],
        num_workers=cfg.num_workers if cfg.num_workers is not None else _default_workers(cfg.data),
        output_dir=cfg.output_dir or time.strftime("runs/%Y%m%d-%H%M%S"),
    )
    mean, std = resolve_normalisation(cfg)
    return dataclasses.replace(cfg, mean=mean, std=std)


def _default_workers(source: str) -> int:
    return 0 if source == "synthetic" else min(8, os.cpu_count() or 1)


def _prepare_output_dir(path: str) -> Path:
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create output dir {out}: {exc.strerror}; pick another --output-dir") from None
    return out


def train(cfg: TrainConfig) -> dict:
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed, cfg.deterministic)
    cfg = resolve(cfg)
    data = build_data(cfg, device)
    model = build_model(cfg.model, len(data.classes), cfg.pretrained, cfg.init).to(device)
    sample = torch.zeros(1, 3, cfg.image_size, cfg.image_size, device=device)
    print(summary(model, input_data=sample, depth=2, mode="eval", verbose=0))  # T14/T15
    optimizer = build_optimizer(model, cfg)
    scheduler = build_scheduler(optimizer, cfg)
    criterion = make_criterion()

    out = _prepare_output_dir(cfg.output_dir)
    save_config(cfg, out / "config.yaml")
    (out / "classes.txt").write_text("\n".join(data.classes) + "\n")
    rows, best = [], {"val_acc": -1.0}
    with open(out / "metrics.csv", "w", newline="") as metrics_file:
        writer = csv.DictWriter(metrics_file, fieldnames=METRICS_COLUMNS)
        writer.writeheader()
        for epoch in range(1, cfg.epochs + 1):
            start = time.perf_counter()
            lr = optimizer.param_groups[0]["lr"]
            stats = train_one_epoch(model, data.train, criterion, optimizer, device, cfg.max_steps_per_epoch)
            stats |= evaluate(model, data.val, criterion, device, len(data.classes), cfg.max_steps_per_epoch)
            scheduler.step()
            row = {"epoch": epoch, **{k: round(v, 6) for k, v in stats.items() if k != "confusion"}, "lr": lr}
            row["seconds"] = round(time.perf_counter() - start, 3)
            writer.writerow(row)
            metrics_file.flush()
            rows.append(row)
            best = max(best, row, key=lambda r: r["val_acc"])
            print(
                f"epoch {epoch}/{cfg.epochs}  train_loss {row['train_loss']:.4f}  train_acc {row['train_acc']:.4f}  "
                f"val_loss {row['val_loss']:.4f}  val_acc {row['val_acc']:.4f}  lr {lr:.3g}  {row['seconds']:.1f}s"
            )

    weights = out / "model.pt"
    torch.save(model.state_dict(), weights)
    print(f"best val_acc {best['val_acc']:.4f} (epoch {best['epoch']}); weights: {weights}")
    return {"best_val_acc": best["val_acc"], "weights": weights, "metrics": rows, "config": cfg}
