"""`train(cfg)`: the whole training run, callable from the command line and from tests."""

import dataclasses
import itertools
import os
import time
from importlib import resources
from pathlib import Path

import torch
from torch import nn
from torchinfo import summary

from ..config import TrainConfig, resolve_options, save_config
from ..core.errors import OutputError, TrainingDiverged, UserError
from ..core.files import save, write_text
from ..core.run_folder import RunFolder, releasing_run_folders
from ..core.runtime import seed_everything
from ..data.loaders import Data, build_data, describe_data, start_epoch, stopping_data_workers
from ..data.sources import NAMED_DATA, NO_FLIP, default_image_size
from ..data.transforms import resolve_normalisation
from ..models import build_model, check_fits, checkpoint_activations, init_from, pretrained_preprocessing, weights_file
from ..reports.metrics import MONITOR, best_row, stopped_early, write_csv
from ..reports.plots import plot_run
from ..tricks import FILES, build_tricks
{% if cookiecutter.use_checkpointing %}
from .checkpoint import Checkpoints
{% endif %}
from .engine import Runtime, evaluate, train_one_epoch
from .optim import DEFAULT_LR, L1Penalty, build_optimizer, build_scheduler, learning_rates
from .profiling import ProfiledLoader
from .run import Run as PlainRun
from .task import training_loss, write_epoch_reports
{% if cookiecutter.tracker != "none" %}
from .tracked import Tracked
{% endif %}

ANSWERS = resources.files(__package__.partition(".")[0]) / "answers.json"  # the answers this repo was rendered from


class Run({{ "Tracked, " if cookiecutter.tracker != "none" }}{{ "Checkpoints, " if cookiecutter.use_checkpointing }}PlainRun):
    """This repo's run around its epochs: a feature that records the run joins as a base class (training/run.py names
    what it may extend)."""


def resolve(cfg: TrainConfig) -> TrainConfig:
    """Fill in every automatic value so that the saved config reproduces the run exactly."""
    size, mean, std = pretrained_preprocessing(cfg.model) if cfg.pretrained else (None, None, None)
    cfg = dataclasses.replace(
        cfg,
        image_size=cfg.image_size or size or default_image_size(cfg.data),
        lr=cfg.lr or DEFAULT_LR[cfg.optimizer],
        num_workers=cfg.num_workers if cfg.num_workers is not None else _default_workers(cfg),
        output_dir=os.path.abspath(cfg.output_dir or _default_output_dir(cfg)),  # printed commands work anywhere
        data=cfg.data if cfg.data in NAMED_DATA else os.path.abspath(cfg.data),
        data_root=os.path.abspath(cfg.data_root),
        split=cfg.split and os.path.abspath(cfg.split),
        hflip=cfg.hflip if cfg.hflip is not None else cfg.data not in NO_FLIP,
    )
    cfg = dataclasses.replace(cfg, split=cfg.split or _own_split(Path(cfg.output_dir), cfg), **resolve_options(cfg))
    if cfg.mean is None:  # pretrained weights: the statistics they were trained with
        cfg = dataclasses.replace(cfg, mean=mean, std=std)
    mean, std = resolve_normalisation(cfg)
    return dataclasses.replace(cfg, mean=mean, std=std)


def _default_workers(cfg: TrainConfig) -> int:
    """Workers for photos, which decoding makes the bottleneck, and for any accelerator, which one process cannot keep
    busy; none for the synthetic images on a CPU, where workers only add copies."""
    accelerated = cfg.device != "cpu" and torch.accelerator.is_available()
    return min(8, os.cpu_count() or 1) if cfg.data != "synthetic" or accelerated else 0


def _own_split(out: Path, cfg: TrainConfig) -> str | None:
{% if cookiecutter.use_checkpointing %}
    """The split.csv of the run this one continues or restarts, which validates on the same images: the run
    folder's own, else the one beside --resume PATH (a resume into a new folder)."""
    folders = [] if cfg.overwrite else [out]
    if cfg.resume and cfg.resume != "auto":
        folders.append(Path(cfg.resume).parent)
    return next((str(folder / "split.csv") for folder in folders if (folder / "split.csv").is_file()), None)
{% else %}
    """The split.csv this run folder already holds: the run, restarted, validates on the same images."""
    return str(out / "split.csv") if (out / "split.csv").is_file() and not cfg.overwrite else None
{% endif %}


def _default_output_dir(cfg: TrainConfig) -> str:
{% if cookiecutter.use_checkpointing %}
    if cfg.resume and cfg.resume != "auto":
        return str(Path(cfg.resume).parent)  # continue in the run being resumed
{% endif %}
    return time.strftime("runs/%Y%m%d-%H%M%S")


def _start_run_dir(folder: RunFolder, cfg: TrainConfig, data: Data) -> None:
    """The run's own files, written once the run is sure to start: a refused run leaves the folder as it was."""
    folder.claim()
    out = folder.path
    try:
        # the markers of a run folder first: a start cut short leaves a folder that is recognised as a run's
        write_text(out / "classes.txt", "\n".join(data.classes) + "\n")
        write_text(out / "answers.json", ANSWERS.read_text(encoding="utf-8"))
        # data split here or read from a split.csv: the folder's own split.csv, written below, holds that split
        # (and goes with the folder wherever it is copied or moved); an earlier run's split.csv is not needed again
        save_config(dataclasses.replace(cfg, split=None) if data.rows else cfg, out / "config.yaml")
        # model.pt marks a finished run, which this one is not until it writes its own
        (out / "model.pt").unlink(missing_ok=True)
{% if cookiecutter.task == "multi_label" %}
        for fitted in out.glob("*_thresholds.csv"):  # fitted to weights this run replaces
            fitted.unlink()
{% endif %}
        describe_data(data, out)
    except OSError as exc:
        raise OutputError(f"cannot write to output dir {out} ({exc.strerror}); pick another --output-dir") from None


def _format(row: dict) -> str:
    parts = (f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}" for key, value in row.items())
    return "  ".join(parts)


def _weights_line(out: Path, rows: list[dict], tricks_files, best_file: str | None) -> str:
    """Which file holds which figure: model.pt is the last epoch's weights, which need not be the best epoch's; a
    trick's file, with the figures of its last evaluation where metrics.csv has them (<file name>_<MONITOR>)."""
    best, last = best_row(rows), rows[-1]
    said = f"best {MONITOR} {best[MONITOR]:.4f} (epoch {best['epoch']}"
    for name in tricks_files:
        figure = f"{Path(name).stem}_{MONITOR}"
        shown = f" {MONITOR} {last[figure]:.4f} (epoch {last['epoch']})" if figure in last else ""
        said = f"{Path(name).stem.upper()}{shown}: {out / name}; {said}"
    if best is last:
        return f"{said}, the last): {out / 'model.pt'}"
    said += f"): {out / best_file}" if best_file else "; no file keeps its weights)"
    return f"{said}; last {MONITOR} {last[MONITOR]:.4f} (epoch {last['epoch']}): {out / 'model.pt'}"


def _save_results(out: Path, weights: dict[str, nn.Module], cfg: TrainConfig, classes: list[str]) -> None:
    """The pictures of the run, then the final weights, a file per model: model.pt last, as it marks the run
    finished, and a run cut short before it has not finished."""
    if cfg.plots:
        plot_run(out)
    for name, model in weights.items():
        save(weights_file(model, classes), out / name)


@releasing_run_folders
@stopping_data_workers
@Run.guarding
def train(cfg: TrainConfig, after_epoch=None) -> dict:
    """The whole run. `after_epoch(rows)`, if given, sees the metrics rows after each epoch is saved: tune's trials
    report to the pruner there, and stop by raising."""
    runtime = Runtime.start(cfg)  # the device, and the processes that train together
    seed_everything(cfg.seed, cfg.deterministic)
    cfg = runtime.shared(resolve(Run.prepare(cfg)))  # the main process's output dir and statistics for every process
    device = runtime.device
    torch.autograd.set_detect_anomaly(cfg.detect_anomaly)
    out = Path(cfg.output_dir)
    folder = RunFolder(out, cfg.overwrite, FILES)  # never a folder of other files
    run = Run(out, cfg, runtime)  # checked before anything is written: a refused run changes nothing
    cfg = runtime.settle(cfg)  # after the check, whose refusal then comes alone
    data = build_data(cfg, device)
    if cfg.batch_size > len(data.train.dataset):
        raise UserError(
            f"--batch-size {cfg.batch_size} exceeds the {len(data.train.dataset)} training images; lower it"
        )
    model = build_model(cfg.model, len(data.classes), cfg.pretrained, cfg.init)
    if cfg.init_from:
        init_from(model, cfg.init_from, data.classes)
    tricks = build_tricks(cfg, len(data.classes))
    for trick in tricks:
        model = trick.prepare(model, device)
    if cfg.activation_checkpointing:
        checkpoint_activations(model)
    model.to(device, memory_format=torch.channels_last if cfg.channels_last else torch.preserve_format)
    sample = data.val.normalise(data.val.dataset[0][0][None])  # one real image
    check_fits(model, sample, len(data.classes), cfg)
    print(summary(model, input_data=sample, depth=2, mode="eval", verbose=0))
    optimizer = build_optimizer(model, cfg, tricks)
    trained = runtime.wrap(model)  # after every trick's preparation; `model` stays as built, for saving
    trained = torch.compile(trained) if cfg.compile else trained
    scheduler = build_scheduler(optimizer, cfg)
    for trick in tricks:
        scheduler = trick.start(model, optimizer, scheduler)  # the plain model: identical on every process
    criterion = training_loss(data.class_weights)
    for trick in tricks:
        criterion = trick.criterion(criterion)
    criterion = L1Penalty(criterion, model, cfg.l1) if cfg.l1 else criterion  # nothing at all when 0
    stateful = {"model": model, "optimizer": optimizer, "scheduler": scheduler} | runtime.state()
    for trick in tricks:
        stateful |= trick.state()
    rows = run.restore(stateful, data, cfg)  # the epochs an earlier start trained, if any
    if runtime.is_main:
        _start_run_dir(folder, cfg, data)
    runtime.barrier()
    print(f"run folder: {out}")
    if cfg.max_steps_per_epoch and cfg.max_steps_per_epoch < len(data.val):  # per_class.csv's supports: these only
        print(f"validation: the first {cfg.max_steps_per_epoch} of {len(data.val)} batches (--max-steps-per-epoch)")
    run.begin(len(rows) + 1)  # the first epoch this start trains
    loader = ProfiledLoader(data.train, out / "profile", device) if cfg.profile and runtime.is_main else data.train

    def training_pass():
        """The training data once more, in an order no epoch had (epoch 0), for a trick that measures something."""
        start_epoch(data.train, 0)
        return itertools.islice(data.train, cfg.max_steps_per_epoch)

    def validate(net: nn.Module) -> dict:
        runtime.share_buffers(net)  # every process evaluates the main one's statistics: those of the file it saves
        return evaluate(net, data.val, runtime, len(data.classes), cfg.max_steps_per_epoch{{ ", cfg.threshold" if cookiecutter.task == "multi_label" }})

    for epoch in run.epochs(range(len(rows) + 1, cfg.epochs + 1)):
        start = time.perf_counter()
        row = {"epoch": epoch}
        progress = run.start_epoch(epoch)  # None, or where an epoch begun by an earlier start stands
        try:
            row |= train_one_epoch(
                trained,
                loader,
                criterion,
                optimizer,
                runtime,
                tricks=[*tricks, run],  # the loop calls the run's after_batch too
                progress=progress,
                accumulate_steps=cfg.accumulate_steps,
                max_steps=cfg.max_steps_per_epoch,
                channels_last=cfg.channels_last,
            )
        except TrainingDiverged as exc:  # nothing of this epoch is saved: the last checkpoint stays good
            raise TrainingDiverged(f"epoch {epoch}: {exc}") from None
        if cfg.l1:
            row["l1_penalty"] = criterion.epoch_mean()  # its share of train_loss
        if run.stopped:  # partway through the epoch
            break
        val = validate(model)
        row |= {name: value for name, value in val.items() if name.startswith("val_")}
        for trick in tricks:
            row |= trick.after_epoch(epoch, model, validate)  # the epoch's figures, before the schedule steps
        for name, rate in learning_rates(optimizer).items():
            row.setdefault(name, rate)  # a trick that gives groups rates of their own has logged them
        scheduler.step()
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
        if runtime.is_main:
            write_csv(out / "metrics.csv", rows)
            write_epoch_reports(out, val, data.classes, cfg)
        run.end_epoch(rows, val)
        print(_format(row))
        if after_epoch:
            after_epoch(rows)
        if stopped_early(rows, cfg.patience):
            since = best_row(rows)["epoch"]
            print(f"early stop: {MONITOR} has not improved for {cfg.patience} epochs since epoch {since}")
            break

    run.end_epochs()
    tricks_weights = {}
    for trick in tricks:
        tricks_weights |= trick.final_weights(model, training_pass, validate)
    final = tricks_weights | {"model.pt": model}  # model.pt last: it marks the run finished
    if runtime.is_main:
        _save_results(out, final, cfg, data.classes)
    best = best_row(rows)
    run.finish(best)
    weights = out / "model.pt"
    print(_weights_line(out, rows, tricks_weights, run.best_file))
    return {f"best_{MONITOR}": best[MONITOR], "weights": weights, "metrics": rows, "config": cfg, "model": model}
