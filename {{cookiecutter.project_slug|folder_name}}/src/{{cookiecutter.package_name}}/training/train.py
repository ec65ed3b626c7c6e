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

from ..config import TrainConfig, save_config
{% if cookiecutter.use_distributed %}
from ..core.distributed import barrier, broadcast, broadcast_buffers, is_main, setup, world_size, wrap
{% endif %}
from ..core.errors import OutputError, TrainingDiverged, UserError
from ..core.files import save, write_text
{% if cookiecutter.use_distributed and cookiecutter.use_checkpointing %}
from ..core.launcher import continue_after_restart, note_run_folder
{% endif %}
from ..core.run_folder import RunFolder, releasing_run_folders
from ..core.runtime import resolve_device, seed_everything
from ..data.loaders import Data, build_data, describe_data, start_epoch, stopping_data_workers
from ..data.sources import NAMED_DATA, NO_FLIP, default_image_size
from ..data.transforms import resolve_normalisation
from ..models import build_model, check_fits, checkpoint_activations, init_from, pretrained_preprocessing, weights_file
from ..reports.metrics import stopped_early, write_csv, write_reports
from ..reports.plots import plot_run
{% if cookiecutter.tracker != "none" %}
from ..reports.tracking import Tracker, ending_tracked_runs{{ ', resolve_store' if cookiecutter.tracker == "mlflow" else '' }}
{% endif %}
from ..tricks import FILES, build_tricks, resolve_options
{% if cookiecutter.use_amp %}
from .amp import make_scaler, resolve_precision
{% endif %}
{% if cookiecutter.use_checkpointing %}
from .checkpoint import Checkpoints
from .checkpoint_file import ClassNames
from .continuation import check_continuation, find_checkpoint, resume, resumed_progress
{% endif %}
from .engine import evaluate, train_one_epoch
from .optim import DEFAULT_LR, L1Penalty, build_optimizer, build_scheduler, learning_rates
from .profiling import ProfiledLoader
{% if cookiecutter.use_checkpointing %}
from .stop_signals import catching_stop_signals
{% endif %}

ANSWERS = resources.files(__package__.partition(".")[0]) / "answers.json"  # the answers this repo was rendered from


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
{% if cookiecutter.tracker == "mlflow" %}
        tracking_uri=resolve_store(cfg.tracking_uri),
{% endif %}
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


{% if not cookiecutter.use_checkpointing %}
def _refuse_to_replace(out: Path, cfg: TrainConfig) -> None:
    if (out / "model.pt").exists() and not cfg.overwrite:
        raise OutputError(f"{out} holds a finished run; pass --overwrite or another --output-dir")


{% endif %}
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
{% if cookiecutter.use_checkpointing %}
        # a finished run continued is unfinished until it writes its own: killed before that, it is resumed
        (out / "model.pt").unlink(missing_ok=True)
{% endif %}
        describe_data(data, out)
    except OSError as exc:
        raise OutputError(f"cannot write to output dir {out} ({exc.strerror}); pick another --output-dir") from None


def _format(row: dict) -> str:
    parts = (f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}" for key, value in row.items())
    return "  ".join(parts)


def _best(rows: list[dict]) -> dict:
    return max(rows, key=lambda row: row["val_acc"])


def _weights_line(out: Path, rows: list[dict], tricks_files) -> str:
    """Which file holds which figure: model.pt is the last epoch's weights, which need not be the best epoch's; a
    trick's file, with the figures of its last evaluation where metrics.csv has them (<file name>_val_acc)."""
    best, last = _best(rows), rows[-1]
    said = f"best val_acc {best['val_acc']:.4f} (epoch {best['epoch']}"
    for name in tricks_files:
        figure = f"{Path(name).stem}_val_acc"
        shown = f" val_acc {last[figure]:.4f} (epoch {last['epoch']})" if figure in last else ""
        said = f"{Path(name).stem.upper()}{shown}: {out / name}; {said}"
    if best is last:
        return f"{said}, the last): {out / 'model.pt'}"
{% if cookiecutter.use_checkpointing %}
    said += f"): {out / 'best.pt'}"
{% else %}
    said += "; no file keeps its weights)"
{% endif %}
    return f"{said}; last val_acc {last['val_acc']:.4f} (epoch {last['epoch']}): {out / 'model.pt'}"


def _save_results(out: Path, weights: dict[str, nn.Module], cfg: TrainConfig, classes: list[str]) -> None:
    """The pictures of the run, then the final weights, a file per model: model.pt last, as it marks the run
    finished, and a run cut short before it has not finished."""
    if cfg.plots:
        plot_run(out)
    for name, model in weights.items():
        save(weights_file(model, classes), out / name)


@releasing_run_folders
@stopping_data_workers
{% if cookiecutter.tracker != "none" %}
@ending_tracked_runs
{% endif %}
{% if cookiecutter.use_checkpointing %}
@catching_stop_signals
{% endif %}
def train(cfg: TrainConfig, after_epoch=None) -> dict:
    """The whole run. `after_epoch(rows)`, if given, sees the metrics rows after each epoch is saved: tune's trials
    report to the pruner there, and stop by raising."""
{% if cookiecutter.use_distributed %}
    device = setup(cfg.device, cfg.gpus, cfg.dist_timeout) or resolve_device(cfg.device, cfg.gpus)
{% if cookiecutter.use_checkpointing %}
    cfg = continue_after_restart(cfg)  # restarted by torchrun --max-restarts: from the newest checkpoint
{% endif %}
    seed_everything(cfg.seed, cfg.deterministic)
    cfg = broadcast(resolve(cfg))  # rank 0's output dir and statistics for every rank
    if cfg.batch_size % world_size():
        raise UserError(f"--batch-size {cfg.batch_size} is global and must divide by the {world_size()} processes")
{% else %}
    device = resolve_device(cfg.device, cfg.gpus)
    seed_everything(cfg.seed, cfg.deterministic)
    cfg = resolve(cfg)
{% endif %}
    torch.autograd.set_detect_anomaly(cfg.detect_anomaly)
    out = Path(cfg.output_dir)
    folder = RunFolder(out, cfg.overwrite, FILES)  # never a folder of other files
{% if cookiecutter.use_checkpointing %}
    found = find_checkpoint(cfg.resume, out)  # checked before anything is written: a refused run changes nothing
    check_continuation(out, found, cfg)
{% else %}
    _refuse_to_replace(out, cfg)
{% endif %}
{% if cookiecutter.use_amp %}
    cfg = dataclasses.replace(cfg, precision=resolve_precision(cfg.precision, device))
{% endif %}
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
{% if cookiecutter.use_distributed %}
    trained = wrap(model, device)  # DDP, after SyncBN and freezing; `model` stays unwrapped for saving
    trained = torch.compile(trained) if cfg.compile else trained
{% else %}
    trained = torch.compile(model) if cfg.compile else model  # `model` stays uncompiled for saving
{% endif %}
    scheduler = build_scheduler(optimizer, cfg)
    for trick in tricks:
        scheduler = trick.start(model, optimizer, scheduler)  # the plain model: identical on every process
    criterion = nn.CrossEntropyLoss(weight=data.class_weights)
    for trick in tricks:
        criterion = trick.criterion(criterion)
    criterion = L1Penalty(criterion, model, cfg.l1) if cfg.l1 else criterion  # nothing at all when 0
{% if cookiecutter.use_amp %}
    scaler = make_scaler(cfg.precision, device)
{% endif %}
{% if cookiecutter.tracker != "none" and cookiecutter.use_distributed %}
    tracker = Tracker(out, cfg, on=cfg.{{ cookiecutter.tracker }} and is_main())
{% elif cookiecutter.tracker != "none" %}
    tracker = Tracker(out, cfg, on=cfg.{{ cookiecutter.tracker }})
{% endif %}
{% if cookiecutter.use_checkpointing %}
    stateful = {"model": model, "optimizer": optimizer, "scheduler": scheduler{{ ', "scaler": scaler' if cookiecutter.use_amp else '' }}}
    stateful["classes"] = ClassNames(data.classes)  # a resume onto data with other classes is refused
{% if cookiecutter.tracker in ("mlflow", "wandb") %}
    stateful["tracker"] = tracker  # its run id: a resumed run logs into the same tracked run
{% endif %}
    for trick in tricks:
        stateful |= trick.state()
    rows, changes = resume(found, stateful, data.train.order, cfg)
    checkpoints = Checkpoints(out, stateful, data.train, rows, cfg, resumed_progress(found, device), changes)
{% else %}
    rows = []
{% endif %}
{% if cookiecutter.use_distributed %}
    if is_main():
        _start_run_dir(folder, cfg, data)
    barrier()
{% else %}
    _start_run_dir(folder, cfg, data)
{% endif %}
    print(f"run folder: {out}")
    if cfg.max_steps_per_epoch and cfg.max_steps_per_epoch < len(data.val):  # per_class.csv's supports: these only
        print(f"validation: the first {cfg.max_steps_per_epoch} of {len(data.val)} batches (--max-steps-per-epoch)")
{% if cookiecutter.use_distributed and cookiecutter.use_checkpointing %}
    note_run_folder(out)  # for --nproc's launcher, to name the checkpoint to continue from if a worker dies
{% endif %}
{% if cookiecutter.tracker != "none" %}
    tracker.start(len(rows) + 1)  # the first epoch this run trains
{% endif %}
{% if cookiecutter.use_distributed %}
    loader = ProfiledLoader(data.train, out / "profile", device) if cfg.profile and is_main() else data.train
{% else %}
    loader = ProfiledLoader(data.train, out / "profile", device) if cfg.profile else data.train
{% endif %}

    def training_pass():
        """The training data once more, in an order no epoch had (epoch 0), for a trick that measures something."""
        start_epoch(data.train, 0)
        return itertools.islice(data.train, cfg.max_steps_per_epoch)

    def validate(net: nn.Module) -> dict:
{% if cookiecutter.use_distributed %}
        broadcast_buffers(net)  # every rank evaluates rank 0's statistics: those of the file it saves
{% endif %}
{% if cookiecutter.use_amp %}
        return evaluate(net, data.val, device, len(data.classes), cfg.max_steps_per_epoch, cfg.precision)
{% else %}
        return evaluate(net, data.val, device, len(data.classes), cfg.max_steps_per_epoch)
{% endif %}

{% if cookiecutter.use_checkpointing %}
    for epoch in checkpoints.epochs(range(len(rows) + 1, cfg.epochs + 1)):
{% else %}
    for epoch in range(len(rows) + 1, cfg.epochs + 1):
{% endif %}
        start = time.perf_counter()
        row = {"epoch": epoch}
{% if cookiecutter.use_checkpointing %}
        progress = checkpoints.start_epoch(epoch)  # a resumed epoch: where it stands
{% else %}
        start_epoch(data.train, epoch)
{% endif %}
        try:
            row |= train_one_epoch(
                trained,
                loader,
                criterion,
                optimizer,
                device,
                cfg,
{% if cookiecutter.use_amp %}
                scaler=scaler,
{% endif %}
{% if cookiecutter.use_checkpointing %}
                tricks=[*tricks, checkpoints],  # mid-epoch checkpoints: the loop calls its after_batch
                progress=progress,
{% else %}
                tricks=tricks,
{% endif %}
            )
        except TrainingDiverged as exc:  # nothing of this epoch is saved: the last checkpoint stays good
            raise TrainingDiverged(f"epoch {epoch}: {exc}") from None
        if cfg.l1:
            row["l1_penalty"] = criterion.epoch_mean()  # its share of train_loss
{% if cookiecutter.use_checkpointing %}
        if checkpoints.stopped:  # by a signal, mid-epoch: saved there
            break
{% endif %}
        val = validate(model)
        row |= {"val_loss": val["val_loss"], "val_acc": val["val_acc"]}
        for trick in tricks:
            row |= trick.after_epoch(epoch, model, validate)  # the epoch's figures, before the schedule steps
        for name, rate in learning_rates(optimizer).items():
            row.setdefault(name, rate)  # a trick that gives groups rates of their own has logged them
        scheduler.step()
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
{% if cookiecutter.use_distributed %}
        if is_main():
            write_csv(out / "metrics.csv", rows)
            write_reports(out, val["confusion"], data.classes)
{% else %}
        write_csv(out / "metrics.csv", rows)
        write_reports(out, val["confusion"], data.classes)
{% endif %}
{% if cookiecutter.tracker != "none" %}
        tracker.log_epoch(row, val["confusion"], data.classes)
{% endif %}
{% if cookiecutter.use_checkpointing %}
        checkpoints.save_epoch()
{% endif %}
        print(_format(row))
        if after_epoch:
            after_epoch(rows)
        if stopped_early(rows, cfg.patience):
            print(f"early stop: val_acc has not improved for {cfg.patience} epochs since epoch {_best(rows)['epoch']}")
            break

{% if cookiecutter.use_checkpointing %}
    checkpoints.exit_if_stopped()
{% endif %}
    tricks_weights = {}
    for trick in tricks:
        tricks_weights |= trick.final_weights(model, training_pass, validate)
    final = tricks_weights | {"model.pt": model}  # model.pt last: it marks the run finished
{% if cookiecutter.use_distributed %}
    if is_main():
        _save_results(out, final, cfg, data.classes)
{% else %}
    _save_results(out, final, cfg, data.classes)
{% endif %}
    best = _best(rows)
{% if cookiecutter.tracker != "none" %}
    tracker.finish(best["val_acc"])
{% endif %}
    weights = out / "model.pt"
    print(_weights_line(out, rows, tricks_weights))
    return {"best_val_acc": best["val_acc"], "weights": weights, "metrics": rows, "config": cfg, "model": model}
