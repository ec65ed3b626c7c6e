"""The registry of tricks: one entry per yes/no prompt of cookiecutter.json, and the only list of what each trick adds
to a render (its files, the words it leaves, its config keys), how a smoke run switches it on, what that run must
show with it on and off, what it needs, and the named breakages (tests/test_mutations.py) that break it.

tests/test_registry.py fails until every yes/no prompt has an entry that agrees with the all-on render.
"""

import contextlib
import dataclasses
import math
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from render import YES_NO, assert_refused, package_of
from runners import Run, epochs_trained

# Per model: a real module to freeze and the head that gets a learning-rate multiplier ({frozen}, {head} in flags).
MODEL_PARTS = {
    "small_cnn": ("features.0", "fc"),
    "resnet18": ("layer1", "fc"),
    "mobilenet_v3_small": ("features.0", "classifier"),
    "efficientnet_b0": ("features.0", "classifier"),
}
CLIP = 0.01  # below every smoke run's gradient norm: each step is visibly clipped to it
SMOOTHING = 0.1
DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclasses.dataclass(frozen=True)
class Trick:
    prompt: str  # its yes/no prompt in cookiecutter.json
    short: str  # its name in test ids, for `pytest -k <short>`
    files: tuple[str, ...]  # files a render has exactly when it is on ({package} is src/<package_name>)
    traces: tuple[str, ...]  # words (lower case) of which some appear in a render exactly when it is on
    config_keys: tuple[str, ...]  # fields of the config, saved in each run's config.yaml, exactly when it is on
    flags: tuple[str, ...]  # train flags that switch it on for real in a smoke run
    breakages: tuple[str, ...]  # names of MUTATIONS entries (tests/test_mutations.py) that break it, its own included
    at_work: Callable[[Run], None]  # what its smoke run must show when it is on
    absent: Callable[[Run], None] | None = None  # what its smoke run must show when it is off
    requires: str | None = None  # a prompt it needs: the pre-generation hook refuses it without
    refusal: str = ""  # the start of the hook's message then
    then: tuple[str, ...] = ()  # a second train command of its smoke run, in the same folder: these flags added
    # its own breakages, which join MUTATIONS: name -> (file, a fragment of its code, the fragment broken, the
    # generated tests that must then fail)
    mutations: dict = dataclasses.field(default_factory=dict)


def _updates(run: Run) -> list[dict]:
    """Every optimizer update the run attempted (smoke_child._watch_updates), taken or skipped by fp16's scaler."""
    return [update for epoch in run.seen["epochs"] for update in epoch]


def _autocast(run: Run) -> None:
    if run.seen is not None:
        assert set(run.seen["logits_dtypes"]) == {DTYPE_NAMES[run.precision]}, "autocast"


def _amp(run: Run) -> None:
    assert run.saved["precision"] == run.precision  # fp16 falls back to bf16 on CPUs
    _autocast(run)


def _distributed(run: Run) -> None:
    if run.one_process_group:
        backend = "gloo" if run.device == "cpu" else "nccl"
        assert f"distributed: world size 1, backend {backend}" in run.log, run.log[-3000:]
    else:  # started as a plain program: no process group
        assert "distributed: world size" not in run.log, run.log[-3000:]


def _sync_bn(run: Run) -> None:
    if run.seen is not None and run.one_process_group and run.device == "cuda":  # converted and trained through
        assert run.seen["sync_bn_layers"] > 0 and "SyncBatchNorm needs" not in run.log, run.log[-3000:]
    else:  # one CPU process or none: BatchNorm as it is, quietly (its statistics are the whole batch's)
        assert "SyncBatchNorm" not in run.log, run.log[-3000:]
        _no_sync_bn(run)


def _no_sync_bn(run: Run) -> None:
    if run.seen is not None:
        assert run.seen["sync_bn_layers"] == 0


def _freezing(run: Run) -> None:
    assert "frozen parameters:" in run.log, run.log[-3000:]
    if run.seen is not None:
        assert run.seen["frozen_unchanged"], "frozen weights changed"


def _no_freezing(run: Run) -> None:
    assert "frozen parameters:" not in run.log


def _layerwise_lr(run: Run) -> None:
    head = MODEL_PARTS[run.model][1]
    assert float(run.rows[0][f"lr[{head}]"]) == pytest.approx(10 * float(run.rows[0]["lr"]))


def _no_layerwise_lr(run: Run) -> None:
    assert not [key for key in run.rows[0] if key.startswith("lr[")], run.rows[0]


def _mixup(run: Run) -> None:
    if run.seen is not None:
        assert run.seen["soft_targets"] == run.seen["losses"], "mixup's soft labels"
        assert run.seen["mixed_inputs"], "the model did not train on the mixed batches"


def _no_mixup(run: Run) -> None:
    if run.seen is not None:
        assert run.seen["soft_targets"] == 0, "soft labels without mixup"


def _smoothed_as_asked(run: Run) -> None:
    """The loss the loop computes is the cross-entropy of its logits, smoothed by SMOOTHING when the trick is on and
    not at all when it is off (smoke_child compares each one with that reference)."""
    if run.seen is not None:
        assert run.seen["smoothed_losses"] == run.seen["losses"], "label smoothing (or its absence)"


def _label_smoothing(run: Run) -> None:
    assert run.saved["label_smoothing"] == SMOOTHING
    _smoothed_as_asked(run)


def _grad_clipping(run: Run) -> None:
    if run.seen is None:  # the norm logged is the one before clipping: every step was clipped
        assert all(float(row["grad_norm"]) > CLIP for row in run.rows), run.rows
        return
    taken = [update for update in _updates(run) if update["taken"]]
    # every step taken got gradients clipped to the limit, measured above it just before
    assert run.seen["step_norms"] == pytest.approx([CLIP] * len(taken), rel=1e-3), "clipping"
    for epoch, row in zip(run.seen["epochs"], run.rows, strict=True):
        norms = [update["norm"] for update in epoch if update["taken"]]
        assert all(norm is not None and norm > CLIP for norm in norms), f"clipping before each step: {epoch}"
        # the epoch's grad_norm: the mean over the steps taken; a skipped step's (inf or NaN) norm is left out
        expected = sum(norms) / len(norms) if norms else 0.0
        assert float(row["grad_norm"]) == pytest.approx(expected, rel=1e-4), ("grad_norm", row, epoch)


def _no_grad_clipping(run: Run) -> None:
    if run.seen is not None:
        assert all(update["norm"] is None for update in _updates(run)), "clipping without the trick"


def _checkpointing(run: Run) -> None:
    # resumed where it should: epoch 1 trained once, then epoch 2 after the checkpoint
    assert run.checkpoint_epochs == [1, 2], run.checkpoint_epochs
    assert "resumed from" in run.log and epochs_trained(run.log) == [1, 2], run.log[-3000:]


def _no_checkpointing(run: Run) -> None:
    assert run.checkpoint_epochs == [], run.checkpoint_epochs  # no last.pt after any command
    assert not (run.folder / "best.pt").exists()


def _tensorboard(run: Run) -> None:
    events = (run.folder / "tensorboard").glob("events.out.tfevents.*")
    assert sum(b"loss/train" in path.read_bytes() for path in events) == run.commands  # scalars of each run


def mlflow_store(folder: Path) -> Path:
    """The --tracking-uri of a smoke run into `folder`."""
    return folder.parent / "mlruns"


def _mlflow(run: Run) -> None:
    """One MLflow run, resumed by a second command, holding every epoch's validation accuracy of metrics.csv."""
    with contextlib.closing(sqlite3.connect(mlflow_store(run.folder) / "mlflow.db")) as db:
        runs = db.execute("SELECT run_uuid, name, status FROM runs").fetchall()
        history = db.execute("SELECT step, value FROM metrics WHERE key = 'accuracy/val' ORDER BY step").fetchall()
    assert [(name, status) for _, name, status in runs] == [(run.folder.name, "FINISHED")], runs
    assert history == [(int(row["epoch"]), pytest.approx(float(row["val_acc"]))) for row in run.rows], history


def _wandb(run: Run) -> None:
    """An offline W&B run per command (offline, a resumed run gets a folder of its own), each with the figures."""
    files = sorted((run.folder / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == run.commands and all(b"accuracy/val" in path.read_bytes() for path in files), files
    assert len({path.name for path in files}) == 1, "a resumed run logs under the same run id"


def _no_tracker_files(run: Run, tracker: str) -> None:
    where = {
        "tensorboard": run.folder / "tensorboard",
        "mlflow": mlflow_store(run.folder),
        "wandb": run.folder / "wandb",
    }
    assert not where[tracker].exists(), where[tracker]


def _ema(run: Run) -> None:
    assert (run.folder / "ema.pt").is_file() and 0 <= float(run.rows[0]["ema_val_acc"]) <= 1
    if run.seen is not None:
        assert run.seen["ema_updated"] and run.seen["ema_averaged"], run.seen
        # updated once after each step taken, never after one fp16's scaler skipped
        updates = _updates(run)
        assert [update["ema_updates"] for update in updates] == [int(update["taken"]) for update in updates], updates


def _no_ema(run: Run) -> None:
    assert not (run.folder / "ema.pt").exists() and "ema_val_acc" not in run.rows[0]


def _swa(run: Run) -> None:
    assert (run.folder / "swa.pt").is_file() and "SWA val_loss" in run.log, run.log[-3000:]


def _no_swa(run: Run) -> None:
    assert not (run.folder / "swa.pt").exists() and "SWA" not in run.log


ENTRIES = [
    Trick(
        prompt="use_amp",
        short="amp",
        files=("{package}/training/amp.py", "{package}/config/precision.py", "tests/test_amp.py"),
        traces=("autocast", "gradscaler", "--precision"),
        config_keys=("precision",),
        flags=(),  # the render's own default precision
        breakages=(
            "autocast switched off",
            "clipping before unscaling under AMP",
            "a step fp16's scaler skipped still moves the EMA and counts in grad_norm",
        ),
        at_work=_amp,
        absent=_autocast,  # fp32 logits
    ),
    Trick(
        prompt="use_distributed",
        short="ddp",
        files=(
            *("{package}/core/distributed.py", "{package}/core/launcher.py", "{package}/config/ddp.py"),
            *("tests/test_distributed.py", "scripts/slurm.sbatch"),
        ),
        traces=("torchrun", "distributeddataparallel", "--nproc"),
        config_keys=("nproc", "dist_timeout"),
        flags=(),  # the in-process smoke runs join a one-process group (smoke_child); a subprocess run starts none
        breakages=(
            "DDP gradients never all-reduced",
            "rendezvous store on every interface",
            "more workers than visible GPUs",
            "every rank draws the same balanced share",
            "DDP validation padded to even out the ranks",
            "DDP validation loss not summed over the ranks",
            "DDP ranks evaluate their own EMA statistics",
            "rank 0's pruning decision kept from the other ranks",
            "the other ranks never told that the search ended",
        ),
        at_work=_distributed,
    ),
    Trick(
        prompt="use_sync_bn",
        short="syncbn",
        files=("{package}/tricks/sync_bn.py", "tests/test_sync_bn.py"),
        traces=("syncbatchnorm", "sync_bn", "sync-bn"),
        config_keys=("sync_bn",),
        flags=("--sync-bn",),
        breakages=("SyncBatchNorm never converted",),
        at_work=_sync_bn,
        absent=_no_sync_bn,
        requires="use_distributed",
        refusal="use_sync_bn synchronises BatchNorm across the processes of a multi-GPU job, so it needs "
        "use_distributed",
    ),
    Trick(
        prompt="use_freezing",
        short="freeze",
        files=("{package}/tricks/freezing.py", "tests/test_freezing.py"),
        traces=("freeze", "frozen"),
        config_keys=("freeze",),
        flags=("--freeze", "{frozen}"),
        breakages=(
            "frozen parameters keep training",
            "frozen BatchNorm statistics keep updating",
            "every parameter frozen",
        ),
        at_work=_freezing,
        absent=_no_freezing,
    ),
    Trick(
        prompt="use_layerwise_lr",
        short="lrmult",
        files=("{package}/tricks/layerwise_lr.py", "tests/test_layerwise_lr.py"),
        traces=("lr_mult", "lr-mult", "layer-wise"),
        config_keys=("lr_mult",),
        flags=("--lr-mult", "{head}=10"),
        breakages=(
            "layer-wise LR multiplier ignored",
            "an --lr-mult that sets no rate accepted",
            "--lr-mult given twice keeps the last",
        ),
        at_work=_layerwise_lr,
        absent=_no_layerwise_lr,
    ),
    Trick(
        prompt="use_mixup",
        short="mix",
        files=("{package}/tricks/mixup.py", "tests/test_mixup.py"),
        traces=("mixup", "cutmix"),
        config_keys=("mixup_alpha", "cutmix_alpha", "cutmix_prob"),
        flags=("--mixup-alpha", "0.4", "--cutmix-alpha", "1.0"),
        breakages=("mixup never applied", "train accuracy under mixup not against each image's larger share"),
        at_work=_mixup,
        absent=_no_mixup,
    ),
    Trick(
        prompt="use_label_smoothing",
        short="smooth",
        files=("{package}/tricks/label_smoothing.py", "tests/test_label_smoothing.py"),
        traces=("label_smoothing", "label-smoothing", "label smoothing"),
        config_keys=("label_smoothing",),
        flags=("--label-smoothing", str(SMOOTHING)),
        breakages=("label smoothing dropped",),
        at_work=_label_smoothing,
        absent=_smoothed_as_asked,  # plain cross-entropy
    ),
    Trick(
        prompt="use_grad_clipping",
        short="clip",
        files=("{package}/tricks/grad_clipping.py", "tests/test_grad_clipping.py"),
        traces=("clip_grad", "clip-grad", "grad_norm"),
        config_keys=("clip_grad_norm", "clip_grad_norm_type"),
        flags=("--clip-grad-norm", str(CLIP)),
        breakages=(
            "clipping measures but does not clip",
            "clipping before unscaling under AMP",
            "grad_norm summed over the optimizer steps, not averaged",
            "a step fp16's scaler skipped still moves the EMA and counts in grad_norm",
            "accumulation clips each batch's partial gradient, not the group's mean",
            "a negative clipping norm type accepted",
        ),
        at_work=_grad_clipping,
        absent=_no_grad_clipping,
    ),
    Trick(
        prompt="use_checkpointing",
        short="ckpt",
        files=(
            *("{package}/training/checkpoint.py", "{package}/training/checkpoint_file.py", "tests/test_checkpoint.py"),
            *("{package}/training/continuation.py", "{package}/training/stop_signals.py"),
            "{package}/config/checkpointing.py",
        ),
        traces=("last.pt", "best.pt", "resume"),
        config_keys=("checkpoint_every",),  # --resume is a flag of one command: config.yaml never keeps it
        flags=(),
        breakages=(
            "resume finds no checkpoint",
            "resume loads nothing",
            "resume keeps the fresh random streams",
            "a finished run taken over",
            "every visible GPU's random state",
            "best.pt chosen by validation loss",
            "garbled random streams a traceback",
            "a hand-made checkpoint's missing keys a traceback",
            "--resume PATH ignores its run's config",
            "--resume auto ignores its run's config",
            "a resume into a new folder holds out anew",
            "the stop notice glued to the echoed ^C",
            "a cut-short last.pt stops --resume auto",
            "the sampler position not restored",
            "the partial epoch dropped on a signal",
            "a resumed epoch's sums restarted",
            "a checkpoint inside an accumulation group",
            "--checkpoint-every minutes read as seconds",
            "the restart count ignored",
            "the requeue missing",
            "workers stopped by a signal reported as failed",
            "a mid-epoch checkpoint resumed onto another epoch",
            "model.pt written before the plots",
            "a run cut back to fewer epochs than its checkpoint holds",
            "an early-stopped run cut short trains on when resumed",
            "a finished early-stopped run trains on when resumed",
            "a live run's folder refused for the checkpoints it is writing",
            "a checkpoint's epoch taken on trust",
            "an unfinished run's missing model.pt not explained",
            "a resume changes what the run learns without a word",
            "a resume's changes not kept in the run folder",
            "the changes of earlier resumes dropped",
            "a resume onto another split",
            "a stop signal as a run starts goes unheeded",
        ),
        at_work=_checkpointing,
        absent=_no_checkpointing,
        then=("--resume", "auto", "--epochs", "2"),
    ),
    Trick(
        prompt="use_ema",
        short="ema",
        files=("{package}/tricks/ema.py", "tests/test_ema.py"),
        traces=("ema_decay", "ema-decay", "ema.pt"),
        config_keys=("ema_decay",),
        flags=("--ema-decay", "0.9"),
        breakages=(
            "EMA never updated",
            "EMA warm-up dropped",
            "the EMA counter read on the host",
            "the EMA figures measured on the trained model",
            "the EMA decay fixed whatever --ema-decay",
            "a step fp16's scaler skipped still moves the EMA and counts in grad_norm",
        ),
        at_work=_ema,
        absent=_no_ema,
    ),
    Trick(
        prompt="use_swa",
        short="swa",
        files=("{package}/tricks/swa.py", "tests/test_swa.py"),
        traces=("swa_start", "swa-start", "swa.pt"),
        config_keys=("swa_start", "swa_lr", "swa_anneal_epochs"),
        flags=("--swa-start", "1"),
        breakages=(
            "SWA never averages",
            "SWA BatchNorm statistics left as they were",
            "SWA learning rate never annealed",
            "SWA average left out of checkpoints",
        ),
        at_work=_swa,
        absent=_no_swa,
        mutations={
            "SWA never averages": (
                "swa.py",
                "self.average.update_parameters(model)",
                "pass",
                "tests/test_swa.py::test_swa_pt_is_torchs_average_of_the_epochs_weights_with_batchnorm_recomputed",
            ),
            "SWA BatchNorm statistics left as they were": (
                "swa.py",
                "update_bn(training_pass(), self.average, device=next(self.average.parameters()).device)",
                "pass",
                "tests/test_swa.py::test_swa_pt_is_torchs_average_of_the_epochs_weights_with_batchnorm_recomputed",
            ),
            "SWA learning rate never annealed": (
                "swa.py",
                "return (1 - alpha) * factor(start - 1) + alpha * share",
                "return factor(epoch)",
                "tests/test_swa.py::test_the_learning_rates_are_those_of_torchs_swalr_taking_over_the_schedule",
            ),
            "SWA average left out of checkpoints": (
                "swa.py",
                'return {"swa": self.average}',
                "return {}",
                "tests/test_swa.py::test_a_resumed_run_saves_the_same_average",
            ),
        },
    ),
]
# The tracker prompt (a choice): an entry per tracker, whose `prompt` is "tracker=<value>". The files every tracker
# has (TRACKING_FILES) exist exactly when one is chosen.
TRACKING_FILES = (
    "{package}/reports/tracking.py",
    "{package}/config/tracker.py",
    "{package}/training/tracked.py",
    "tests/test_tracking.py",
)
TRACKERS = [
    Trick(
        prompt="tracker=tensorboard",
        short="tb",
        files=(),
        traces=("tensorboard", "summarywriter"),
        config_keys=("tensorboard",),
        flags=(),  # on by default when the prompt put it in
        breakages=("a full disk under TensorBoard is a thread's traceback", "TensorBoard keeps a killed run's epochs"),
        at_work=_tensorboard,
        absent=lambda run: _no_tracker_files(run, "tensorboard"),
    ),
    Trick(
        prompt="tracker=mlflow",
        short="mlflow",
        files=(),
        traces=("mlflow",),
        config_keys=("mlflow", "tracking_uri"),
        flags=(),  # on by default; the smoke run's --tracking-uri is set by the test (mlflow_store)
        breakages=(
            "the tracked run's id not kept in the checkpoint",
            "a tracker's exception stops the training run",
            "the parameters not logged",
            "one epoch's figures not logged",
        ),
        at_work=_mlflow,
        absent=lambda run: _no_tracker_files(run, "mlflow"),
    ),
    Trick(
        prompt="tracker=wandb",
        short="wandb",
        files=(),
        traces=("wandb", "weights & biases"),
        config_keys=("wandb",),
        flags=(),
        breakages=("W&B resumed under a new run id", "the run folder's reports not in the W&B artifact"),
        at_work=_wandb,
        absent=lambda run: _no_tracker_files(run, "wandb"),
    ),
]


def _multi_label(run: Run) -> None:
    """Every multi-label figure logged each epoch, the labels' figures per class (AP first), no confusion matrix."""
    figures = ("val_map", "val_f1_micro", "val_f1_macro", "val_f1_samples", "val_hamming_loss", "val_acc")
    assert all(0 <= float(row[key]) <= 1 for row in run.rows for key in figures), run.rows
    header = (run.folder / "per_class.csv").read_text().splitlines()[0]
    assert header == "class,ap,precision,recall,f1,threshold,support", header
    assert not (run.folder / "confusion_matrix.csv").exists()
    assert f"best val_map {float(max(run.rows, key=lambda row: float(row['val_map']))['val_map']):.4f}" in run.log


def _single_label(run: Run) -> None:
    assert "val_map" not in run.rows[0] and (run.folder / "confusion_matrix.csv").is_file(), run.rows[0]
    assert "best val_acc" in run.log, run.log[-3000:]


# The task prompt (a choice): single-label is the default render; multi-label adds these files, words and keys.
MULTI_LABEL = Trick(
    prompt="task=multi_label",
    short="multi-label",
    files=(
        "{package}/config/multi_label.py",
        "{package}/data/multi_label.py",
        "{package}/reports/multi_label.py",
        "{package}/serving/thresholds.py",
        "tests/test_multi_label.py",
        "tests/test_multi_label_data.py",
        "tests/test_multi_label_metrics.py",
    ),
    traces=("multi-label", "multi_label", "bcewithlogitsloss"),
    config_keys=("threshold", "pos_weight"),
    flags=(),
    breakages=(
        "the positives' weights left out of the multi-label loss",
        "AP without its ties grouped",
        "validation figures at 0.5 whatever --threshold",
        "predict ignores the fitted thresholds",
        "export drops the fitted thresholds",
        "the hold-out leaves a class out of validation",
        "multi-label smoothing dropped",
        "validation figures of one process's images under DDP",
        "each class's precision-recall points with recall for precision",
    ),
    at_work=_multi_label,
    absent=_single_label,
)
SINGLE_LABEL_FILES = ("tests/test_metrics.py", "tests/test_datasets.py")  # what a multi-label render has not
REGISTRY = {trick.prompt: trick for trick in ENTRIES}
# The tricks the suite varies, in a fixed order (test ids depend on it): those with an entry and a prompt. One without
# the other fails tests/test_registry.py rather than the suite's collection.
TRICKS = sorted(prompt for prompt in REGISTRY if prompt in YES_NO)


def smoke_flags(tricks, model: str) -> list[str]:
    """Train flags that switch every chosen trick on for real."""
    frozen, head = MODEL_PARTS[model]
    return [flag.format(frozen=frozen, head=head) for trick in tricks for flag in REGISTRY[trick].flags]


def smoke_commands(train: list[str], tricks) -> list[list[str]]:
    """A smoke run's train commands: `train`, then each second command a chosen trick adds (a resume)."""
    return [train, *([*train, *REGISTRY[trick].then] for trick in tricks if REGISTRY[trick].then)]


def with_requirements(tricks_on) -> list[str]:
    """The tricks plus those they need (SyncBN needs distributed training)."""
    return sorted({*tricks_on, *(REGISTRY[t].requires for t in tricks_on if REGISTRY[t].requires)})


def answers_for(tricks_on, tracker: str | None = None) -> dict:
    """Yes/no answers with these tricks on (and those they need), and the tracker where one is given."""
    answers = {trick: trick in with_requirements(tricks_on) for trick in TRICKS}
    return answers | {"tracker": tracker} if tracker else answers


def features_on(answers: dict) -> set[str]:
    """The yes/no prompts on, and "tracker=<value>" for the tracker chosen: the checks' `tricks_on` below."""
    chosen = {f"tracker={answers.get('tracker', 'none')}", f"task={answers.get('task', 'single_label')}"}
    return {trick for trick in TRICKS if answers.get(trick)} | chosen


# the named renders: all-on logs to MLflow (the tracker with the most code: its run id rides in the checkpoints)
NAMED = {"defaults": {}, "all-on": answers_for(TRICKS, "mlflow"), "all-off": answers_for([], "none")}
NAMED["multi-label"] = NAMED["all-on"] | {"task": "multi_label"}  # every trick on, as all-on, for the other task


def unmet(answers: dict) -> list[Trick]:
    """The tricks these answers switch on without the prompt each needs: the hook refuses them."""
    entries = [REGISTRY[trick] for trick in TRICKS if answers.get(trick)]
    return [trick for trick in entries if trick.requires and not answers[trick.requires]]


def assert_refused_for_what_it_needs(tmp_path: Path, capfd, answers: dict) -> None:
    """A render switching a trick on without the prompt it needs stops with that trick's one `ERROR:` line and
    leaves nothing."""
    expected = [f"ERROR: {trick.refusal}" for trick in unmet(answers)]
    assert expected, f"nothing for the hook to refuse in {answers}"
    error = assert_refused(tmp_path, capfd, "extra", **answers)
    assert any(error.startswith(message) for message in expected), (error, expected)


def assert_files_exactly_for(project: Path, tricks_on) -> None:
    """Each trick's files exist exactly when it is on."""
    package = Path("src", package_of(project))
    for trick in ENTRIES:
        for path in trick.files:
            assert (project / path.format(package=package)).is_file() == (trick.prompt in tricks_on), path
    tracked = any(name.startswith("tracker=") and name != "tracker=none" for name in tricks_on)
    for path in TRACKING_FILES:
        assert (project / path.format(package=package)).is_file() == tracked, path
    for path in MULTI_LABEL.files:
        assert (project / path.format(package=package)).is_file() == (MULTI_LABEL.prompt in tricks_on), path
    for path in SINGLE_LABEL_FILES:
        assert (project / path).is_file() == (MULTI_LABEL.prompt not in tricks_on), path


def assert_traces_exactly_for(text: str, tricks_on, where: str = "the render") -> None:
    """Some of each trick's words appear in `text` (any case) exactly when it is on."""
    text = text.lower()
    for trick in [*ENTRIES, *TRACKERS, MULTI_LABEL]:
        found = [word for word in trick.traces if word in text]
        if trick.prompt in tricks_on:
            assert found, f"{trick.prompt} is on but none of {trick.traces} appear in {where}"
        else:
            assert not found, f"{trick.prompt} is off but {found} appear in {where}"


def check_run(run: Run, tricks_on) -> None:
    """A smoke run trained to finite losses, saved the config keys of exactly the tricks on, and shows each trick on
    at work and each one off absent."""
    assert run.rows, "metrics.csv has no row"
    assert all(math.isfinite(float(row[key])) for row in run.rows for key in ("train_loss", "val_loss")), run.rows
    for trick in [*ENTRIES, *TRACKERS, MULTI_LABEL]:
        on = trick.prompt in tricks_on
        assert all((key in run.saved) == on for key in trick.config_keys), trick.prompt
        check = trick.at_work if on else trick.absent
        if check is not None:
            check(run)
