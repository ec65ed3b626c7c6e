{% if cookiecutter.use_checkpointing %}
import contextlib
import csv
import itertools
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml
from conftest import CRITERION, NEUTRAL
from filelock import FileLock

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.config import SCRIPT, TrainConfig, make_config
from {{ cookiecutter.package_name }}.core import files
from {{ cookiecutter.package_name }}.core.errors import ModelError, OutputError, UserError
from {{ cookiecutter.package_name }}.models import read_weights
from {{ cookiecutter.package_name }}.reports.metrics import MONITOR
from {{ cookiecutter.package_name }}.training import checkpoint, checkpoint_file, continuation, stop_signals
from {{ cookiecutter.package_name }}.training import train as train_module


def metrics_without_time(run: Path) -> list[dict]:
    with open(run / "metrics.csv") as file:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(file)]


def epochs_trained(output: str) -> list[int]:
    """The epochs a run printed a result line for: a resumed run must start after its checkpoint's epoch."""
    return [int(line.split()[1]) for line in output.splitlines() if line.startswith("epoch ")]


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), key
        elif isinstance(a[key], dict):
            assert_same_state(a[key], b[key])
        else:
            assert a[key] == b[key], key


@pytest.mark.parametrize(
    ("layout", "workers"),
    [("synthetic", 0), pytest.param("synthetic", 2, marks=pytest.mark.slow), ("held out, balanced", 0)],
)
def test_resumed_run_equals_an_uninterrupted_one_bitwise(
    tiny_config, tmp_path, monkeypatch, image_folder, layout, workers
):
    cfg = replace(tiny_config, epochs=3, max_steps_per_epoch=3, deterministic=True, num_workers=workers)
    photos = image_folder / "train"  # class folders, held out by the run: 6 cats and (below) 2 dogs
    if layout != "synthetic":
        for image in sorted((photos / "dogs").iterdir())[2:]:
            image.unlink()
        weighted = {"{{ 'pos_weight' if cookiecutter.task == 'multi_label' else 'class_weights' }}": "auto"}
        cfg = replace(cfg, data=str(photos), image_size=16, batch_size=2, sampler="balanced", **weighted)
        cfg = replace(cfg, model="small_cnn")  # batches of 2 are too small for the BatchNorm of larger models
    train_module.train(replace(cfg, output_dir=str(tmp_path / "straight")))

    interrupted = tmp_path / "interrupted"
    original, calls = train_module.train_one_epoch, []

    def killed_in_epoch_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(train_module, "train_one_epoch", killed_in_epoch_3)
    with pytest.raises(KeyboardInterrupt):
        train_module.train(replace(cfg, output_dir=str(interrupted)))
    assert torch.load(interrupted / "last.pt", weights_only=True)["epoch"] == 2
    if layout != "synthetic":  # new photos: only the run's own split.csv keeps its training and validation images
        for i in range(4):
            shutil.copy(photos / "cats" / "0.png", photos / "cats" / f"new{i}.png")

    # A new process, as after a crash: the saved config plus --resume auto.
    env = {**os.environ, "PYTHONPATH": str(Path(train_module.__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "train"]
    command += ["--config", str(interrupted / "config.yaml"), "--resume", "auto"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # Resumed where it should: a restart from scratch would reproduce the deterministic run bit for bit too.
    assert f"resumed from {interrupted / 'last.pt'} after epoch 2" in done.stdout
    assert epochs_trained(done.stdout) == [3]

    straight = tmp_path / "straight"
    assert_same_state(torch.load(straight / "model.pt"), torch.load(interrupted / "model.pt"))
    last = [torch.load(run / "last.pt", weights_only=True) for run in (straight, interrupted)]
    assert_same_state(last[0]["optimizer"], last[1]["optimizer"])
{% if cookiecutter.use_ema %}
    assert_same_state(last[0]["ema"], last[1]["ema"])
{% endif %}
    assert metrics_without_time(straight) == metrics_without_time(interrupted)


# Every trick of the render that draws random numbers or spans batches, at work in the runs stopped mid-epoch below.
MID_EPOCH = {
    "epochs": 2,
    "max_steps_per_epoch": 5,
    "batch_size": 8,
    "deterministic": True,
    "augment": "randaugment",
    "random_erasing": 0.5,
    "sampler": "balanced",
{% if cookiecutter.use_mixup %}
    "cutmix_alpha": 1.0,
{% endif %}
}


def batches_trained(monkeypatch, stop_after: int | None = None) -> list[int]:
    """The steps (within their epoch) of each batch train() trains from here on; with `stop_after`, a stop asked for
    after that many batches, as SIGTERM asks for it."""
    steps, after_batch = [], checkpoint.Checkpoints.after_batch

    def counted(self, progress, update):
        steps.append(progress.step)
        if len(steps) == stop_after:
            self.stop._request(signal.SIGTERM, None)
        return after_batch(self, progress, update)

    monkeypatch.setattr(checkpoint.Checkpoints, "after_batch", counted)
    return steps


@pytest.mark.parametrize(
    ("accumulate", "stop_after", "saved_at"),
    [(1, 6, 1), (1, 8, 3), (1, 10, 5), (3, 7, 3)],
    ids=["step 1 of epoch 2", "mid-epoch", "last step", "inside an accumulation group: after it"],
)
def test_a_run_stopped_at_any_step_resumes_to_the_weights_of_the_uninterrupted_run(
    tiny_config, tmp_path, monkeypatch, capsys, accumulate, stop_after, saved_at
):
    cfg = replace(tiny_config, accumulate_steps=accumulate, **MID_EPOCH)
    straight, run = tmp_path / "straight", tmp_path / "stopped"
    train_module.train(replace(cfg, output_dir=str(straight)))
    steps = batches_trained(monkeypatch, stop_after)
    with pytest.raises(SystemExit) as stopped:
        train_module.train(replace(cfg, output_dir=str(run)))
    assert stopped.value.code == 128 + signal.SIGTERM
    assert f"{run / 'last.pt'} holds step {saved_at} of epoch 2; continue with" in capsys.readouterr().err
    state = torch.load(run / "last.pt", weights_only=True)
    assert state["epoch"] == 1 and state["progress"][0]["step"] == saved_at and not (run / "model.pt").exists()

    steps.clear()
    # A new worker count too: the augmentations do not depend on it.
    train_module.train(replace(cfg, output_dir=str(run), resume="auto", num_workers=2))
    assert f"resumed from {run / 'last.pt'} at step {saved_at} of epoch 2" in capsys.readouterr().out
    assert steps == list(range(saved_at + 1, 6))  # the steps after the checkpoint, each once
    assert_same_state(torch.load(straight / "model.pt"), torch.load(run / "model.pt"))
{% if cookiecutter.use_ema %}
    assert_same_state(torch.load(straight / "ema.pt"), torch.load(run / "ema.pt"))
{% endif %}
    assert metrics_without_time(straight) == metrics_without_time(run)  # the resumed epoch reports the whole epoch


@pytest.mark.parametrize("data", ["synthetic", "photos"])
def test_the_number_of_data_loading_workers_never_changes_the_weights(tiny_config, tmp_path, image_folder, data):
    cfg = replace(tiny_config, **(MID_EPOCH | {"max_steps_per_epoch": 2}))
    if data == "photos":  # 12 images: workers read ahead to the end of the epoch, where RandomSampler draws again
        cfg = replace(cfg, data=str(image_folder), image_size=16, batch_size=2, sampler="random", model="small_cnn")
    runs = [train_module.train(replace(cfg, num_workers=n, output_dir=str(tmp_path / str(n)))) for n in (0, 1, 3)]
    for run in runs[1:]:
        assert_same_state(runs[0]["model"].state_dict(), run["model"].state_dict())
        assert run["metrics"][-1]["train_loss"] == runs[0]["metrics"][-1]["train_loss"]


def saves(monkeypatch) -> list:
    """The checkpoints train() writes from here on: the step of each mid-epoch one, "epoch" for one after an epoch."""
    written, save = [], checkpoint_file.save_checkpoints

    def recorded(out, stateful, loader, metrics, cfg, progress=None, changes=()):
        written.append(progress.step if progress else "epoch")
        save(out, stateful, loader, metrics, cfg, progress, changes)

    monkeypatch.setattr(checkpoint, "save_checkpoints", recorded)
    return written


def test_checkpoint_every_n_steps_saves_mid_epoch_after_each_nth_optimizer_step(tiny_config, monkeypatch):
    written = saves(monkeypatch)
    train_module.train(replace(tiny_config, epochs=2, max_steps_per_epoch=5, checkpoint_every="2"))
    assert written == [2, 4, "epoch", 2, 4, "epoch"]
    written.clear()
    cfg = replace(tiny_config, max_steps_per_epoch=5, checkpoint_every="1", accumulate_steps=2, overwrite=True)
    train_module.train(cfg)
    assert written == [2, 4, 5, "epoch"]  # after each optimizer step: the groups end at batches 2, 4 and 5


def test_checkpoint_every_minutes_saves_when_the_time_has_come(tiny_config, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(stop_signals.time, "monotonic", lambda: now[0])
    steps, written = batches_trained(monkeypatch), saves(monkeypatch)
    monkeypatch.setattr(checkpoint.Checkpoints, "after_batch", _ticking(checkpoint.Checkpoints.after_batch, now))
    train_module.train(replace(tiny_config, max_steps_per_epoch=5, checkpoint_every="10min"))
    assert steps == [1, 2, 3, 4, 5] and written == [2, 4, "epoch"]


def _ticking(after_batch, now: list[float], seconds: float = 300):
    """after_batch on a clock that runs `seconds` (five minutes) per batch."""

    def ticked(self, progress, update):
        now[0] += seconds
        return after_batch(self, progress, update)

    return ticked


@pytest.mark.parametrize(("every", "saved"), [("3", [6]), ("1min", [4, 8])], ids=["steps", "minutes"])
def test_checkpoints_due_inside_an_accumulation_group_wait_for_its_step_and_resume_exactly(
    tiny_config, tmp_path, monkeypatch, every, saved
):
    """--accumulate-steps 2 over 9 batches: the optimizer steps after batches 2, 4, 6, 8 and 9. Every 3 steps: after
    the third, batch 6. Every minute, on a clock of 25 s a batch: the minute is up after batches 3 and 7, each inside
    a group, whose step the checkpoint waits for (batches 4 and 8)."""
    cfg = replace(tiny_config, accumulate_steps=2, **(MID_EPOCH | {"max_steps_per_epoch": 9}))
    straight = tmp_path / "straight"
    train_module.train(replace(cfg, output_dir=str(straight)))  # without mid-epoch checkpoints
    now = [0.0]
    monkeypatch.setattr(stop_signals.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(checkpoint.Checkpoints, "after_batch", _ticking(checkpoint.Checkpoints.after_batch, now, 25))
    written, run = saves(monkeypatch), replace(cfg, checkpoint_every=every, output_dir=str(tmp_path / "run"))
    _train_interrupted_in_epoch(run, 2, monkeypatch)  # killed as epoch 2 ends: its last mid-epoch checkpoint stays
    assert written == [*saved, "epoch", *saved]
    state = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    assert state["epoch"] == 1 and state["progress"][0]["step"] == saved[-1]
    train_module.train(replace(run, resume="auto"))
    assert_same_state(torch.load(straight / "model.pt"), torch.load(tmp_path / "run" / "model.pt"))
    assert metrics_without_time(straight) == metrics_without_time(tmp_path / "run")


def test_a_whole_epoch_stopped_midway_resumes_to_the_weights_of_the_uninterrupted_run(
    tiny_config, tmp_path, monkeypatch, capsys, image_folder
):
    """No --max-steps-per-epoch: an epoch is every batch of the data, here 6 of 11 images, the last one short."""
    (image_folder / "train" / "dogs" / "5.png").unlink()
    cfg = replace(tiny_config, **(MID_EPOCH | {"max_steps_per_epoch": None, "sampler": "random"}))
    cfg = replace(cfg, data=str(image_folder), image_size=16, batch_size=2, model="small_cnn")
    straight, run = tmp_path / "straight", tmp_path / "stopped"
    train_module.train(replace(cfg, output_dir=str(straight)))
    steps = batches_trained(monkeypatch, stop_after=6 + 3)
    with pytest.raises(SystemExit):
        train_module.train(replace(cfg, output_dir=str(run)))
    state = torch.load(run / "last.pt", weights_only=True)
    assert state["epoch"] == 1 and state["progress"][0]["step"] == 3
    steps.clear()
    train_module.train(replace(cfg, output_dir=str(run), resume="auto", num_workers=1))  # workers read to its end
    assert f"resumed from {run / 'last.pt'} at step 3 of epoch 2" in capsys.readouterr().out
    assert steps == [4, 5, 6]  # the rest of the epoch, each batch once
    assert_same_state(torch.load(straight / "model.pt"), torch.load(run / "model.pt"))
    assert metrics_without_time(straight) == metrics_without_time(run)


def test_a_mid_epoch_checkpoint_resumes_only_onto_the_same_epoch_and_in_one_line(tiny_config, tmp_path, capsys):
    """Another sampler, accumulation or epoch length would make the saved step another place in another epoch."""
    cfg = replace(tiny_config, epochs=2, max_steps_per_epoch=4, checkpoint_every="3")
    with pytest.raises(KeyboardInterrupt), pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint.Checkpoints, "end_epoch", _interrupted)
        train_module.train(cfg)
    run = Path(cfg.output_dir)
    state = torch.load(run / "last.pt", weights_only=True)
    assert state["progress"][0]["step"] == 3
    config = (run / "config.yaml").read_text()
    for changed in ({"sampler": "balanced"}, {"accumulate_steps": 2}, {"max_steps_per_epoch": 2}):
        with pytest.raises(ModelError, match=f"differs in: {next(iter(changed))}"):
            train_module.train(replace(cfg, resume="auto", **changed))
        assert (run / "config.yaml").read_text() == config  # refused before anything was written
    capsys.readouterr()
    for garbled in (5, None, [], ["x"], [state["progress"][0] | {"step": "7"}], [state["progress"][0] | {"step": 0}]):
        torch.save(state | {"progress": garbled}, run / "last.pt")
        with pytest.raises(ModelError, match="has no usable progress; resume from the last.pt or best.pt of a run"):
            train_module.train(replace(cfg, resume="auto"))
        assert "resumed from" not in capsys.readouterr().out
    torch.save(state | {"progress": [state["progress"][0] | {"step": 9}]}, run / "last.pt")
    with pytest.raises(ModelError, match="^the checkpoint stopped at step 9 of an epoch of 4 steps"):
        train_module.train(replace(cfg, resume="auto"))
    torch.save(state | {"progress": state["progress"] * 2}, run / "last.pt")
    with pytest.raises(ModelError, match="was saved mid-epoch by 2 processes: resume it with 2 processes$"):
        train_module.train(replace(cfg, resume="auto"))


def _interrupted(self, rows, val) -> None:
    raise KeyboardInterrupt  # where the first epoch would be saved: the mid-epoch checkpoint of step 3 stays


def _train_interrupted_in_epoch(cfg, epoch: int, monkeypatch) -> None:
    """Train until `epoch` would be saved: the mid-epoch checkpoint that --checkpoint-every wrote in it stays."""
    end_epoch = checkpoint.Checkpoints.end_epoch

    def interrupted(self, rows, val) -> None:
        return _interrupted(self, rows, val) if len(rows) >= epoch else end_epoch(self, rows, val)

    with monkeypatch.context() as patched:
        patched.setattr(checkpoint.Checkpoints, "end_epoch", interrupted)
        with pytest.raises(KeyboardInterrupt):
            train_module.train(cfg)


def test_a_run_is_never_cut_back_to_fewer_epochs_than_its_checkpoint_holds(tiny_config, fingerprint, monkeypatch):
    cfg = replace(tiny_config, epochs=2, max_steps_per_epoch=4, checkpoint_every="3")
    _train_interrupted_in_epoch(cfg, 2, monkeypatch)
    run, cut_back = Path(cfg.output_dir), replace(cfg, resume="auto", epochs=1)
    before = fingerprint(run)
    with pytest.raises(OutputError, match=r"last.pt is partway through epoch 2; pass --epochs 2 or more to continue"):
        train_module.train(cut_back)  # its model.pt would hold half of epoch 2 as the weights of a 1-epoch run
    with pytest.raises(OutputError, match=r"best.pt is epoch 1 but .* went on to epoch 2; continue from .*last.pt"):
        train_module.train(replace(cfg, resume=str(run / "best.pt")))  # the steps of epoch 2 done would be lost
    train_module.train(replace(cfg, resume="auto"))
    (run / "model.pt").unlink()  # as if killed after its last epoch
    before = fingerprint(run)
    with pytest.raises(OutputError, match=r"last.pt is the end of epoch 2; pass --epochs 2 or more to continue it$"):
        train_module.train(cut_back)
    assert fingerprint(run) == before


def test_an_early_stopped_run_is_finished_and_one_cut_short_after_it_only_writes_its_files(
    tiny_config, monkeypatch, capsys
):
    evaluate = train_module.evaluate
    monkeypatch.setattr(train_module, "evaluate", lambda *args, **kwargs: evaluate(*args, **kwargs) | {MONITOR: 0.5})
    cfg = replace(tiny_config, epochs=6, patience=2)  # no better epoch than the first: it stops after epoch 3
    assert [row["epoch"] for row in train_module.train(cfg)["metrics"]] == [1, 2, 3]
    with pytest.raises(OutputError, match=r"stopped early after epoch 3 \(--patience 2\); pass a larger --patience"):
        train_module.train(replace(cfg, resume="auto"))  # it would stop again after one more epoch, every time
    elsewhere = Path(cfg.output_dir).parent / "elsewhere"
    into_elsewhere = replace(cfg, resume=str(Path(cfg.output_dir) / "last.pt"), output_dir=str(elsewhere))
    with pytest.raises(OutputError, match=r"last.pt stopped early after epoch 3 \(--patience 2\); pass a larger"):
        train_module.train(into_elsewhere)
    assert not elsewhere.exists()
    (Path(cfg.output_dir) / "model.pt").unlink()  # as if killed after its last epoch
    capsys.readouterr()
    assert [row["epoch"] for row in train_module.train(replace(cfg, resume="auto"))["metrics"]] == [1, 2, 3]
    out = capsys.readouterr().out
    assert "after epoch 3" in out and epochs_trained(out) == [] and (Path(cfg.output_dir) / "model.pt").is_file()
    train_module.train(replace(cfg, resume="auto", patience=3))  # a larger patience continues it
    assert epochs_trained(capsys.readouterr().out) == [4]


def test_a_mid_epoch_checkpoint_finishes_its_epoch_before_a_smaller_patience_stops_the_run(
    tiny_config, monkeypatch, capsys
):
    evaluate = train_module.evaluate
    monkeypatch.setattr(train_module, "evaluate", lambda *args, **kwargs: evaluate(*args, **kwargs) | {MONITOR: 0.5})
    cfg = replace(tiny_config, epochs=4, max_steps_per_epoch=4, checkpoint_every="3")
    _train_interrupted_in_epoch(cfg, 3, monkeypatch)
    capsys.readouterr()
    rows = train_module.train(replace(cfg, resume="auto", patience=1))["metrics"]  # epochs 1-2 stopped early by it
    assert [row["epoch"] for row in rows] == [1, 2, 3] and epochs_trained(capsys.readouterr().out) == [3]


def test_overwrite_never_resumes_a_checkpoint_with_no_epoch_left_to_train(tiny_config, fingerprint):
    train_module.train(tiny_config)
    run = Path(tiny_config.output_dir)
    before = fingerprint(run)
    for resume in ("auto", str(run / "last.pt")):  # the folder cleared, it would end with a model.pt alone
        with pytest.raises(OutputError, match=r"last.pt is the end of epoch 1; pass --epochs 2 or more to continue"):
            train_module.train(replace(tiny_config, resume=resume, overwrite=True))
    assert fingerprint(run) == before
    rows = train_module.train(replace(tiny_config, resume="auto", overwrite=True, epochs=2))["metrics"]
    assert [row["epoch"] for row in rows] == [1, 2] and (run / "model.pt").is_file()


def test_config_yaml_may_give_checkpoint_every_as_a_number(tmp_path):
    saved = tmp_path / "config.yaml"
    saved.write_text("checkpoint_every: 500\n")
    assert make_config({}, str(saved)).checkpoint_every == "500"


def test_a_checkpoint_every_that_is_no_count_of_steps_or_minutes_is_refused():
    for bad in ("0", "-5", "10s", "ten", "1.5min", " 5"):
        with pytest.raises(UserError, match=f"--checkpoint-every takes steps or minutes \\(500, 10min\\), got {bad}"):
            replace(TrainConfig(), checkpoint_every=bad)


def test_checkpoints_hold_plain_data_and_best_follows_the_monitored_figure(tiny_config, tmp_path):
    result = train_module.train(replace(tiny_config, epochs=2))
    run = Path(result["config"].output_dir)
    for name in ("last.pt", "best.pt"):
        assert torch.serialization.get_unsafe_globals_in_checkpoint(run / name) == []
        state = torch.load(run / name, map_location="cpu", weights_only=True)
        assert {"model", "optimizer", "scheduler", "epoch", "metrics", "rng", "config"} <= state.keys()
    best = torch.load(run / "best.pt", weights_only=True)
    assert best["metrics"][-1][MONITOR] == max(row[MONITOR] for row in result["metrics"])
    assert not list(run.glob("*.tmp"))


@pytest.mark.parametrize(
    "figures",
    [[(0.8, 1.0), (0.5, 0.5), (0.6, 0.4)], [(0.8, 1.0), (0.8, 0.5), (0.6, 0.4)]],  # a tie: the first, as printed
)
def test_best_pt_is_the_epoch_of_the_best_monitored_figure_not_of_the_lowest_loss(tiny_config, monkeypatch, figures):
    scripted = iter(figures)  # (MONITOR, val_loss) of epochs 1-3: the best is epoch 1
    trained, check, evaluate = [], train_module.check_fits, train_module.evaluate

    def keep(model, *args):  # the model as trained, just before the first step
        trained.append(model)
        check(model, *args)

    def scripted_evaluate(model, *args, **kwargs):
        stats = evaluate(model, *args, **kwargs)
        if model is trained[0]:  # the trained model's figures, not those of any average of it
            stats[MONITOR], stats["val_loss"] = next(scripted)
        return stats

    monkeypatch.setattr(train_module, "check_fits", keep)
    monkeypatch.setattr(train_module, "evaluate", scripted_evaluate)
    run = Path(train_module.train(replace(tiny_config, epochs=3))["config"].output_dir)
    assert torch.load(run / "best.pt", weights_only=True)["epoch"] == 1


def test_a_best_last_epoch_is_one_file_under_two_names_and_a_later_epoch_leaves_it_be(
    fingerprint, tiny_config, tmp_path
):
    run = tmp_path / "run"
    train_module.train(replace(tiny_config, epochs=1))  # its one epoch is the best
    assert (run / "best.pt").samefile(run / "last.pt")  # not written a second time
    best = fingerprint(run / "best.pt")
    files.save({"epoch": 2}, run / "last.pt")  # as every later last.pt is written: a new file replaces the name
    assert fingerprint(run / "best.pt") == best and not (run / "best.pt").samefile(run / "last.pt")


def test_resume_refuses_a_checkpoint_of_another_model(tiny_config, tmp_path):
    train_module.train(replace(tiny_config, model="small_cnn"))
    other = replace(tiny_config, model="resnet18", resume=str(tmp_path / "run" / "last.pt"), epochs=2)
    with pytest.raises(UserError, match="different run .*model"):
        train_module.train(other)


def test_resume_names_what_a_checkpoint_of_another_set_of_tricks_lacks(tiny_config, tmp_path):
    train_module.train(tiny_config)
    state = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    del state["scheduler"]
    torch.save(state, tmp_path / "other.pt")
    with pytest.raises(UserError) as raised:
        other = replace(tiny_config, resume=str(tmp_path / "other.pt"), output_dir=str(tmp_path / "new"), epochs=2)
        train_module.train(other)
    end = "resume from the last.pt or best.pt of a run"
    assert str(raised.value) == f"{tmp_path / 'other.pt'} has no usable scheduler; {end}"


def test_resume_auto_without_checkpoints_starts_fresh(tiny_config, capsys):
    train_module.train(replace(tiny_config, resume="auto"))
    assert "starting from scratch" in capsys.readouterr().out


def test_evaluate_accepts_a_checkpoint(tiny_config, tmp_path, capsys):
    train_module.train(tiny_config)
    assert main(["evaluate", "--weights", str(tmp_path / "run" / "best.pt"), "--device", "cpu"]) == 0
    assert "{{ 'mAP' if cookiecutter.task == 'multi_label' else 'accuracy' }}" in capsys.readouterr().out


def test_resume_of_a_missing_or_truncated_checkpoint_exits_4(tiny_config, tmp_path, capsys):
    train_module.train(tiny_config)
    last = tmp_path / "run" / "last.pt"
    assert main(["train", "--config", str(tmp_path / "run" / "config.yaml"), "--resume", str(last) + "x"]) == 4
    assert "does not exist" in capsys.readouterr().err
    last.write_bytes(last.read_bytes()[:1000])
    assert main(["train", "--config", str(tmp_path / "run" / "config.yaml"), "--resume", str(last)]) == 4
    assert "cannot be read" in capsys.readouterr().err


def test_a_diverging_run_keeps_the_last_good_checkpoint(fingerprint, tiny_config, tmp_path, capsys, monkeypatch):
    train_module.train(tiny_config)
    last = tmp_path / "run" / "last.pt"
    good = fingerprint(last)
    nan_loss = lambda self, logits, target: logits.sum() * float("nan")  # noqa: E731
    monkeypatch.setattr(CRITERION, "forward", nan_loss)
    args = ["train", "--config", str(tmp_path / "run" / "config.yaml"), "--resume", "auto", "--epochs", "2"]
    assert main(args) == 7
    assert "epoch 2: the training loss became NaN or infinite at step 1" in capsys.readouterr().err
    assert fingerprint(last) == good and torch.load(last, weights_only=True)["epoch"] == 1


def test_resume_with_more_epochs_follows_the_new_schedule(tiny_config, tmp_path):
    train_module.train(replace(tiny_config, lr=0.1, **NEUTRAL))  # no trick takes over the schedule
    rows = train_module.train(replace(tiny_config, lr=0.1, epochs=3, resume="auto", **NEUTRAL))["metrics"]
    expected = [0.1, 0.1 * 0.75, 0.1 * 0.25]  # epoch 1 ran with epochs=1; then (1 + cos(pi * e / 3)) / 2
    assert [row["lr"] for row in rows] == pytest.approx(expected)


def refused(args: list[str], capsys, code: int, message: str) -> None:
    assert main(args) == code
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]  # notices may come before it
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in err, err


SMOKE = ["train", "--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "8", "--device", "cpu", "--no-plots"]
SMALL = [*SMOKE, "--model", "small_cnn"]  # the built-in CNN, whatever the render's default: seconds, not minutes


def test_a_finished_run_is_only_continued_from_its_own_newest_checkpoint_with_more_epochs(
    fingerprint, tmp_path, capsys
):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main([*SMOKE, "--output-dir", str(a)]) == 0 and main([*SMOKE, "--output-dir", str(b), "--seed", "1"]) == 0
    shutil.copyfile(b / "last.pt", b / "epoch1.pt")
    assert main([*SMOKE, "--output-dir", str(b), "--resume", "auto", "--epochs", "2", "--seed", "1"]) == 0
    runs = {run: fingerprint(run) for run in (a, b)}
    # another run's checkpoint into a finished run
    refused([*SMOKE, "--output-dir", str(b), "--resume", str(a / "last.pt"), "--epochs", "3"], capsys, 5, "another run")
    # an earlier epoch of the run itself would replace its final weights with a branch
    refused([*SMOKE, "--resume", str(b / "epoch1.pt"), "--epochs", "3"], capsys, 5, "went on to epoch 2")
    # nothing left to train
    refused([*SMOKE, "--output-dir", str(a), "--resume", "auto"], capsys, 5, "is the end of epoch 1; pass --epochs 2")
    # a mistyped checkpoint name: its folder (the default output dir) stays untouched
    refused([*SMOKE, "--resume", str(a / "lats.pt"), "--epochs", "2"], capsys, 4, "does not exist")
    # the checkpoints cut short or gone: --resume auto must not quietly start the finished run again
    (a / "best.pt").unlink()
    (a / "last.pt").unlink()  # best.pt may be the same file
    (a / "last.pt").write_bytes(b"cut short")
    runs[a] = fingerprint(a)
    refused([*SMOKE, "--output-dir", str(a), "--resume", "auto", "--epochs", "2"], capsys, 5, "no checkpoints that can")
    (a / "last.pt").unlink()
    runs[a] = fingerprint(a)
    refused([*SMOKE, "--output-dir", str(a), "--resume", "auto", "--epochs", "2"], capsys, 5, "but no last.pt or")
    assert "starting from scratch" not in capsys.readouterr().out
    assert {run: fingerprint(run) for run in (a, b)} == runs


def test_a_refused_resume_writes_nothing(fingerprint, tiny_config, tmp_path, capsys):
    train_module.train(tiny_config)
    run = tmp_path / "run"
    before = fingerprint(run)
    other = ["--model", "resnet18"] if tiny_config.model != "resnet18" else ["--model", "small_cnn"]
    refused([*SMOKE, *other, "--output-dir", str(run), "--resume", "auto", "--epochs", "2"], capsys, 4, "different run")
    assert fingerprint(run) == before
    assert main(["evaluate", "--weights", str(run / "model.pt"), "--device", "cpu"]) == 0  # config.yaml still fits


def test_an_unfinished_run_is_not_restarted_over_its_checkpoints(fingerprint, tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*SMOKE, "--output-dir", str(run)]) == 0
    (run / "model.pt").unlink()  # as if stopped after epoch 1
    before = fingerprint(run)
    refused([*SMOKE, "--output-dir", str(run), "--epochs", "2"], capsys, 5, "holds an unfinished run")
    assert fingerprint(run) == before
    assert main([*SMOKE, "--output-dir", str(run), "--epochs", "2", "--resume", "auto"]) == 0


class Killed(BaseException):
    """The process dying where it is raised: nothing after it runs."""


def test_a_run_killed_after_its_last_epoch_is_resumed_to_write_what_it_had_not(tmp_path, monkeypatch, capsys):
    run, argv = tmp_path / "run", [*SMOKE[:-1], "--output-dir", str(tmp_path / "run")]  # with its plots

    def killed_drawing(out):
        raise Killed

    with monkeypatch.context() as patched:
        patched.setattr(train_module, "plot_run", killed_drawing)
        with pytest.raises(Killed):
            main(argv)
    capsys.readouterr()
    assert main([*argv, "--resume", "auto"]) == 0  # not refused as a finished run: model.pt marks one
    out = capsys.readouterr().out
    assert "after epoch 1" in out and epochs_trained(out) == []  # it only finished the run's files
    assert {"model.pt", "learning_curves.png"} <= {path.name for path in run.iterdir()}
    with monkeypatch.context() as patched:  # continued, and killed as it ends again
        patched.setattr(train_module, "plot_run", killed_drawing)
        with pytest.raises(Killed):
            main([*argv, "--resume", "auto", "--epochs", "2"])
    assert not (run / "model.pt").exists()  # the weights of epoch 1 would pass for those of epoch 2
    capsys.readouterr()
    assert main([*argv, "--resume", "auto", "--epochs", "2"]) == 0
    out = capsys.readouterr().out
    assert "after epoch 2" in out and epochs_trained(out) == [] and (run / "model.pt").is_file()


def test_an_unfinished_run_is_named_so_and_one_that_a_live_run_holds_is_refused_as_busy(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*SMOKE, "--output-dir", str(run)]) == 0
    (run / "model.pt").unlink()  # as if still training, or killed before its end
    weights = ["--weights", str(run / "model.pt"), "--device", "cpu"]
    refused(["evaluate", *weights], capsys, 4, "holds an unfinished run (no model.pt yet); pass its last.pt, or finish")
    with FileLock(run / ".lock"):  # as that run holds it, in another process
        refused([*SMOKE, "--output-dir", str(run)], capsys, 5, "another training run is writing into")
    refused([*SMOKE, "--output-dir", str(run)], capsys, 5, "holds an unfinished run; pass --resume auto")


def test_a_checkpoint_whose_epoch_is_no_count_is_refused_in_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*SMOKE, "--output-dir", str(run)]) == 0
    state = torch.load(run / "last.pt", weights_only=True)
    for epoch in ("1", -1, 1.0, None, True):
        torch.save(state | {"epoch": epoch}, tmp_path / "planted.pt")
        resumed = [*SMOKE, "--resume", str(tmp_path / "planted.pt"), "--output-dir", str(tmp_path / "new")]
        refused([*resumed, "--epochs", "2"], capsys, 4, "planted.pt has no usable epoch; resume from the last.pt")


def test_a_resumed_run_saves_its_split_as_its_own_and_keeps_its_optimizer(image_folder, tmp_path, capsys):
    run, data = tmp_path / "run", ["--data", str(image_folder / "train"), "--image-size", "16"]  # held out
    assert main([*SMOKE, *data, "--output-dir", str(run)]) == 0
    assert main(["train", "--config", str(run / "config.yaml"), "--resume", "auto", "--epochs", "2"]) == 0
    assert yaml.safe_load((run / "config.yaml").read_text())["split"] is None  # its own split.csv, wherever copied
    capsys.readouterr()
    refused([*SMOKE, "--resume", str(run / "last.pt"), "--epochs", "3", "--lr", "0.01"], capsys, 4, "differs in: lr")


PER_INVOCATION_FLAGS = {"overwrite", "init_from", "resume"}  # never saved, so never compared
# Literal on purpose, not config.RESUME_MAY_CHANGE: what a resume may change, written down outside the code under test.
MAY_CHANGE_ON_RESUME = {
    "epochs",
    "patience",
    "max_steps_per_epoch",
    "output_dir",
    "data_root",
    "device",
    "gpus",
    "num_workers",
    "deterministic",
    "channels_last",
    "compile",
    "activation_checkpointing",
    "plots",
    "profile",
    "detect_anomaly",
    "checkpoint_every",
{% if cookiecutter.use_amp %}
    "precision",
{% endif %}
{% if cookiecutter.use_distributed %}
    "nproc",
    "dist_timeout",
{% endif %}
{% if cookiecutter.tracker != "none" %}
    "{{ cookiecutter.tracker }}",
{% endif %}
}


def test_every_setting_either_may_change_on_resume_and_is_recorded_or_is_refused_in_one_line(tiny_config, tmp_path):
    """Each field of the config, changed alone, after an epoch and in the middle of one: a resume that may change it
    returns the changes.csv row (from the next step on, the values as written); one that may not names it, with both
    values, in one line. The epoch's length may not change mid-epoch (the saved step is a place in that epoch)."""
    from test_config import ROUND_TRIP_OVERRIDES, other_value

    from {{ cookiecutter.package_name }}.config import FIELDS, saved_fields

    def written(value) -> str:
        return " ".join(str(item) for item in value) if isinstance(value, list) else str(value)

    cfg = replace(tiny_config, mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25])  # each changes alone, the pair valid
    split = tmp_path / "other-split.csv"  # a split the run did not train on, in a file that exists
    split.write_text("path,label,split\na.png,cats,train\n")
    overrides = ROUND_TRIP_OVERRIDES | {"split": str(split)}
    path = Path(cfg.output_dir) / "last.pt"
    wrong = []
    for name in saved_fields(cfg):
        before = getattr(cfg, name)
        after = overrides.get(name, other_value(name, before))
        changed = replace(cfg, **{name: after})
        for progress, (epoch, step) in ((None, (3, 1)), ([{"step": 3}], (3, 4))):
            state = {"config": saved_fields(cfg), "epoch": 2} | ({"progress": progress} if progress else {})
            may_change = name in MAY_CHANGE_ON_RESUME and not (progress and name == "max_steps_per_epoch")
            try:
                rows = continuation.resume_changes(path, state, changed)
            except ModelError as exc:
                said, named = str(exc), f"differs in: {name} {written(before)}, now {written(after)}"
                if may_change or "\n" in said or named not in said:
                    wrong.append((name, progress, said))
                continue
            row = {"epoch": epoch, "step": step, "setting": name, "before": written(before), "after": written(after)}
            if not may_change or rows != [row]:
                wrong.append((name, progress, rows))
    assert set(FIELDS) - set(saved_fields(cfg)) == PER_INVOCATION_FLAGS
    assert not wrong, wrong


def changes_csv(run: Path) -> list[list[str]]:
    with open(run / "changes.csv", newline="") as file:
        return list(csv.reader(file))


def test_a_resume_says_what_it_changes_and_the_run_folder_keeps_each_change(tmp_path, capsys):
    run, new = tmp_path / "run", tmp_path / "new"
    assert main([*SMALL, "--output-dir", str(run)]) == 0
    assert not (run / "changes.csv").exists()
    config = str(run / "config.yaml")
    assert main(["train", "--config", config, "--resume", "auto", "--epochs", "3", "--patience", "5"]) == 0
    out = capsys.readouterr().out
    assert "changed from step 1 of epoch 2 on: epochs 1 -> 3, patience None -> 5 (see changes.csv)" in out
    (run / "planted.csv").write_text("not the run's\n")
    (run / "changes.csv").unlink()
    (run / "changes.csv").symlink_to(run / "planted.csv")  # replaced, never followed
    assert main(["train", "--config", config, "--resume", "auto", "--epochs", "4"]) == 0
    assert "changed from step 1 of epoch 4 on: epochs 3 -> 4 (see changes.csv)" in capsys.readouterr().out
    header = ["epoch", "step", "setting", "before", "after"]
    history = [header, ["2", "1", "epochs", "1", "3"], ["2", "1", "patience", "None", "5"]]
    history += [["4", "1", "epochs", "3", "4"]]
    assert changes_csv(run) == history and not (run / "changes.csv").is_symlink()
    assert (run / "planted.csv").read_text() == "not the run's\n"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert (saved["epochs"], saved["patience"]) == (4, 5)  # the values the run goes on with
    assert torch.load(run / "last.pt", weights_only=True)["config"]["epochs"] == 4
    assert main(["train", "--resume", str(run / "last.pt"), "--output-dir", str(new), "--epochs", "5"]) == 0
    assert changes_csv(new) == [*history, ["5", "1", "epochs", "4", "5"], ["5", "1", "output_dir", str(run), str(new)]]
    assert main([*SMALL, "--output-dir", str(new), "--overwrite"]) == 0  # a new run: none of the old one's history
    assert not (new / "changes.csv").exists()


def test_a_folder_in_the_place_of_changes_csv_is_refused_before_anything_is_written(fingerprint, tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*SMALL, "--output-dir", str(run)]) == 0
    (run / "changes.csv").mkdir()
    before = fingerprint(run)
    resumed = ["train", "--config", str(run / "config.yaml"), "--resume", "auto", "--epochs", "2"]
    refused(resumed, capsys, 5, f"{run / 'changes.csv'} is a folder, where the run keeps its changes; move it away")
    assert fingerprint(run) == before and (run / "changes.csv").is_dir()


def test_a_resume_keeps_the_split_it_trained_on_wherever_its_folder_goes(fingerprint, image_folder, tmp_path, capsys):
    run, data = tmp_path / "run", ["--data", str(image_folder / "train"), "--image-size", "16"]  # held out
    assert main([*SMALL, *data, "--output-dir", str(run)]) == 0
    with open(run / "split.csv", newline="") as file:
        rows = list(csv.reader(file))
    swapped = [rows[0], *reversed(rows[1:])]  # the same rows in another order: the same split
    (tmp_path / "reordered.csv").write_text("".join(",".join(row) + "\n" for row in swapped))
    other = [*rows[:-1], [*rows[-1][:2], "train" if rows[-1][2] == "val" else "val"]]  # one image moved over
    (tmp_path / "other.csv").write_text("".join(",".join(row) + "\n" for row in other))
    before = fingerprint(run)
    resumed = ["train", "--config", str(run / "config.yaml"), "--resume", "auto", "--epochs", "2"]
    refused([*resumed, "--split", str(tmp_path / "other.csv")], capsys, 4, "differs in: split")
    assert fingerprint(run) == before
    shutil.copytree(run, tmp_path / "copy")
    copied = ["train", "--config", str(tmp_path / "copy" / "config.yaml"), "--resume", "auto", "--epochs", "2"]
    assert main([*copied, "--split", str(tmp_path / "reordered.csv")]) == 0
    changed = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("changed from"))
    assert [part.split()[0] for part in changed.split(" on: ")[1].split(", ")] == ["epochs", "output_dir"]


def test_a_resume_that_changes_what_the_run_learns_is_refused_in_one_line_and_writes_nothing(
    fingerprint, tmp_path, capsys
):
    run = tmp_path / "run"
    assert main([*SMALL, "--output-dir", str(run), "--image-size", "32"]) == 0
    before, config = fingerprint(run), run / "config.yaml"
    resumed = ["train", "--config", str(config), "--resume", "auto", "--epochs", "2"]
    edits = {"image_size": (64, "image_size 32, now 64")}
{% if cookiecutter.use_label_smoothing %}
    edits["label_smoothing"] = (0.2, "label_smoothing 0.1, now 0.2")
{% endif %}
    text = config.read_text()
    for key, (value, said) in edits.items():  # a hand edit of config.yaml
        config.write_text(yaml.safe_dump(yaml.safe_load(text) | {key: value}, sort_keys=False))
        refused(resumed, capsys, 4, f"differs in: {said}); put them back, or start a new run in another --output-dir")
        config.write_text(text)
        assert fingerprint(run) == before
    refused([*resumed, "--lr", "0.01", "--seed", "3"], capsys, 4, "differs in: lr 0.05, now 0.01; seed 0, now 3)")
    assert fingerprint(run) == before


def _signalled_before(monkeypatch, name: str, number: int = signal.SIGTERM) -> None:
    """train_module's `name` receives a stop signal as it is called, as if the scheduler sent one then."""
    original = getattr(train_module, name)

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), number)
        return original(*args, **kwargs)

    monkeypatch.setattr(train_module, name, signalled)


def test_a_stop_signal_as_the_run_starts_stops_it_before_its_first_step_saying_so(tmp_path, capsys, monkeypatch):
    """Before the epochs (the data, the model, the summary) a signal once killed the run by its default action."""
    run, handler = tmp_path / "run", signal.getsignal(signal.SIGTERM)
    _signalled_before(monkeypatch, "build_optimizer")
    with pytest.raises(SystemExit) as stopped:
        main([*SMALL, "--epochs", "2", "--output-dir", str(run)])
    assert stopped.value.code == 128 + signal.SIGTERM
    said = "stopped by SIGTERM: nothing was saved yet; run the same command again"
    assert capsys.readouterr().err.splitlines()[-1] == said
    assert not (run / "metrics.csv").exists() and not (run / "last.pt").exists()  # not one step trained
    assert signal.getsignal(signal.SIGTERM) == handler
    monkeypatch.undo()
    assert main([*SMALL, "--output-dir", str(run)]) == 0  # the same command, as said
    _signalled_before(monkeypatch, "build_optimizer", signal.SIGUSR1)
    with pytest.raises(SystemExit) as stopped:  # a resume, stopped as it starts: its checkpoint is kept
        main(["train", "--config", str(run / "config.yaml"), "--resume", "auto", "--epochs", "2"])
    assert stopped.value.code == 128 + signal.SIGUSR1
    again = f"{SCRIPT} train --config {shlex.quote(str(run / 'config.yaml'))} --resume auto"
    said = f"stopped by SIGUSR1: {run / 'last.pt'} is as it was; continue with: {again}"
    assert capsys.readouterr().err.splitlines()[-1] == said
    monkeypatch.undo()
    assert main(shlex.split(again)[1:]) == 0  # config.yaml holds --epochs 2 already
    assert len(metrics_without_time(run)) == 2


@pytest.fixture
def python_ctrl_c():
    """Python's own Ctrl-C handler (a KeyboardInterrupt) for the test, whatever this process inherited: a process
    started in the background ignores SIGINT, and a Ctrl-C that a run passed on would then show nothing."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


@pytest.mark.parametrize("number", [signal.SIGUSR1, signal.SIGINT], ids=["SIGUSR1", "SIGINT"])
def test_a_stop_signal_as_the_run_writes_its_final_files_lets_it_finish_them_and_says_so(
    tmp_path, capsys, monkeypatch, number, python_ctrl_c
):
    """The run has finished: it exits 0 (a Ctrl-C there is no KeyboardInterrupt after the fact either)."""
    run, handlers = tmp_path / "run", {number: signal.getsignal(number) for number in stop_signals.STOP_SIGNALS}
    _signalled_before(monkeypatch, "_save_results", number)
    assert main([*SMALL, "--output-dir", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"{signal.Signals(number).name} came as the run wrote its final files: they are complete" in err, err
    assert read_weights(run / "model.pt")[1]  # written whole, after the signal
    assert {number: signal.getsignal(number) for number in stop_signals.STOP_SIGNALS} == handlers


def test_a_resume_onto_data_with_other_classes_is_refused(fingerprint, image_folder, tmp_path, capsys):
    run, data = tmp_path / "run", ["--data", str(image_folder), "--image-size", "16"]
    assert main([*SMOKE, *data, "--output-dir", str(run)]) == 0
    assert read_weights(run / "model.pt")[1] == ["cats", "dogs"]  # the weights file names its classes
    for split in ("train", "val"):
        (image_folder / split / "cats").rename(image_folder / split / "zebras")
    before = fingerprint(run)
    message = "trained on the classes ['cats', 'dogs'], but the data has ['dogs', 'zebras']"
    refused([*SMOKE, *data, "--output-dir", str(run), "--resume", "auto", "--epochs", "2"], capsys, 4, message)
    assert fingerprint(run) == before


def test_resume_auto_falls_back_to_best_when_last_is_empty_and_refuses_weights_files(tmp_path, capsys, monkeypatch):
    evaluate, better = train_module.evaluate, itertools.count()

    def improving(*args, **kwargs):  # the best epoch is the last
        return evaluate(*args, **kwargs) | {MONITOR: float(next(better))}

    monkeypatch.setattr(train_module, "evaluate", improving)
    run = tmp_path / "run"
    assert main([*SMOKE, "--output-dir", str(run), "--epochs", "2"]) == 0
    (run / "last.pt").unlink()  # best.pt is the same file: the best epoch was the last
    (run / "last.pt").write_bytes(b"")  # a copy cut short by a full disk
    assert main([*SMOKE, "--output-dir", str(run), "--resume", "auto", "--epochs", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("skipping checkpoint") == 1 and f"resumed from {run / 'best.pt'}" in out  # said once
    refused([*SMOKE, "--resume", str(run / "model.pt"), "--epochs", "4"], capsys, 4, "is no checkpoint (weights")
    files = {"list": ([1, 2], "a list"), "tensor": (torch.ones(2), "a Tensor"), "ints": ({1: 2}, "a dict")}
    for name, (content, what) in files.items():
        torch.save(content, tmp_path / f"{name}.pt")
        elsewhere = ["--output-dir", str(tmp_path / "new")]
        refused([*SMOKE, "--resume", str(tmp_path / f"{name}.pt"), *elsewhere], capsys, 4, what)


def test_a_finished_run_whose_last_pt_cannot_be_read_is_not_continued_from_an_older_best_pt(
    tmp_path, capsys, monkeypatch
):
    evaluate = train_module.evaluate
    monkeypatch.setattr(train_module, "evaluate", lambda *args, **kwargs: evaluate(*args, **kwargs) | {MONITOR: 0.5})
    run = tmp_path / "run"
    assert main([*SMOKE, "--output-dir", str(run), "--epochs", "2"]) == 0  # best.pt: epoch 1
    (run / "last.pt").unlink()
    (run / "last.pt").write_bytes(b"")
    message = f"best.pt is epoch 1 but {run} went on to epoch 2 (its metrics.csv)"  # its model.pt would be replaced
    refused([*SMOKE, "--output-dir", str(run), "--resume", "auto", "--epochs", "3"], capsys, 5, message)


def test_resume_from_a_checkpoint_continues_its_run_with_its_config(image_folder, tmp_path, capsys, monkeypatch):
    """The README's `train --resume runs/<run>/last.pt --epochs 4`: the run's own data and settings, from any folder;
    flags given (--epochs) override them. Leftovers of killed writes go."""
    run = tmp_path / "run"
    assert main([*SMOKE, "--data", str(image_folder), "--image-size", "16", "--output-dir", str(run)]) == 0
    (run / ".last.pt.x7k2.tmp").write_bytes(b"left by a kill")
    monkeypatch.chdir(tmp_path / "images" / "val")  # anywhere else
    assert main(["train", "--resume", str(run / "last.pt"), "--epochs", "2"]) == 0
    assert f"resumed from {run / 'last.pt'} after epoch 1" in capsys.readouterr().out
    assert [row["epoch"] for row in metrics_without_time(run)] == ["1", "2"]
    assert not list(run.glob(".*.tmp"))
    assert main(["train", "--resume", "auto", "--output-dir", str(run), "--epochs", "3"]) == 0  # its data too
    assert [row["epoch"] for row in metrics_without_time(run)] == ["1", "2", "3"]


def test_a_resume_into_a_new_folder_validates_on_the_images_the_run_held_out(image_folder, tmp_path):
    photos, run, new = image_folder / "train", tmp_path / "run", tmp_path / "new"  # one class folder each: held out
    assert main([*SMOKE, "--data", str(photos), "--image-size", "16", "--output-dir", str(run)]) == 0
    for image in list(photos.glob("*/*.png")):  # the data grew since: a new hold-out would pick other images
        shutil.copy(image, image.with_name(f"more-{image.name}"))
    assert main(["train", "--resume", str(run / "last.pt"), "--epochs", "2", "--output-dir", str(new)]) == 0
    assert (new / "split.csv").read_text() == (run / "split.csv").read_text()
    assert yaml.safe_load((new / "config.yaml").read_text())["split"] is None  # its own copy: run can go
    shutil.rmtree(run)
    assert main(["train", "--resume", "auto", "--output-dir", str(new), "--epochs", "3"]) == 0
    assert (new / "split.csv").read_text().count("\n") == 13  # the header, then the run's 12 images, not the new 24


def test_a_copied_run_continues_in_the_copy_from_any_folder(fingerprint, tmp_path, capsys, monkeypatch):
    original, branch = tmp_path / "original", tmp_path / "branch"
    assert main([*SMOKE, "--output-dir", str(original)]) == 0
    shutil.copytree(original, branch, symlinks=True)  # cp -a
    before = fingerprint(original)
    monkeypatch.chdir(tmp_path / "original")  # not where the run started
    assert main(["train", "--config", str(branch / "config.yaml"), "--resume", "auto", "--epochs", "2"]) == 0
    assert fingerprint(original) == before
    assert [row["epoch"] for row in metrics_without_time(branch)] == ["1", "2"]


def test_the_stop_notice_starts_on_a_line_of_its_own_in_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    stop_signals.GracefulStop()._request(signal.SIGINT, None)  # after the ^C the terminal echoes
    assert capsys.readouterr().err.startswith("\nSIGINT: stopping at the next resumable point")


ENV = {**os.environ, "PYTHONPATH": str(Path(train_module.__file__).parents[2]), "OMP_NUM_THREADS": "1"}
MODULE = [sys.executable, "-m", "{{ cookiecutter.package_name }}"]


def start_training(run: Path, *extra: str, group: bool = False) -> subprocess.Popen:
    command = [*MODULE, "train", "--epochs", "3", "--device", "cpu", "--max-steps-per-epoch", "8", "--batch-size", "16"]
    command += ["--deterministic", "--output-dir", str(run), *extra]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    return subprocess.Popen(command, env=ENV, start_new_session=group, **pipes)


def continue_as_told(err: str) -> subprocess.CompletedProcess:
    """Run the command the stop message printed (through `python -m`: the console script may not be installed)."""
    told = err.split(f"continue with: {SCRIPT} ", 1)[1].splitlines()[0]
    return subprocess.run([*MODULE, *shlex.split(told)], env=ENV, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "number"), [(0, signal.SIGTERM), (2, signal.SIGUSR1)])
def test_a_signal_mid_epoch_stops_resumably_and_the_resumed_run_is_exact(tiny_config, tmp_path, workers, number):
    straight = replace(tiny_config, epochs=3, max_steps_per_epoch=8, deterministic=True, num_workers=workers)
    train_module.train(replace(straight, output_dir=str(tmp_path / "a")))

    run = tmp_path / "b"
    job = start_training(run, "--num-workers", str(workers))
    for line in job.stdout:  # wait for the end of epoch 1, then stop the job in the middle of epoch 2
        if line.startswith("epoch 1 "):
            job.send_signal(number)
            break
    out, err = job.communicate(timeout=120)
    name = signal.Signals(number).name
    assert job.returncode == 128 + number, err
    state = torch.load(run / "last.pt", weights_only=True)
    step = state["progress"][0]["step"] if "progress" in state else None  # None: epoch 2 had ended
    held = f"step {step} of epoch 2" if step else "the last completed epoch"
    again = f"continue with: {SCRIPT} train --config {run / 'config.yaml'} --resume auto"
    assert f"stopped by {name}: {run / 'last.pt'} holds {held}; {again}" in err

    resumed = continue_as_told(err)  # the printed command continues this very run
    assert resumed.returncode == 0, resumed.stderr
    where = f"at step {step} of epoch 2" if step else f"after epoch {state['epoch']}"
    assert f"resumed from {run / 'last.pt'} {where}" in resumed.stdout
    assert epochs_trained(resumed.stdout) == list(range(state["epoch"] + 1, 4))
    assert_same_state(torch.load(tmp_path / "a" / "model.pt"), torch.load(run / "model.pt"))
{% if cookiecutter.use_ema %}
    assert_same_state(torch.load(tmp_path / "a" / "ema.pt"), torch.load(run / "ema.pt"))
{% endif %}
    assert metrics_without_time(tmp_path / "a") == metrics_without_time(run)


def wait_for_workers(pid: int, count: int, seconds: float = 60) -> None:
    """Until `pid` has `count` child processes (its DataLoader workers), read from Linux's /proc."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        children = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError):
                children += int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid
        if children >= count:
            time.sleep(0.3)  # and into their first batches
            return
        time.sleep(0.05)
    raise AssertionError(f"the run did not start {count} data-loading workers within {seconds} s")


@pytest.mark.slow
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_whole_process_group_stops_once_without_a_traceback(tmp_path, number):
    """As `timeout`, SLURM and Ctrl-C do: the signal reaches the data-loading workers too."""
    args = ["--num-workers", "2", "--epochs", "5", "--max-steps-per-epoch", "40"]
    job = start_training(tmp_path / "run", *args, group=True)
    for line in job.stdout:
        if line.startswith("epoch 1 "):
            wait_for_workers(job.pid, 2)  # epoch 2's workers are loading batches (a fixed sleep missed them under load)
            os.killpg(job.pid, number)
            break
    out, err = job.communicate(timeout=120)
    assert job.returncode == 128 + number, err
    name = signal.Signals(number).name
    assert err.count(f"{name}: stopping at the next resumable point") == 1 and err.count(f"stopped by {name}") == 1
    assert "Traceback" not in err and "DataLoader worker" not in err, err


@pytest.mark.slow
def test_a_second_signal_stops_at_once(tmp_path):
    job = start_training(tmp_path / "run", "--epochs", "50", "--max-steps-per-epoch", "40")
    for line in job.stdout:
        if line.startswith("epoch 1 "):
            job.send_signal(signal.SIGINT)
            job.send_signal(signal.SIGTERM)  # another signal: no delivery of the first one twice
            break
    out, err = job.communicate(timeout=120)
    assert job.returncode == 128 + signal.SIGTERM and "stopped by" not in err, err


@pytest.mark.parametrize("kind", ["cuda", "xpu"])
def test_a_gpu_run_keeps_the_random_state_of_its_own_gpu_only(monkeypatch, kind):
    """One state for the GPU in use, not one per visible GPU: resuming where fewer GPUs are visible still works. Faked:
    torch answers as on a machine with a `kind` GPU that this run has started."""
    restored, gpu = [], getattr(torch, kind)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: torch.device(kind))
    monkeypatch.setattr(gpu, "is_initialized", lambda: True)  # a GPU run
    monkeypatch.setattr(gpu, "get_rng_state", lambda device=kind: torch.tensor([7], dtype=torch.uint8))
    monkeypatch.setattr(gpu, "get_rng_state_all", lambda: pytest.fail("saved every visible GPU's state"))
    monkeypatch.setattr(gpu, "set_rng_state", lambda state, device=kind: restored.append(state))
    monkeypatch.setattr(gpu, "set_rng_state_all", lambda states: pytest.fail("restored several GPUs' states"))
    generator = torch.Generator()
    state = checkpoint_file.rng_state(generator)
    checkpoint_file.restore_rng(state, generator)
    assert torch.equal(state[kind], torch.tensor([7], dtype=torch.uint8)) and restored == [state[kind]]


def test_a_cpu_run_keeps_no_gpu_random_state():
    assert "cuda" not in checkpoint_file.rng_state(torch.Generator())  # nothing initialised CUDA in this process


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a GPU run's files: the GPU lane")
def test_the_files_of_a_gpu_run_hold_cpu_tensors_only(tiny_config, tmp_path):
    """A plain torch.load of model.pt or last.pt, without map_location, works on a machine without a GPU."""
    train_module.train(replace(tiny_config, device="cuda", gpus="0"))

    def devices(value) -> set:
        if isinstance(value, torch.Tensor):
            return {value.device.type}
        values = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else []
        return set().union(*map(devices, values))

    for name in ("model.pt", "last.pt"):
        assert devices(torch.load(tmp_path / "run" / name, weights_only=True)) == {"cpu"}, name


def test_init_from_and_resume_together_are_refused():
    from {{ cookiecutter.package_name }}.config import TrainConfig

    with pytest.raises(UserError) as raised:
        TrainConfig(init_from="weights.pt", resume="auto")
    message = "--init-from starts a new run from other weights, --resume continues this one: pass one"
    assert str(raised.value) == message
    assert TrainConfig(init_from="weights.pt").resume is None and TrainConfig(resume="auto").init_from is None


def test_a_stop_request_ends_the_epochs_and_a_second_one_exits_at_once(capsys):
    """In-process: the handler called as the signal would call it (the slow tests send real signals)."""
    stop = stop_signals.GracefulStop()
    before = signal.getsignal(signal.SIGTERM)
    assert not stop and list(stop.epochs(range(3))) == [0, 1, 2]
    seen = []
    for epoch in stop.epochs(range(5)):
        seen.append(epoch)
        assert signal.getsignal(signal.SIGTERM) == stop._request  # installed while the epochs run
        if epoch == 1:
            stop._request(signal.SIGTERM, None)
    assert seen == [0, 1] and stop and stop.signal == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before  # restored
    assert capsys.readouterr().err == "SIGTERM: stopping at the next resumable point (send it again to stop now)\n"
    assert list(stop.epochs(range(3))) == []
    with pytest.raises(SystemExit) as raised:
        stop._request(signal.SIGINT, None)
    assert raised.value.code == 128 + signal.SIGINT and stop.signal == signal.SIGTERM


def test_the_same_signal_twice_within_a_second_is_one_request_and_later_it_exits_at_once(monkeypatch):
    """A scheduler signals the whole process group and a launcher passes the signal on: a worker gets it twice."""
    now = [100.0]
    monkeypatch.setattr(stop_signals.time, "monotonic", lambda: now[0])
    stop = stop_signals.GracefulStop()
    stop._request(signal.SIGUSR1, None)
    now[0] += 0.9
    stop._request(signal.SIGUSR1, None)  # the same request: the run goes on to its resumable point
    now[0] += 0.2
    with pytest.raises(SystemExit) as raised:
        stop._request(signal.SIGUSR1, None)
    assert raised.value.code == 128 + signal.SIGUSR1


def test_after_a_stop_the_run_exits_128_plus_the_signal_saying_how_to_continue(tmp_path, capsys, monkeypatch):
    stop = stop_signals.GracefulStop()
    assert stop.exit_if_stopped(tmp_path) is None and capsys.readouterr().err == ""  # not stopped: carries on
    stop._request(signal.SIGTERM, None)
    capsys.readouterr()
    again = f"continue with: {SCRIPT} train --config {shlex.quote(str(tmp_path / 'config.yaml'))} --resume auto"
    with pytest.raises(SystemExit) as raised:
        stop.exit_if_stopped(tmp_path)
    assert raised.value.code == 143
    # nothing to continue from: the command itself may hold what config.yaml does not (--resume PATH, --init-from)
    assert capsys.readouterr().err == "stopped by SIGTERM: nothing was saved yet; run the same command again\n"
    (tmp_path / "last.pt").write_bytes(b"")
    with pytest.raises(SystemExit) as raised:
        stop.exit_if_stopped(tmp_path)
    assert raised.value.code == 143
    assert capsys.readouterr().err == f"stopped by SIGTERM: {tmp_path / 'last.pt'} is as it was; {again}\n"
    with pytest.raises(SystemExit):
        stop.exit_if_stopped(tmp_path, "step 3 of epoch 2")
    saved = f"{tmp_path / 'last.pt'} holds step 3 of epoch 2"
    assert capsys.readouterr().err == f"stopped by SIGTERM: {saved}; {again}\n"
{% if cookiecutter.use_distributed %}
    monkeypatch.setattr(stop_signals, "is_main", lambda: False)  # another rank: rank 0 says where to continue
    with pytest.raises(SystemExit) as raised:
        stop.exit_if_stopped(tmp_path)
    assert raised.value.code == 143 and capsys.readouterr().err == ""
{% endif %}


def test_a_run_folder_is_continued_only_from_its_own_newest_checkpoint(tmp_path):
    """check_continuation on planted files (plain dicts with an epoch: all a checkpoint needs to be found)."""
    from types import SimpleNamespace

    from {{ cookiecutter.package_name }}.core.files import save

    out, other = tmp_path / "run", tmp_path / "other"
    out.mkdir()
    other.mkdir()
    cfg = SimpleNamespace(resume="auto", epochs=5, patience=0, overwrite=False)

    def refusal(found, config=cfg) -> str:
        with pytest.raises(OutputError) as raised:
            continuation.check_continuation(out, found, config)
        return str(raised.value)

    assert continuation.check_continuation(out, None, cfg) is None  # an empty folder: a new run
    save({"epoch": 1}, other / "last.pt")
    assert continuation.check_continuation(out, (other / "last.pt", {"epoch": 1}), cfg) is None  # into an empty one
    assert refusal((other / "last.pt", {"epoch": 5})) == (  # it would leave a model.pt alone there
        f"{other / 'last.pt'} is the end of epoch 5; pass --epochs 6 or more to continue it"
    )
    save({"epoch": 1}, out / "best.pt")
    save({"epoch": 2}, out / "last.pt")
    end = "--overwrite to replace it, or another --output-dir"
    assert refusal(None) == f"{out} holds an unfinished run; pass --resume auto to continue it, {end}"
    assert refusal((other / "last.pt", {"epoch": 1})) == (
        f"{out} holds another run; continue {other / 'last.pt'} into an empty --output-dir or its own folder"
    )
    by_path = SimpleNamespace(resume=str(out / "best.pt"), epochs=5, patience=0, overwrite=False)
    assert refusal((out / "best.pt", {"epoch": 1}), by_path) == (
        f"{out / 'best.pt'} is epoch 1 but {out} went on to epoch 2; "
        f"continue from {out / 'last.pt'}, or pass --overwrite to branch off here"
    )
    assert continuation.check_continuation(out, (out / "last.pt", {"epoch": 2}), by_path) is None
    (out / "model.pt").write_bytes(b"")
    fresh = SimpleNamespace(resume=None, epochs=5, patience=0, overwrite=False)
    assert refusal(None, fresh) == (
        f"{out} holds a finished run; pass --resume auto with more --epochs to continue it, {end}"
    )
    assert refusal((out / "last.pt", {"epoch": 5})) == (
        f"{out / 'last.pt'} is the end of epoch 5; pass --epochs 6 or more to continue it"
    )
    assert continuation.check_continuation(out, (out / "last.pt", {"epoch": 4}), cfg) is None
    (out / "best.pt").unlink()
    (out / "last.pt").unlink()
    # a finished run without checkpoints
    assert refusal((other / "last.pt", {"epoch": 1})) == (
        f"{out} holds another run; continue {other / 'last.pt'} into an empty --output-dir or its own folder"
    )


def test_resume_auto_takes_the_newest_loadable_checkpoint(tmp_path, capsys):
    from {{ cookiecutter.package_name }}.core.files import save

    assert continuation.find_checkpoint("auto", tmp_path) is None
    assert capsys.readouterr().out == f"no checkpoint in {tmp_path}: starting from scratch\n"
    assert continuation.find_checkpoint("auto", tmp_path, quiet=True) is None and capsys.readouterr().out == ""
    assert continuation.find_checkpoint(None, tmp_path) is None
    save({"epoch": 3, "tag": "last"}, tmp_path / "last.pt")
    path, state = continuation.find_checkpoint("auto", tmp_path)
    assert path == tmp_path / "last.pt" and state["tag"] == "last" and capsys.readouterr().out == ""
    (tmp_path / "best.pt").write_bytes(b"PK\x03\x04 cut short")
    path, state = continuation.find_checkpoint("auto", tmp_path)
    assert path == tmp_path / "last.pt" and state["epoch"] == 3
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and printed[0].startswith(f"skipping checkpoint {tmp_path / 'best.pt'} cannot be read (")
    save({"epoch": 3, "tag": "best"}, tmp_path / "best.pt")
    assert continuation.find_checkpoint("auto", tmp_path)[1]["tag"] == "last"  # a tie: last wins
    save({"epoch": 4, "tag": "best"}, tmp_path / "best.pt")
    assert continuation.find_checkpoint("auto", tmp_path)[1]["tag"] == "best"
    path, state = continuation.find_checkpoint(str(tmp_path / "last.pt"), tmp_path)
    assert path == tmp_path / "last.pt" and state["tag"] == "last"


class _Foreign:  # a class no checkpoint may hold: weights_only refuses to build it
    pass


def test_only_checkpoints_of_plain_data_are_loaded(tmp_path):
    from {{ cookiecutter.package_name }}.core.errors import ModelError

    def refusal(path) -> str:
        with pytest.raises(ModelError) as raised:
            checkpoint_file.load_checkpoint(path)
        return str(raised.value)

    assert refusal(tmp_path / "none.pt") == f"checkpoint {tmp_path / 'none.pt'} does not exist; check --resume"
    torch.save({"epoch": 1, "thing": _Foreign()}, tmp_path / "foreign.pt")
    assert refusal(tmp_path / "foreign.pt") == (  # not torch's advice to load it with weights_only=False
        f"checkpoint {tmp_path / 'foreign.pt'} cannot be read "
        "(it holds Python objects besides tensors and plain data, and loading those could run code)"
    )
    (tmp_path / "cut.pt").write_bytes(b"")
    assert refusal(tmp_path / "cut.pt") == f"checkpoint {tmp_path / 'cut.pt'} cannot be read (EOFError)"
    end = "resume from the last.pt or best.pt of a run"
    torch.save({"weight": torch.ones(1)}, tmp_path / "weights.pt")
    weights = f"{tmp_path / 'weights.pt'} is no checkpoint (weights without training state); {end}"
    assert refusal(tmp_path / "weights.pt") == weights
    torch.save([1, 2], tmp_path / "list.pt")
    assert refusal(tmp_path / "list.pt") == f"{tmp_path / 'list.pt'} is no checkpoint (a list); {end}"
    torch.save({"epoch": 2, "x": torch.ones(1)}, tmp_path / "good.pt")
    assert checkpoint_file.load_checkpoint(tmp_path / "good.pt")["epoch"] == 2


def _stateful_run(lr: float = 0.1):
    from torch import nn

    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 0.5**epoch)
    classes = checkpoint_file.ClassNames(["a", "b"])
    return {"model": model, "optimizer": optimizer, "scheduler": scheduler, "classes": classes}


@pytest.fixture
def _random_state_kept():
    import random

    import numpy as np

    kept = torch.get_rng_state(), np.random.get_state(), random.getstate()
    yield
    torch.set_rng_state(kept[0])
    np.random.set_state(kept[1])
    random.setstate(kept[2])


def test_resume_restores_each_object_and_the_streams_of_its_own_rank(tmp_path, capsys, monkeypatch, _random_state_kept):
    from {{ cookiecutter.package_name }}.config import saved_fields
    from {{ cookiecutter.package_name }}.core.errors import ModelError

    cfg = TrainConfig(model="small_cnn", data="synthetic", batch_size=16, optimizer="sgd", lr=0.1, weight_decay=0.0)
    saved = _stateful_run()
    saved["optimizer"].step()
    saved["scheduler"].step()
    streams = [checkpoint_file.rng_state(torch.Generator().manual_seed(seed)) for seed in (10, 11)]
    state = {name: obj.state_dict() for name, obj in saved.items()}
    state |= {"epoch": 1, "metrics": [{"val_acc": 0.5}], "rng": streams, "config": saved_fields(cfg)}
    path = tmp_path / "last.pt"

    def refusal(state, stateful) -> str:
        with pytest.raises(ModelError) as raised:
            continuation.resume((path, state), stateful, torch.Generator(), cfg)
        return str(raised.value)

    assert continuation.resume(None, _stateful_run(), torch.Generator(), cfg) == ([], [])
    changed = {"model": "resnet18", "batch_size": 8}
    other = state | {"config": saved_fields(cfg) | changed}
    differs = (
        f"{path} was written by a different run or with settings a resume keeps (differs in: model resnet18, now "
        "small_cnn; batch_size 8, now 16); put them back, or start a new run in another --output-dir"
    )
    assert refusal(other, _stateful_run()) == differs + "; with no config.yaml beside it, give its flags"
    (tmp_path / "config.yaml").write_text("epochs: 1\n")  # what make_config read: the flags given differ
    assert refusal(other, _stateful_run()) == differs
    end = "resume from the last.pt or best.pt of a run"
    for gone in (["config"], ["rng", "optimizer"], ["metrics"]):  # a hand-made file, say
        partial = {key: value for key, value in state.items() if key not in gone}
        assert refusal(partial, _stateful_run()) == f"{path} has no usable {', '.join(gone)}; {end}"
    for key, garbage in (("config", "x"), ("rng", "x"), ("model", [1, 2]), ("metrics", []), ("classes", "x")):
        assert refusal(state | {key: garbage}, _stateful_run()) == f"{path} has no usable {key}; {end}"
    for rng in ([{"torch": "x"}], []):
        assert refusal(state | {"rng": rng}, _stateful_run()).startswith(f"{path}: its random streams cannot be")
    unrestorable = f"{path}: its random streams cannot be restored ('torch'); {end}"
    assert refusal(state | {"rng": [{}]}, _stateful_run()) == unrestorable
    fresh = _stateful_run()
    fresh["model"] = torch.nn.Linear(3, 2)
    fitting = "resume with the flags the run was trained with, or start anew from its weights with --init-from"
    assert refusal(state, fresh) == (  # the mismatch itself, not load_state_dict's first line
        f"{path}: the saved model does not fit this run (size mismatch for weight: copying a param with shape "
        f"torch.Size([2, 2]) from checkpoint, the shape in current model is torch.Size([2, 3]).); {fitting}"
    )
    fresh = _stateful_run()
    weight, bias = fresh["model"].parameters()
    fresh["optimizer"] = torch.optim.SGD([{"params": [weight]}, {"params": [bias]}], lr=0.1)
    message = "loaded state dict has a different number of parameter groups"
    assert refusal(state, fresh) == f"{path}: the saved optimizer does not fit this run ({message}); {fitting}"
    fresh = _stateful_run()
    fresh["classes"] = checkpoint_file.ClassNames(["a", "c"])
    assert refusal(state, fresh) == (
        "the checkpoint was trained on the classes ['a', 'b'], but the data has ['a', 'c']; "
        "restore the data's classes, or train into a new --output-dir"
    )
    capsys.readouterr()
{% if cookiecutter.use_distributed %}
    monkeypatch.setattr(continuation, "rank", lambda: 1)
{% endif %}
    generator, fresh = torch.Generator(), _stateful_run(lr=0.1)
    assert continuation.resume((path, state), fresh, generator, cfg) == ([{"val_acc": 0.5}], [])
{% if cookiecutter.use_distributed %}
    assert torch.equal(generator.get_state(), streams[1]["loader"])  # rank 1 continues rank 1's streams
{% else %}
    assert torch.equal(generator.get_state(), streams[0]["loader"])
{% endif %}
    assert fresh["optimizer"].param_groups[0]["lr"] == pytest.approx(0.05)  # the schedule's lr after one epoch
    assert capsys.readouterr().out == f"resumed from {path} after epoch 1\n"
{% if cookiecutter.use_distributed %}
    generator = torch.Generator()
    continuation.resume((path, state | {"rng": streams[:1]}), _stateful_run(), generator, cfg)
    assert torch.equal(generator.get_state(), streams[0]["loader"])
    fallback = f"{path} was written by 1 processes: random streams continue from rank 0's"
    assert capsys.readouterr().out == f"{fallback}\nresumed from {path} after epoch 1\n"
{% endif %}


def test_resume_of_a_checkpoint_path_reads_the_config_yaml_beside_it(tmp_path, monkeypatch):
    from {{ cookiecutter.package_name }}.config import TrainConfig

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("epochs: 3\noutput_dir: .\n")
    cfg = make_config({"resume": str(run / "last.pt")})
    assert cfg.epochs == 3 and cfg.output_dir == str(run) and cfg.resume == str(run / "last.pt")
    assert make_config({"resume": str(run / "last.pt"), "epochs": 4}).epochs == 4  # flags still win
    (tmp_path / "other.yaml").write_text("epochs: 7\n")
    assert make_config({"resume": str(run / "last.pt")}, str(tmp_path / "other.yaml")).epochs == 7  # --config wins
    (tmp_path / "config.yaml").write_text("epochs: 9\n")  # auto names no file: no config.yaml is looked for
    assert make_config({"resume": "auto"}).epochs == TrainConfig().epochs
    cfg = make_config({"resume": "auto", "output_dir": str(run)})  # ... but the --output-dir it continues
    assert cfg.epochs == 3 and cfg.output_dir == str(run)
    assert make_config({"resume": str(tmp_path / "elsewhere" / "last.pt")}).epochs == TrainConfig().epochs


def test_continuing_from_a_checkpoint_of_another_name_in_its_own_folder_prints_nothing(tmp_path, capsys):
    from types import SimpleNamespace

    from {{ cookiecutter.package_name }}.core.files import save

    save({"epoch": 1}, tmp_path / "epoch1.pt")
    cfg = SimpleNamespace(resume=str(tmp_path / "epoch1.pt"), epochs=3, overwrite=False)
    assert continuation.check_continuation(tmp_path, (tmp_path / "epoch1.pt", {"epoch": 1}), cfg) is None
    assert capsys.readouterr().out == ""  # no "starting from scratch": this run does not


def test_a_gpu_checkpoint_resumes_on_a_cpu_run_without_touching_cuda(monkeypatch, _random_state_kept):
    touched = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state: touched.append(state))
    generator = torch.Generator().manual_seed(3)
    state = checkpoint_file.rng_state(generator) | {"cuda": torch.zeros(16, dtype=torch.uint8)}
    checkpoint_file.restore_rng(state, torch.Generator())
    assert touched == []


@contextlib.contextmanager
def saved_as_if_on_a_gpu():
    """torch.save tags every CPU tensor as on cuda:0, as a GPU run's file would be."""
    registry = list(torch.serialization._package_registry)
    torch.serialization.register_package(-1, lambda storage: "cuda:0" if storage.device.type == "cpu" else None, None)
    try:
        yield
    finally:
        torch.serialization._package_registry[:] = registry


def test_a_checkpoint_written_on_a_gpu_resumes_on_a_cpu_only_machine(tmp_path):
    with saved_as_if_on_a_gpu():
        weights = {"weight": torch.ones(2)}
        torch.save({"epoch": 1, "model": weights}, tmp_path / "last.pt")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):  # what a plain torch.load does with it here
            torch.load(tmp_path / "last.pt", weights_only=True)
    state = checkpoint_file.load_checkpoint(tmp_path / "last.pt")
    assert state["model"]["weight"].device == torch.device("cpu") and state["model"]["weight"].sum() == 2
{% endif %}
