"""Tests that bite: each named, single-line breakage of the all-on render must turn the generated tests that
guard it red. A test that stays green with its feature broken proves nothing; this keeps every guard honest.

Each breakage replaces one line fragment (which must occur exactly once, so a changed template fails here
loudly instead of silently testing nothing) and runs only the guarding tests, in a fresh copy of the render.
"""

import shutil
from pathlib import Path

import pytest
import smoke_child
from helpers import TRICKS, answers_for, baked_project, own_pytest_run

pytestmark = pytest.mark.slow
GUARD_TIMEOUT = 500  # the guards' own cases time out at 300 s each (own_pytest_run)

# name: (file in the package, the fragment, its broken replacement, the generated tests that must fail)
MUTATIONS = {
    "resume finds no checkpoint": (
        "checkpoint.py",
        "    return latest\n",
        "    return None\n",
        "tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise",
    ),
    "resume loads nothing": (
        "checkpoint.py",
        "obj.load_state_dict(state[name])",
        "pass",
        "tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise",
    ),
    "resume keeps the fresh random streams": (
        "checkpoint.py",
        'restore_rng(state["rng"][index], loader_generator)',
        "pass",
        "tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise",
    ),
    "clipping before unscaling under AMP": (
        "engine.py",
        "scaler.unscale_(optimizer)",
        "pass",
        "tests/test_grad_clipping.py",
    ),
    "clipping measures but does not clip": (
        "engine.py",
        "nn.utils.clip_grad_norm_(parameters, cfg.clip_grad_norm, norm_type)",
        "nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None], norm_type)",
        "tests/test_grad_clipping.py",
    ),
    "EMA never updated": ("engine.py", "ema.update_parameters(model)", "pass", "tests/test_ema.py"),
    "mixup never applied": (
        "engine.py",
        "mix(images, targets) if mix else (images, targets)",
        "(images, targets)",
        "tests/test_mixup.py",
    ),
    "label smoothing dropped": (
        "train.py",
        "label_smoothing=cfg.label_smoothing)",
        "label_smoothing=0.0)",
        "tests/test_label_smoothing.py",
    ),
    "class weights left out of the loss": (
        "train.py",
        "nn.CrossEntropyLoss(weight=data.class_weights, ",
        "nn.CrossEntropyLoss(",
        "tests/test_datasets.py::test_the_training_loss_is_weighted_by_class",
    ),
    "balanced sampler never used": (
        "data.py",
        "return BalancedSampler(dataset.targets, generator)",
        "return None",
        "tests/test_datasets.py::test_a_balanced_sampler_draws_every_class_equally_often",
    ),
    "every rank draws the same balanced share": (
        "data.py",
        "draw[self.rank :: self.world]",
        "draw[: self.count]",
        "tests/test_distributed.py::test_balanced_sampling_gives_each_rank_its_own_share_of_one_global_draw",
    ),
    "a continued run holds out anew": (
        "train.py",
        'return str(out / "split.csv") if (out / "split.csv").is_file() and not cfg.overwrite else None',
        "return None",
        "tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise",
    ),
    "evaluate ignores the run's split": (
        "inference.py",
        'overrides["split"] = str(run_dir / "split.csv")',
        "pass",
        "tests/test_datasets.py::test_evaluate_and_train_with_split_reuse_a_runs_split",
    ),
    "validation augmented": (
        "data.py",
        'augment if split == "train" else None',
        "augment",
        "tests/test_datasets.py::test_validation_never_augments",
    ),
    "--no-hflip ignored": (
        "data.py",
        "if augment and augment.hflip:",
        "if augment:",
        "tests/test_datasets.py::test_hflip_defaults_off_for_digits_and_is_saved_resolved",
    ),
    "TTA without the mirror image": (
        "inference.py",
        "(self.model(images).softmax(1) + self.model(images.flip(-1)).softmax(1)) / 2",
        "self.model(images).softmax(1)",
        "tests/test_datasets.py::test_evaluate_and_predict_with_tta_use_the_mirror_images",
    ),
    "--compile ignored": (
        "train.py",
        "torch.compile(trained) if cfg.compile else trained",
        "trained",
        "tests/test_speed_tricks.py::test_compile_trains_like_eager_and_saves_plain_weights",
    ),
    "frozen parameters keep training": (
        "freezing.py",
        "parameter.requires_grad_(False)",
        "pass",
        "tests/test_freezing.py",
    ),
    "frozen BatchNorm statistics keep updating": (
        "freezing.py",
        "module.train = types.MethodType(_stay_in_eval, module)",
        "pass",
        "tests/test_freezing.py",
    ),
    "layer-wise LR multiplier ignored": ('"lr": lr * mult,', '"lr": lr,', "tests/test_layerwise_lr.py"),
    "LR warm-up dropped": ("return (epoch + 1) / (warmup_epochs + 1)", "return 1.0", "tests/test_layerwise_lr.py"),
    "weight decay on biases and norms": (
        "decay = weight_decay if parameter.ndim > 1 else 0.0",
        "decay = weight_decay",
        "tests/test_layerwise_lr.py",
    ),
    "SyncBatchNorm never converted": (
        "sync_bn.py",
        "return nn.SyncBatchNorm.convert_sync_batchnorm(model)",
        "return model",
        "tests/test_sync_bn.py",
    ),
    "GPU ids not exported": (
        "runtime.py",
        'os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids(gpus))',
        "pass",
        "tests/test_cli.py::test_gpu_ids_are_exported_before_cuda_starts_in_a_fresh_process",
    ),
    "autocast switched off": (
        "amp.py",
        "return torch.autocast(device.type, dtype=DTYPES[precision])",
        "return contextlib.nullcontext()",
        "tests/test_amp.py",
    ),
    "DDP gradients never all-reduced": (
        "distributed.py",
        "wrapped.require_backward_grad_sync = now",
        "wrapped.require_backward_grad_sync = False",
        "tests/test_distributed.py::test_two_ranks_on_half_batches_take_the_steps_of_one_process_on_whole_batches",
    ),
    "early stopping never stops": (
        "train.py",
        'if cfg.patience and epoch - best["epoch"] >= cfg.patience:',
        "if False:",
        "tests/test_speed_tricks.py::test_patience_stops_when_validation_accuracy_stalls",
    ),
    "gradient accumulation steps every batch": (
        "engine.py",
        "update = steps + 1 == group_start + group_size",
        "update = True",
        "tests/test_speed_tricks.py",
    ),
    "channels-last ignored": (
        "train.py",
        "memory_format=torch.channels_last if cfg.channels_last else torch.preserve_format",
        "memory_format=torch.preserve_format",
        "tests/test_speed_tricks.py::test_channels_last_trains_in_that_layout_to_the_same_result",
    ),
    "a finished run taken over": (
        "train.py",
        "        check_continuation(out, found, cfg)",
        "        pass",
        "tests/test_checkpoint.py::test_a_finished_run_is_only_continued_from_its_own_newest_checkpoint_with_more_epochs",
    ),
    "writes follow planted links": (
        "files.py",
        "        os.replace(temporary, path)",
        "        path.write_bytes(Path(temporary).read_bytes())",
        "tests/test_errors.py::test_writes_replace_planted_symlinks_instead_of_following_them",
    ),
    "rendezvous store on every interface": (
        "distributed.py",
        "with _stores_on_loopback():",
        "with contextlib.nullcontext():",
        "tests/test_distributed.py::test_a_one_machine_job_listens_on_loopback_only",
    ),
    "EMA warm-up dropped": (
        "ema.py",
        "torch.clamp((1 + updates) / (10 + updates), max=decay)",
        "torch.clamp((1 + updates) / (10 + updates), min=decay, max=decay)",
        "tests/test_ema.py",
    ),
    "train accuracy under mixup against the original labels": (
        "engine.py",
        "targets = soft_targets.argmax(1) if mix else targets",
        "targets = targets",
        "tests/test_mixup.py",
    ),
    "DataLoader workers take the stop signals": (
        "runtime.py",
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
        "pass",
        "tests/test_checkpoint.py::test_a_signal_to_the_whole_process_group_stops_once_without_a_traceback",
    ),
    "BatchNorm statistics of MobileNetV3 left slow from scratch": (
        "models.py",
        "module.momentum = FROM_SCRATCH_MOMENTUM",
        "pass",
        "tests/test_model.py::test_each_prompted_model_learns_the_synthetic_set_from_scratch[mobilenet_v3_small]",
    ),
    "NaN/Inf guard removed": (
        "engine.py",
        "first_bad_step = torch.where(",
        "_ = torch.where(",
        "tests/test_checkpoint.py::test_a_diverging_run_keeps_the_last_good_checkpoint",
    ),
    "a step fp16's scaler skipped still moves the EMA": (
        "engine.py",
        "if ema and stepped:",
        "if ema:",
        "tests/test_amp.py::test_a_step_the_scaler_skips_leaves_no_trace_in_the_statistics",
    ),
    "a step fp16's scaler skipped still counts in grad_norm": (
        "engine.py",
        "if cfg.clip_grad_norm and stepped:",
        "if cfg.clip_grad_norm:",
        "tests/test_amp.py::test_a_step_the_scaler_skips_leaves_no_trace_in_the_statistics",
    ),
    "more workers than visible GPUs": (
        "distributed.py",
        "if cuda and workers > torch.cuda.device_count():",
        "if False:",
        "tests/test_distributed.py::test_more_workers_than_visible_gpus_is_one_clear_error",
    ),
    "every visible GPU's random state": (
        "checkpoint.py",
        'state["cuda"] = torch.cuda.get_rng_state()',
        'state["cuda"] = torch.cuda.get_rng_state_all()',
        "tests/test_checkpoint.py::test_a_gpu_run_keeps_the_random_state_of_its_own_gpu_only",
    ),
    "--init-from loads nothing": (
        "models.py",
        "    model.load_state_dict(taken, strict=False)\n",
        "",
        "tests/test_model.py::test_init_from_takes_every_tensor_that_fits_and_reports_the_head_it_leaves",
    ),
    "activation checkpointing keeps every activation": (
        "models.py",
        "return checkpoint(super().forward, *args, use_reentrant=False)",
        "return super().forward(*args)",
        "tests/test_model.py::test_activation_checkpointing_keeps_loss_and_gradients_and_keeps_fewer_tensors",
    ),
    "the L1 penalty not added to the loss": (
        "optim.py",
        "return self.loss(logits, targets) + penalty",
        "return self.loss(logits, targets)",
        "tests/test_train.py::test_l1_adds_the_hand_computed_penalty_of_trainable_weights_only",
    ),
    "data and model that do not fit reach the first step": (
        "train.py",
        "    check_fits(model, sample, len(data.classes), cfg)  # T47\n",
        "",
        "tests/test_errors.py::test_data_and_model_that_do_not_fit_stop_before_the_first_step",
    ),
    "the EMA counter read on the host": (
        "ema.py",
        "* (updates > 0)",
        "* float(updates > 0)",
        "tests/test_ema.py::test_an_update_reads_nothing_on_the_host",
    ),
}
# The optimizer lines live in optim.py; a 3-tuple names no file.
MUTATIONS = {name: spec if len(spec) == 4 else ("optim.py", *spec) for name, spec in MUTATIONS.items()}


@pytest.fixture(scope="module")
def all_on(cookies_session) -> Path:
    return baked_project(cookies_session, **answers_for(TRICKS))


@pytest.mark.parametrize("name", MUTATIONS)
def test_each_breakage_is_caught_by_the_tests_that_guard_it(name, all_on, tmp_path, forkserver):
    file, fragment, broken, guards = MUTATIONS[name]
    project = tmp_path / "project"
    shutil.copytree(all_on, project, ignore=shutil.ignore_patterns("__pycache__"))
    source = next((project / "src").glob(f"*/{file}"))
    text = source.read_text()
    assert text.count(fragment) == 1, f"{name}: {fragment!r} must occur once in {file}; update MUTATIONS"
    source.write_text(text.replace(fragment, broken))
    log = tmp_path / "guards.log"
    args = ["-x", "-q", *own_pytest_run(), *guards.split()]
    guard = forkserver.Process(target=smoke_child.pytest_in, args=(str(project), args, str(log)))
    guard.start()
    guard.join(GUARD_TIMEOUT)
    if guard.is_alive():
        guard.kill()
        pytest.fail(f"{name}: the guarding tests ran past {GUARD_TIMEOUT} s")
    output = log.read_text().strip()
    summary = output.splitlines()[-1] if output else "no output"
    # exit 1: tests ran and failed. 2-5 (collection error, no tests, ...) would be a broken test, not a catch.
    assert guard.exitcode == 1, f"{name} was not caught by {guards}: {summary}"
