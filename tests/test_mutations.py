"""Tests that bite: each named, single-line breakage of the all-on render must turn the generated tests that
guard it red. A test that stays green with its feature broken proves nothing; this keeps every guard honest.

Each breakage replaces one line fragment (which must occur exactly once, so a changed template fails here
loudly instead of silently testing nothing) and runs only the guarding tests, in a fresh copy of the render.
"""

import functools
import itertools
import shutil
from pathlib import Path

import pytest
from render import GENERATED_TESTS, baked_project
from runners import own_pytest_run, pytest_in_fork
from tricks import ENTRIES, NAMED

MULTI_LABEL_RENDER = (("task", "multi_label"),)  # all-on, multi-label, with MLflow
# the multi-label render's own breakages (tests/tricks.py MULTI_LABEL names them)
MULTI_LABEL_MUTATIONS = {
    "the positives' weights left out of the multi-label loss": (
        "task.py",
        "nn.BCEWithLogitsLoss(pos_weight=class_weights)",
        "nn.BCEWithLogitsLoss()",
        "tests/test_multi_label.py::test_the_loss_is_binary_cross_entropy_with_each_classes_negatives_per_positive",
    ),
    "AP without its ties grouped": (
        "reports/multi_label.py",
        "    group_ends[:-1] = ranked[:-1] != ranked[1:]\n",
        "    pass\n",
        "tests/test_multi_label_metrics.py",
    ),
    "validation figures at 0.5 whatever --threshold": (
        "train.py",
        "cfg.max_steps_per_epoch, cfg.threshold)",
        "cfg.max_steps_per_epoch)",
        "tests/test_multi_label.py::test_the_logged_figures_are_scikit_learns_at_the_threshold",
    ),
    "predict ignores the fitted thresholds": (
        "inference.py",
        "    thresholds = load_thresholds(weights, classes, cfg.threshold)\n    model = _with_tta",
        "    thresholds = torch.full((len(classes),), cfg.threshold)\n    model = _with_tta",
        "tests/test_multi_label.py::test_fitted_thresholds_give_each_class_its_best_f1_and_predict_and_export_use_them",
    ),
    "export drops the fitted thresholds": (
        "export.py",
        "thresholds = load_thresholds(weights, classes, cfg.threshold).tolist()",
        "thresholds = None",
        "tests/test_multi_label.py::test_fitted_thresholds_give_each_class_its_best_f1_and_predict_and_export_use_them",
    ),
    "the hold-out leaves a class out of validation": (
        "data/multi_label.py",
        "            part[movable[0]] = empty\n",
        "            pass\n",
        "tests/test_multi_label_data.py",
    ),
    "validation figures of one process's images under DDP": (
        "distributed.py",
        "        return torch.cat([part[: int(count)] for part, count in zip(parts, counts, strict=True)])",
        "        return tensor",
        "tests/test_distributed.py::test_two_ranks_validate_to_the_figures_of_one_process",
    ),
    "each class's precision-recall points with recall for precision": (
        "reports/multi_label.py",
        "float(found / predicted[index, column])",
        "float(found / positives)",
        "tests/test_multi_label.py::test_each_classes_precision_recall_points_are_scikit_learns_and_the_run_draws_them",
    ),
    "multi-label smoothing dropped": (
        "label_smoothing.py",
        "targets * (1 - eps) + eps / 2",
        "targets",
        "tests/test_label_smoothing.py",
    ),
}
GUARD_TIMEOUT = 500  # the guards' own cases time out at 300 s each (own_pytest_run)

# name: (file in the package, the fragment, its broken replacement, the generated tests that must fail)
MUTATIONS = {
    "resume finds no checkpoint": (
        "continuation.py",
        "    return latest\n",
        "    return None\n",
        "tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise",
    ),
    "resume loads nothing": (
        "continuation.py",
        "obj.load_state_dict(state[name])",
        "pass",
        "tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise",
    ),
    "resume keeps the fresh random streams": (
        "continuation.py",
        'restore_rng(state["rng"][index], loader_generator)',
        "pass",
        "tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise",
    ),
    "clipping before unscaling under AMP": (
        "amp.py",
        "self.scaler.unscale_(optimizer)",
        "pass",
        "tests/test_grad_clipping.py",
    ),
    "clipping measures but does not clip": (
        "grad_clipping.py",
        "nn.utils.clip_grad_norm_(model.parameters(), self.max_norm, self.norm_type)",
        "nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None], self.norm_type)",
        "tests/test_grad_clipping.py",
    ),
    "EMA never updated": ("engine.py", "trick.after_step(model)", "pass", "tests/test_ema.py"),
    "mixup never applied": (
        "engine.py",
        "images, targets = trick.batch(images, targets)",
        "pass",
        "tests/test_mixup.py",
    ),
    "label smoothing dropped": (
        "label_smoothing.py",
        "label_smoothing=self.eps)",
        "label_smoothing=0.0)",
        "tests/test_label_smoothing.py",
    ),
    "class weights left out of the loss": (
        "task.py",
        "nn.CrossEntropyLoss(weight=class_weights)",
        "nn.CrossEntropyLoss()",
        "tests/test_datasets.py::test_the_training_loss_is_weighted_by_class",
    ),
    "balanced sampler never used": (
        "samplers.py",
        "return BalancedSampler(dataset.targets, generator)",
        "return None",
        "tests/test_datasets.py::test_a_balanced_sampler_draws_every_class_equally_often",
    ),
    "every rank draws the same balanced share": (
        "samplers.py",
        "draw[self.rank :: self.world]",
        "draw[: self.count]",
        "tests/test_distributed.py::test_balanced_sampling_gives_each_rank_its_own_share_of_one_global_draw",
    ),
    "a continued run holds out anew": (
        "train.py",
        '    return next((str(folder / "split.csv") for folder in folders if (folder / "split.csv").is_file()), None)',
        "    return None",
        "tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise",
    ),
    "evaluate ignores the run's split": (
        "inference.py",
        'overrides["split"] = str(run_dir / "split.csv")',
        "pass",
        "tests/test_datasets.py::test_evaluate_and_train_with_split_reuse_a_runs_split",
    ),
    "validation augmented": (
        "loaders.py",
        'augment if split == "train" else None',
        "augment",
        "tests/test_datasets.py::test_validation_never_augments",
    ),
    "--no-hflip ignored": (
        "transforms.py",
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
    "layer-wise LR multiplier ignored": (
        "layerwise_lr.py",
        '"lr": self.lr * mult,',
        '"lr": self.lr,',
        "tests/test_layerwise_lr.py",
    ),
    "LR warm-up dropped": ("return (epoch + 1) / (warmup_epochs + 1)", "return 1.0", "tests/test_layerwise_lr.py"),
    "weight decay on biases and norms": (
        '{"params": [p for p in trainable if p.ndim <= 1], "weight_decay": 0.0}',
        '{"params": [p for p in trainable if p.ndim <= 1], "weight_decay": weight_decay}',
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
        "if stopped_early(rows, cfg.patience):",
        "if False:",
        "tests/test_speed_tricks.py::test_patience_stops_when_validation_accuracy_stalls",
    ),
    "gradient accumulation steps every batch": (
        "engine.py",
        "update = progress.step + 1 == group_start + group_size",
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
        "checkpoint.py",
        "        check_continuation(self.out, self.found, self.cfg)",
        "        pass",
        "tests/test_checkpoint.py::test_a_finished_run_is_only_continued_from_its_own_newest_checkpoint_with_more_epochs",
    ),
    "writes follow planted links": (
        "files.py",
        "            os.fsync(file.fileno())\n        os.replace(temporary, path)",
        "            os.fsync(file.fileno())\n        path.write_bytes(Path(temporary).read_bytes())",
        "tests/test_errors.py::test_writes_replace_planted_symlinks_instead_of_following_them",
    ),
    "rendezvous store on every interface": (
        "launcher.py",
        "with _stores_on_loopback():",
        "with contextlib.nullcontext():",
        "tests/test_distributed.py::test_a_one_machine_job_listens_on_loopback_only",
    ),
    "EMA warm-up dropped": (
        "ema.py",
        "torch.clamp((1 + updates) / (10 + updates), max=self.decay)",
        "torch.clamp((1 + updates) / (10 + updates), min=self.decay, max=self.decay)",
        "tests/test_ema.py",
    ),
    "train accuracy under mixup not against each image's larger share": (
        "metrics.py",
        "labels = targets if targets.ndim == 1 else targets.argmax(1)",
        "labels = targets if targets.ndim == 1 else targets.argmax(1) * 0",
        "tests/test_mixup.py",
    ),
    "DataLoader workers take the stop signals": (
        "runtime.py",
        "signal.signal(number, signal.SIG_IGN)",
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
    "a step fp16's scaler skipped still moves the EMA and counts in grad_norm": (  # the one after-step block
        "amp.py",
        "return scaled_step(self.scaler, optimizer)",
        "return scaled_step(self.scaler, optimizer) or True",
        "tests/test_amp.py::test_a_step_the_scaler_skips_leaves_no_trace_in_the_statistics",
    ),
    "more workers than visible GPUs": (
        "launcher.py",
        "if cuda and workers > torch.cuda.device_count():",
        "if False:",
        "tests/test_distributed.py::test_more_workers_than_visible_gpus_is_one_clear_error",
    ),
    "every visible GPU's random state": (
        "checkpoint_file.py",
        "state[accelerator.type] = torch.get_device_module(accelerator).get_rng_state()",
        "state[accelerator.type] = torch.get_device_module(accelerator).get_rng_state_all()",
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
        "    check_fits(model, sample, len(data.classes), cfg)\n",
        "",
        "tests/test_errors.py::test_data_and_model_that_do_not_fit_stop_before_the_first_step",
    ),
    "the EMA counter read on the host": (
        "ema.py",
        "* (updates > 0)",
        "* float(updates > 0)",
        "tests/test_ema.py::test_an_update_reads_nothing_on_the_host",
    ),
    # Issue 22: breakages an independent audit found uncaught
    "a hold-out floored instead of rounded": (
        "layouts.py",
        "max(round(fraction * len(members)), 1)",
        "max(int(fraction * len(members)), 1)",
        "tests/test_datasets.py::test_a_hold_out_rounds_each_class_share_to_the_nearest_image",
    ),
    "a CSV's byte-order mark read into its first column name": (
        "layouts.py",
        'encoding="utf-8-sig"',
        'encoding="utf-8"',
        "tests/test_datasets.py::test_a_csv_saved_with_a_byte_order_mark_keeps_its_first_column",
    ),
    "hidden files taken for images": (
        "layouts.py",
        ' or path.name.startswith("."):\n',
        ":\n",
        "tests/test_datasets.py::test_hidden_files_beside_the_images_are_not_images",
    ),
    "an empty label taken for a class": (
        "layouts.py",
        "if not name or not label:",
        "if not name:",
        "tests/test_datasets.py::test_bad_csv_rows_are_one_clear_error_naming_the_line",
    ),
    "AutoAugment's ImageNet policy on cifar10": (
        "transforms.py",
        'v2.AutoAugmentPolicy.CIFAR10 if source == "cifar10" else v2.AutoAugmentPolicy.IMAGENET',
        "v2.AutoAugmentPolicy.IMAGENET",
        "tests/test_datasets.py::test_autoaugment_takes_the_cifar10_policy_on_cifar10_and_imagenets_elsewhere",
    ),
    "random erasing before normalisation": (
        "transforms.py",
        "steps.append(v2.RandomErasing(p=augment.random_erasing, value=mean_colour))",
        "steps.insert(-1, v2.RandomErasing(p=augment.random_erasing, value=mean_colour))",
        "tests/test_datasets.py::test_random_erasing_fills_with_the_mean_colour_after_normalisation",
    ),
    "normalisation statistics of the first images": (
        "transforms.py",
        "picked = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))[:samples]",
        "picked = torch.arange(len(dataset))[:samples]",
        "tests/test_data.py::test_normalisation_statistics_come_from_a_random_sample_of_sorted_data",
    ),
    "the loader's generator ignores --seed": (
        "loaders.py",
        "    loader.order.manual_seed(hash((loader.dataset.seed, epoch)) % 2**63)",
        "    loader.order.manual_seed(hash((0, epoch)) % 2**63)",
        "tests/test_data.py::test_the_training_order_follows_the_seed",
    ),
    "DDP validation padded to even out the ranks": (
        "samplers.py",
        'DistributedSampler(dataset, seed=cfg.seed) if split == "train" else ShardSampler(dataset)',
        'DistributedSampler(dataset, seed=cfg.seed, shuffle=split == "train")',
        "tests/test_distributed.py::test_two_ranks_validate_to_the_figures_of_one_process",
    ),
    "DDP validation loss not summed over the ranks": (
        "engine.py",
        "    runtime.total(loss_sum)\n",
        "",
        "tests/test_distributed.py::test_two_ranks_validate_to_the_figures_of_one_process",
    ),
    "F1 as the mean of precision and recall": (
        "metrics.py",
        "f1 = 2 * precision * recall / (precision + recall).clamp_min(1e-12)",
        "f1 = (precision + recall) / 2",
        "tests/test_reports.py::test_report_and_confusion_csv_equal_scikit_learns_on_an_asymmetric_case",
    ),
    "confusion_matrix.csv transposed": (
        "metrics.py",
        "zip(classes, matrix.tolist(), strict=True)",
        "zip(classes, matrix.T.tolist(), strict=True)",
        "tests/test_reports.py::test_report_and_confusion_csv_equal_scikit_learns_on_an_asymmetric_case",
    ),
    "the EMA figures measured on the trained model": (
        "ema.py",
        "averaged = validate(self.average.module)",
        "averaged = validate(model)",
        "tests/test_ema.py::test_the_logged_figures_of_the_average_are_those_of_ema_pt",
    ),
    "the EMA decay fixed whatever --ema-decay": (
        "ema.py",
        "return MovingAverage(cfg.ema_decay) if cfg.ema_decay else None",
        "return MovingAverage(0.999) if cfg.ema_decay else None",
        "tests/test_ema.py::test_the_saved_average_is_the_decay_folded_over_the_weights_of_every_step",
    ),
    "best.pt chosen by validation loss": (
        "checkpoint_file.py",
        "metrics[-1][MONITOR] > max((row[MONITOR] for row in metrics[:-1]), default=-1.0):",
        'metrics[-1]["val_loss"] < min((row["val_loss"] for row in metrics[:-1]), default=float("inf")):',
        "tests/test_checkpoint.py::test_best_pt_is_the_epoch_of_the_best_monitored_figure_not_of_the_lowest_loss",
    ),
    "--overwrite keeps the old split.csv": (
        "train.py",
        "folders = [] if cfg.overwrite else [out]",
        "folders = [out]",
        "tests/test_datasets.py::test_overwrite_holds_out_anew_from_the_data_as_it_is_now",
    ),
    "grad_norm summed over the optimizer steps, not averaged": (
        "grad_clipping.py",
        "self.norm_sum.item() / self.steps if self.steps else 0.0",
        "self.norm_sum.item() if self.steps else 0.0",
        "tests/test_grad_clipping.py::test_the_logged_norm_is_the_mean_over_optimizer_steps_not_batches",
    ),
    "SGD momentum fixed whatever --momentum": (
        "optim.py",
        "lr=cfg.lr, momentum=cfg.momentum,",
        "lr=cfg.lr, momentum=0.9,",
        "tests/test_config.py::test_each_option_reaches_what_it_configures",
    ),
    "the seed left out of config.yaml": (
        "config/__init__.py",
        'PER_INVOCATION = {"overwrite", "init_from"}',
        'PER_INVOCATION = {"overwrite", "init_from", "seed"}',
        "tests/test_config.py::test_config_yaml_replays_every_field_but_the_per_invocation_flags",
    ),
    "activation checkpointing skips ResNet's last stage": (
        "models.py",
        '("layer1", "layer2", "layer3", "layer4")',
        '("layer1", "layer2", "layer3")',
        "tests/test_model.py::test_activation_checkpointing_recomputes_every_stage",
    ),
    # Issue 23: what users met
    "class names read back split at spaces": (
        "inference.py",
        'read_text(encoding="utf-8").splitlines()',
        'read_text(encoding="utf-8").split()',
        "tests/test_datasets.py::test_class_names_with_spaces_survive_the_whole_run",
    ),
    "checkpoints without their class names": (
        "checkpoint.py",
        'self.stateful = stateful | {"classes": ClassNames(data.classes)}',
        "self.stateful = stateful",
        "tests/test_checkpoint.py::test_a_resume_onto_data_with_other_classes_is_refused",
    ),
    "a second run into a folder in use": (
        "run_folder.py",
        "        if lock is None:\n            raise OutputError(BUSY.format(self.path))\n",
        "",
        "tests/test_run_folder.py::test_a_second_run_into_a_folder_in_use_stops_with_one_line",
    ),
    "--overwrite keeps the old run's files": (
        "run_folder.py",
        "        if self.overwrite:",
        "        if False:",
        "tests/test_run_folder.py::test_overwrite_starts_from_an_empty_run_folder_and_keeps_other_files",
    ),
    "a folder of the user's files taken for a run": (
        "run_folder.py",
        "if visible and not all(marker in self.seen for marker in MARKERS):",
        "if False:",
        "tests/test_run_folder.py::test_a_folder_of_other_files_is_refused_and_left_as_it_was",
    ),
    "leftovers of killed writes kept": (
        "run_folder.py",
        'old = [*self.path.glob(".*.tmp"), *self.path.glob(".*.tmp.*")]',
        "old = []",
        "tests/test_run_folder.py::test_overwrite_starts_from_an_empty_run_folder_and_keeps_other_files",
    ),
    "a saved config points at the folder it was written in": (
        "config/__init__.py",
        'saved_fields(cfg) | {"output_dir": "."}',
        "saved_fields(cfg)",
        "tests/test_checkpoint.py::test_a_copied_run_continues_in_the_copy_from_any_folder",
    ),
    "--resume PATH ignores its run's config": (
        "config/__init__.py",
        "        run_dir = Path(resume).parent",
        "        run_dir = None",
        "tests/test_checkpoint.py::test_resume_from_a_checkpoint_continues_its_run_with_its_config",
    ),
    "an image listed twice in a CSV": (
        "layouts.py",
        "if (image.st_dev, image.st_ino) in first_listed:",
        "if False:",
        "tests/test_datasets.py::test_bad_csv_rows_are_one_clear_error_naming_the_line",
    ),
    "predict writes over any file": (
        "predictions.py",
        "    _check_output(Path(output))",
        "    pass",
        "tests/test_run_folder.py::test_predict_never_writes_over_a_file_that_holds_no_predictions",
    ),
    "a link planted for an evaluation folder followed": (
        "files.py",
        "if replace_link and path.is_symlink():",
        "if False:",
        "tests/test_run_folder.py::test_a_planted_link_in_place_of_an_evaluation_folder_is_replaced",
    ),
    "NaN options accepted": (
        "config/__init__.py",
        "isinstance(v, float) and math.isnan(v)",
        "False",
        "tests/test_errors.py::test_bad_options_get_their_exit_code",
    ),
    "class names in plots parsed as math": (
        "plots.py",
        "rotation=90, parse_math=False",
        "rotation=90",
        "tests/test_reports.py::test_class_names_are_drawn_as_text_not_as_math",
    ),
    "evaluations of other data share a folder": (
        "inference.py",
        "-{name}-{where}{",
        "-{name}{",
        "tests/test_run_folder.py::test_evaluations_of_other_data_or_with_tta_get_folders_of_their_own",
    ),
    "a failed torch.save is a traceback": (
        "files.py",
        '            raise OSError(f"the write failed: {first_line(exc)}") from None',
        "            raise",
        "tests/test_run_folder.py::test_a_full_disk_during_training_is_one_line",
    ),
    # Issue 23, second pass: what an adversarial review still got through
    "every parameter frozen": (
        "freezing.py",
        "if all(matches_any(name, patterns) for name, _ in model.named_parameters()):",
        "if False:",
        "tests/test_freezing.py::test_freezing_every_parameter_is_refused_before_anything_changes",
    ),
    "an --lr-mult that sets no rate accepted": (
        "layerwise_lr.py",
        "        if unused:",
        "        if False:",
        "tests/test_layerwise_lr.py::test_a_pattern_whose_parameters_all_go_elsewhere_is_refused",
    ),
    "a resume into a new folder holds out anew": (
        "train.py",
        "        folders.append(Path(cfg.resume).parent)",
        "        pass",
        "tests/test_checkpoint.py::test_a_resume_into_a_new_folder_validates_on_the_images_the_run_held_out",
    ),
    "--resume auto ignores its run's config": (
        "config/__init__.py",
        '        run_dir = Path(cli_values["output_dir"])',
        "        pass",
        "tests/test_checkpoint.py::test_resume_from_a_checkpoint_continues_its_run_with_its_config",
    ),
    "--init-from silent about other classes": (
        "models.py",
        'if source_classes and source_classes != classes and not left["other shape (left as built)"]:',
        "if False:",
        "tests/test_model.py::test_init_from_weights_of_as_many_other_classes_says_the_output_layer_was_theirs",
    ),
    "a link beside its image in a CSV": (
        "layouts.py",
        "image = (root / name).stat()",
        "image = (root / name).lstat()",
        "tests/test_layouts.py::test_an_image_listed_twice_under_two_names_is_refused_naming_both_lines",
    ),
    "plot of an empty metrics.csv is a traceback": (
        "plots.py",
        "    if not rows:  # the header alone tells nothing to draw either",
        "    if False:",
        "tests/test_reports.py::test_plot_names_a_malformed_csv_in_one_line_and_draws_nothing",
    ),
    "features writes beside the folder it was given": (
        "inference.py",
        "out = _features_file(output) if output else",
        'out = Path(output).with_suffix(".npy") if output else',
        "tests/test_features.py::test_features_output_must_name_a_npy_file_and_a_bare_name_gets_the_suffix",
    ),
    "a missing folder told to free some space": (
        "files.py",
        'advice = ADVICE.get(errno.errorcode.get(exc.errno), "free some space or pick a writable folder")',
        'advice = "free some space or pick a writable folder"',
        "tests/test_files.py::test_the_advice_on_a_failed_write_fits_its_reason",
    ),
    "torch's weights_only=False advice relayed": (
        "errors.py",
        'if isinstance(exc, pickle.UnpicklingError) and "weights_only" in str(exc):',
        "if False:",
        "tests/test_checkpoint.py::test_only_checkpoints_of_plain_data_are_loaded",
    ),
    "--lr-mult given twice keeps the last": (
        "layerwise_lr.py",
        "        if pattern in mults:",
        "        if False:",
        "tests/test_layerwise_lr.py::test_a_pattern_given_twice_is_refused_not_overwritten",
    ),
    "one image in two class folders": (
        "layouts.py",
        "            if (image.st_dev, image.st_ino) in first_seen:",
        "            if False:",
        "tests/test_layouts.py::test_one_image_under_two_names_in_class_folders_is_refused_naming_both",
    ),
    "plot draws impossible counts": (
        "plots.py",
        "            if not 0 <= count < 2**63:",
        "            if False:",
        "tests/test_reports.py::test_plot_names_a_malformed_csv_in_one_line_and_draws_nothing",
    ),
    "a resumed run's config.yaml points at the old run's split": (
        "train.py",
        "save_config(dataclasses.replace(cfg, split=None) if data.rows else cfg,",
        "save_config(cfg,",
        "tests/test_checkpoint.py::test_a_resume_into_a_new_folder_validates_on_the_images_the_run_held_out",
    ),
    "garbled random streams a traceback": (
        "continuation.py",
        "    except (AttributeError, IndexError, KeyError, RuntimeError, TypeError, ValueError) as exc:\n"
        '        raise ModelError(f"{path}: its random streams',
        '    except ZeroDivisionError as exc:\n        raise ModelError(f"{path}: its random streams',
        "tests/test_checkpoint.py::test_resume_restores_each_object_and_the_streams_of_its_own_rank",
    ),
    # Issue 23's remaining user-facing items (12, 17, 25, 27, 30)
    "a decompression bomb a traceback": (
        "decoding.py",
        "    except Image.DecompressionBombError:",
        "    except ZeroDivisionError:",
        "tests/test_datasets.py::test_an_image_too_large_to_open_safely_is_named_and_predict_skips_it",
    ),
    "a config file in another encoding a traceback": (
        "config/__init__.py",
        "    except UnicodeDecodeError:",
        "    except ZeroDivisionError:",
        "tests/test_errors.py::test_bad_config_files_exit_2",
    ),
    "terminal escapes in class names printed raw": (
        "layouts.py",
        'if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in name):',
        "if False:",
        "tests/test_layouts.py::test_a_class_name_holding_a_control_character_is_refused",
    ),
    "--std 0 divides by zero": (
        "config/__init__.py",
        "if self.std is not None and not all(0 < value < math.inf for value in self.std):",
        "if False:",
        "tests/test_errors.py::test_bad_options_get_their_exit_code",
    ),
    "features of a block refused": (
        "inference.py",
        "if layer not in modules and layer not in _graph_nodes(model):",
        "if layer not in _graph_nodes(model):",
        "tests/test_features.py::test_features_of_a_block_and_suggestions_by_closeness",
    ),
    "--help waits for torch": (
        "cli.py",
        "import argparse\n",
        "import argparse\n\nimport torch  # noqa: F401\n",
        "tests/test_cli.py::test_help_answers_without_importing_torch",
    ),
    "the CPU notice to whoever chose the CPU": (
        "runtime.py",
        'if requested == "cpu" or (requested == "auto" and not gpu_ids(gpus)):',
        'if requested == "cpu":',
        "tests/test_cli.py::test_auto_device_falls_back_to_cpu_with_one_line_unless_the_cpu_was_chosen",
    ),
    "the stop notice glued to the echoed ^C": (
        "stop_signals.py",
        'fresh_line = "\\n" if sys.stderr.isatty() else ""',
        'fresh_line = ""',
        "tests/test_checkpoint.py::test_the_stop_notice_starts_on_a_line_of_its_own_in_a_terminal",
    ),
    "fractional epochs on the learning curves": (
        "plots.py",
        "axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))",
        "pass",
        "tests/test_reports.py::test_learning_curves_count_epochs_in_whole_numbers",
    ),
    "predictions.csv in CRLF": (
        "predictions.py",
        'writer = csv.DictWriter(file, fieldnames=list(rows[0]), lineterminator="\\n")',
        "writer = csv.DictWriter(file, fieldnames=list(rows[0]))",
        "tests/test_run_folder.py::test_predict_never_writes_over_a_file_that_holds_no_predictions",
    ),
    "a hand-made checkpoint's missing keys a traceback": (
        "continuation.py",
        "    if unusable:",
        "    if False:",
        "tests/test_checkpoint.py::test_resume_restores_each_object_and_the_streams_of_its_own_rank",
    ),
    "accumulation clips each batch's partial gradient, not the group's mean": (
        "engine.py",
        "        runtime.backward(loss / group_size)\n",
        "        runtime.backward(loss / group_size)\n"
        "        for trick in tricks if not update else ():\n"
        "            trick.before_step(model)\n",
        "tests/test_speed_tricks.py::test_accumulating_k_batches_of_b_equals_one_batch_of_kb",
    ),
    "a cut-short last.pt stops --resume auto": (
        "continuation.py",
        '            print(f"skipping {exc}")\n            continue',
        "            raise",
        "tests/test_checkpoint.py::test_resume_auto_falls_back_to_best_when_last_is_empty_and_refuses_weights_files",
    ),
    # Issue 25: timm models and export
    "the sidecar's mean and std swapped": (
        "export.py",
        '"mean": cfg.mean,\n        "std": cfg.std,',
        '"mean": cfg.std,\n        "std": cfg.mean,',
        "tests/test_export.py::test_each_format_gives_pytorchs_logits_at_any_batch_size_and_carries_its_preprocessing",
    ),
    "ONNX without a dynamic batch axis": (
        "export.py",
        "dynamic_shapes=({0: BATCH},), opset_version=ONNX_OPSET",
        "opset_version=ONNX_OPSET",
        "tests/test_export.py::test_each_format_gives_pytorchs_logits_at_any_batch_size_and_carries_its_preprocessing",
    ),
    "an exported program without a dynamic batch axis": (
        "export.py",
        "torch.export.export(model, (example,), dynamic_shapes=({0: BATCH},))",
        "torch.export.export(model, (example,))",
        "tests/test_export.py::test_each_format_gives_pytorchs_logits_at_any_batch_size_and_carries_its_preprocessing",
    ),
    "an export's parity never compared": (
        "export.py",
        "        if not difference <= tolerance:",
        "        if False:",
        "tests/test_export.py::test_an_export_that_differs_from_pytorch_is_refused_and_nothing_is_written",
    ),
    "gray images prepared in colour by predict --model-file": (
        "deployed.py",
        'steps = [v2.ToImage(), v2.Grayscale(num_output_channels=3)] if given["grayscale"] else [v2.ToImage()]',
        "steps = [v2.ToImage()]",
        "tests/test_export.py::test_the_sidecars_preprocessing_is_the_validation_transform",
    ),
    "an ONNX file's weights file left under a temporary name": (
        "export.py",
        "os.replace(folder / data.name, data)",
        "pass",
        "tests/test_export.py::test_an_onnx_file_over_2_gb_ships_with_its_weights_file_and_kills_leave_nothing",
    ),
    "predict's probe in another grad mode than its predictions": (
        "deployed.py",
        "with torch.inference_mode():  # as predict_images runs it",
        "with torch.enable_grad():  # as predict_images runs it",
        "tests/test_export.py::test_a_timm_vit_predicts_from_each_exported_format",
    ),
    "a NaN mean in a sidecar accepted": (
        "deployed.py",
        "if not all(math.isfinite(value) for value in values):",
        "if False:",
        "tests/test_export.py::test_bad_export_and_model_file_requests_are_one_line",
    ),
    "features of a module traced by torch.fx": (
        "inference.py",
        "extractor = _module_output(model, layer) if layer in modules else _node_output(model, layer)",
        "extractor = _node_output(model, layer)",
        "tests/test_timm.py::test_features_of_a_model_torch_fx_cannot_trace_come_from_its_modules",
    ),
    "16-bit images clipped to white": (
        "decoding.py",
        'if image.mode.startswith("I"):',
        "if False:",
        "tests/test_data.py::test_a_16_bit_image_keeps_its_shades",
    ),
    "timm's pretrained normalisation ignored": (
        "models.py",
        "return config.input_size[-1], list(config.mean), list(config.std)",
        "return config.input_size[-1], IMAGENET_MEAN, IMAGENET_STD",
        "tests/test_timm.py::test_pretrained_timm_weights_bring_their_own_normalisation_and_image_size",
    ),
    "timm's BatchNormAct2d converted without its activation": (
        "sync_bn.py",
        'if type(model).__module__.startswith("timm."):',
        "if False:",
        "tests/test_timm.py::test_sync_bn_keeps_the_activation_of_timms_batchnorm",
    ),
    "data workers killed under the DataLoader's SIGCHLD handler": (
        "cli.py",
        "    previous = signal.signal(sigchld, signal.SIG_DFL) if sigchld else None\n"
        "    for child in children:\n        child.kill()\n"
        "    for child in children:\n        child.join()\n"
        "    if sigchld:\n        signal.signal(sigchld, previous)",
        "    for child in children:\n        child.kill()",  # as it was: a kill the handler sees
        "tests/test_errors.py::test_data_workers_stopped_after_an_error_are_not_reported_as_failed_workers",
    ),
    # Issue 26: the trackers. The all-on render logs to MLflow; a 5th item names another tracker's render.
    "the tracked run's id not kept in the checkpoint": (
        "tracked.py",
        'return super().restore(stateful | {"tracker": self.tracker}, data, cfg)',
        "return super().restore(stateful, data, cfg)",
        "tests/test_tracking.py::test_a_resumed_run_logs_into_the_same_tracked_run",
    ),
    "a tracker's exception stops the training run": (
        "tracking.py",
        "        except Exception as exc:  # noqa: BLE001 (whatever the library raises)",
        "        except ZeroDivisionError as exc:",
        "tests/test_tracking.py::test_a_tracker_failing_on_its_third_call_leaves_the_same_training_run",
    ),
    "the parameters not logged": (
        "tracking.py",
        "        self.run.log_batch(self.run_id, params=params)",
        "        pass",
        "tests/test_tracking.py::test_the_hyperparameters_are_the_saved_config",
    ),
    "one epoch's figures not logged": (
        "tracking.py",
        "        self.run.log_batch(self.run_id, metrics=metrics)",
        "        self.run.log_batch(self.run_id, metrics=metrics) if row['epoch'] != 2 else None",
        "tests/test_tracking.py::test_every_figure_of_metrics_csv_is_logged_at_its_epoch",
    ),
    "pruning never reported": (
        "tune.py",
        '                self.trial.report(row[MONITOR], row["epoch"])',
        "                pass",
        "tests/test_tune.py::test_a_trial_told_to_do_badly_is_pruned_at_its_first_epoch",
    ),
    "rank 0's pruning decision kept from the other ranks": (
        "tune.py",
        "        if broadcast(self.trial.should_prune()):",
        "        if self.trial.should_prune():",
        "tests/test_tune.py::test_a_search_on_two_processes_prunes_with_rank_0s_decision_on_both",
    ),
    "the other ranks never told that the search ended": (
        "tune.py",
        "    broadcast(None)  # no more trials: the other ranks return",
        "    pass",
        "tests/test_tune.py::test_a_search_on_two_processes_prunes_with_rank_0s_decision_on_both",
    ),
    "every run in a process group opens a gloo group of its own": (
        "distributed.py",
        "        self.group = _cpu_group(dist.group.WORLD)",
        '        self.group = dist.new_group(backend="gloo")',
        "tests/test_distributed.py::test_every_run_in_a_process_group_agrees_over_one_cpu_group",
    ),
    "the study's path not escaped in its database address": (
        "tune.py",
        "storage=f\"sqlite:///{quote(str(folder / 'study.db'))}\",",
        "storage=f\"sqlite:///{folder / 'study.db'}\",",
        "tests/test_tune.py::test_a_tune_folder_named_with_url_characters_holds_its_own_study",
    ),
    "a trial stopped by a shared flag loses its values and folder": (
        "tune.py",
        '        study.enqueue_trial(trial.params, user_attrs={"folder": name, "continues": trial.number})',
        "        pass",
        "tests/test_tune.py::test_a_bad_flag_every_trial_shares_stops_the_search_and_costs_no_trial",
    ),
    "a searched batch size the processes cannot share": (
        "tune.py",
        "    odd = [size for size in sizes if size % world_size()]",
        "    odd = []",
        "tests/test_tune.py::test_under_ddp_every_batch_size_searched_must_divide_by_the_processes",
    ),
    "a resumed study reruns finished trials": (
        "tune.py",
        "            storage=f\"sqlite:///{quote(str(folder / 'study.db'))}\",  # a ? or % in the path is the path's",
        "            storage=None,",
        "tests/test_tune.py::test_a_killed_tune_repeats_no_finished_trial_and_continues_the_killed_one",
    ),
    "a killed trial counted as finished": (
        "tune.py",
        "    return sum(trial.state in done and trial.number not in continued | stopped for trial in trials)",
        "    return sum(trial.state in done and trial.number not in stopped for trial in trials)",
        "tests/test_tune.py::test_a_killed_tune_repeats_no_finished_trial_and_continues_the_killed_one",
    ),
    "a raising run's data-loading workers left running": (
        "train.py",
        "@stopping_data_workers\n",
        "",
        "tests/test_datasets.py::test_a_run_that_raises_leaves_no_data_loading_workers_behind",
    ),
    "a worker killed as the loaders stop keeps the others running": (
        "loaders.py",
        "                with contextlib.suppress(RuntimeError):  # a worker killed meanwhile: torch still stops",
        "                if True:  # a worker killed meanwhile: torch still stops",
        "tests/test_datasets.py::test_a_worker_killed_while_the_loaders_stop_leaves_no_other_workers_running",
    ),
    "a killed trial starts again instead of continuing": (
        "tune.py",
        '        cfg = dataclasses.replace(cfg, resume="auto")  # a killed trial goes on from its checkpoint',
        "        cfg = dataclasses.replace(cfg, overwrite=True)",
        "tests/test_tune.py::test_a_killed_tune_repeats_no_finished_trial_and_continues_the_killed_one",
    ),
    "a search continued with other flags": (
        "tune.py",
        "    if changed:",
        "    if False:",
        "tests/test_tune.py::test_a_search_continued_with_other_flags_or_another_space_is_refused",
    ),
    "best.yaml keeps the trial's folder": (
        "tune.py",
        '    del config["output_dir"]  # a new run folder, not the trial\'s',
        "    pass",
        "tests/test_tune.py::test_train_config_best_yaml_reproduces_the_best_trials_metrics",
    ),
    "TPE unseeded": (
        "tune.py",
        "study.sampler = optuna.samplers.TPESampler(seed=base.seed + len(study.trials))",
        "study.sampler = optuna.samplers.TPESampler()",
        "tests/test_tune.py::test_the_same_seed_searches_the_same_way",
    ),
    "a full disk under TensorBoard is a thread's traceback": (
        "tracking.py",
        "    if not isinstance(args.thread, _AsyncWriterThread):",
        "    if True:",
        "tests/test_tracking.py::test_a_full_disk_under_the_log_is_one_line_not_a_threads_traceback",
        "tensorboard",
    ),
    "TensorBoard keeps a killed run's epochs": (
        "tracking.py",
        'SummaryWriter(own_folder(self.out / "tensorboard"), purge_step=first_epoch)',
        'SummaryWriter(own_folder(self.out / "tensorboard"))',
        "tests/test_tracking.py::test_a_resumed_run_replaces_what_a_killed_run_logged_after_its_checkpoint",
        "tensorboard",
    ),
    "W&B resumed under a new run id": (
        "tracking.py",
        "            id=self.run_id,",
        "            id=None,",
        "tests/test_tracking.py::test_a_resumed_run_logs_into_the_same_tracked_run",
        "wandb",
    ),
    "the run folder's reports not in the W&B artifact": (
        "tracking.py",
        'artifact.add_file(str(path), policy="immutable")',
        "pass",
        "tests/test_tracking.py::test_the_weights_and_reports_are_the_runs_artifact",
        "wandb",
    ),
    "the sampler position not restored": (
        "samplers.py",
        "return itertools.islice(iter(self.sampler), self.skipped, None)",
        "return iter(self.sampler)",
        "tests/test_checkpoint.py::test_a_run_stopped_at_any_step_resumes_to_the_weights_of_the_uninterrupted_run",
    ),
    "a worker's augmentation seed depends on its id": (
        "samplers.py",
        "streams.manual_seed(hash((self.seed, self.epoch, *indices)) % 2**63)",
        "streams.manual_seed(hash((self.seed, self.epoch, *indices, getattr(get_worker_info(), 'id', 0))) % 2**63)",
        "tests/test_checkpoint.py::test_the_number_of_data_loading_workers_never_changes_the_weights",
    ),
    "per-batch normalisation forgets the mean": (
        "loaders.py",
        "return images.to(self.device, non_blocking=True).float().sub_(shift).div_(scale)",
        "return images.to(self.device, non_blocking=True).float().div_(scale)",
        "tests/test_data.py::test_batched_uint8_images_are_the_per_image_float_pipelines_images",
    ),
    "uint8 random erasing fills black, not the mean colour": (
        "transforms.py",
        "mean_colour = 0 if floats else [round(255 * channel) for channel in mean]",
        "mean_colour = 0",
        "tests/test_data.py::test_batched_uint8_images_are_the_per_image_float_pipelines_images",
    ),
    "a JPEG beyond Pillow's pixel guard decoded anyway": (
        "decoding.py",
        "frame[0] * frame[1] <= Image.MAX_IMAGE_PIXELS:",
        "frame[0] * frame[1] > 0:",
        "tests/test_data.py::test_a_jpeg_beyond_pillows_pixel_guard_is_refused_as_pillow_refuses_it",
    ),
    "JPEGs decoded by Pillow after all": (
        "decoding.py",
        '    frame = decode_jpeg and encoded[:3] == b"\\xff\\xd8\\xff" and _jpeg_frame(encoded)',
        "    frame = None",
        "tests/test_data.py::test_a_jpeg_is_decoded_to_the_pixels_pillow_decodes_and_a_broken_one_is_named",
    ),
    "best.pt written a second time": (
        "checkpoint_file.py",
        'files.share(out / "last.pt", out / "best.pt")',
        'files.save(torch.load(out / "last.pt", weights_only=False), out / "best.pt")',
        "tests/test_checkpoint.py::test_a_best_last_epoch_is_one_file_under_two_names_and_a_later_epoch_leaves_it_be",
    ),
    "the epoch's order follows how far the sampler was read before": (
        "loaders.py",
        "    loader.order.manual_seed(hash((loader.dataset.seed, epoch)) % 2**63)",
        "    pass",
        "tests/test_checkpoint.py::test_the_number_of_data_loading_workers_never_changes_the_weights",
    ),
    "a later epoch that ties the best takes best.pt": (
        "checkpoint_file.py",
        "metrics[-1][MONITOR] > max((row[MONITOR] for row in metrics[:-1]), default=-1.0):",
        "metrics[-1][MONITOR] >= max((row[MONITOR] for row in metrics[:-1]), default=-1.0):",
        "tests/test_checkpoint.py::test_best_pt_is_the_epoch_of_the_best_monitored_figure_not_of_the_lowest_loss",
    ),
    "the workers' seeds drawn from the epoch order's generator": (
        "loaders.py",
        "generator=torch.Generator().manual_seed(cfg.seed),  # the workers' seeds: drawn once per start of workers",
        "generator=order,",
        "tests/test_checkpoint.py::test_the_number_of_data_loading_workers_never_changes_the_weights",
    ),
    "persistent workers keep the first epoch's augmentation seeds": (
        "samplers.py",
        "self.shared_epoch = torch.zeros((), dtype=torch.int64).share_memory_()",
        "self.shared_epoch = torch.zeros((), dtype=torch.int64)",
        "tests/test_checkpoint.py::test_the_number_of_data_loading_workers_never_changes_the_weights",
    ),
    "no data-loading workers for a GPU on synthetic data": (
        "train.py",
        'return min(8, os.cpu_count() or 1) if cfg.data != "synthetic" or accelerated else 0',
        'return min(8, os.cpu_count() or 1) if cfg.data != "synthetic" else 0',
        "tests/test_train.py::test_workers_default_to_some_for_photos_and_gpus_and_none_for_synthetic_images_on_a_cpu",
    ),
    "a batch's augmentation seed ignores its images": (
        "samplers.py",
        "streams.manual_seed(hash((self.seed, self.epoch, *indices)) % 2**63)",
        "streams.manual_seed(hash((self.seed, self.epoch)) % 2**63)",
        "tests/test_data.py::test_a_batchs_augmentation_follows_its_seed_epoch_and_indices_and_leaves_the_main_stream_alone",
    ),
    "per-batch seeding moves the main process's streams": (
        "samplers.py",
        "saved = streams.get_state() if get_worker_info() is None else None",
        "saved = None",
        "tests/test_checkpoint.py::test_the_number_of_data_loading_workers_never_changes_the_weights",
    ),
    "the partial epoch dropped on a signal": (
        "checkpoint.py",
        "save_checkpoints(self.out, self.stateful, self.loader, self.metrics, self.cfg, progress, self.changes)",
        "pass",
        "tests/test_checkpoint.py::test_a_run_stopped_at_any_step_resumes_to_the_weights_of_the_uninterrupted_run",
    ),
    "a resumed epoch's sums restarted": (
        "engine.py",
        "progress = progress or Progress.start(device)",
        "progress = Progress.start(device)",
        "tests/test_checkpoint.py::test_a_run_stopped_at_any_step_resumes_to_the_weights_of_the_uninterrupted_run",
    ),
    "a checkpoint inside an accumulation group": (
        "checkpoint.py",
        "if not (update and self.due):",
        "if not self.due:",
        "tests/test_checkpoint.py::test_a_run_stopped_at_any_step_resumes_to_the_weights_of_the_uninterrupted_run",
    ),
    "--checkpoint-every minutes read as seconds": (
        "checkpoint.py",
        "self.every_seconds = int(count) * 60 if minutes else None",
        "self.every_seconds = int(count) if minutes else None",
        "tests/test_checkpoint.py::test_checkpoint_every_minutes_saves_when_the_time_has_come",
    ),
    "the restart count ignored": (
        "distributed.py",
        'restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))',
        "restarts = 0",
        "tests/test_distributed.py::test_workers_restarted_by_torchrun_continue_from_the_newest_checkpoint_of_their_run",
    ),
    "the requeue missing": (
        "scripts/slurm.sbatch",
        '    scontrol requeue "$SLURM_JOB_ID"\n',
        "    true\n",
        "tests/test_distributed.py::test_a_slurm_job_warned_before_its_time_limit_requeues_and_resumes_exactly",
    ),
    "DDP ranks evaluate their own EMA statistics": (
        "train.py",
        "        runtime.share_buffers(net)",
        "        pass",
        "tests/test_distributed.py::test_a_slurm_job_warned_before_its_time_limit_requeues_and_resumes_exactly",
    ),
    "workers stopped by a signal reported as failed": (
        "launcher.py",
        "if len(stopped) == 1 and codes <= stopped | {-signal.SIGTERM}:",
        "if False:",
        "tests/test_distributed.py::test_workers_stopped_by_a_signal_end_the_launcher_with_their_code_not_as_a_failure",
    ),
    "a mid-epoch checkpoint resumed onto another epoch": (
        "continuation.py",
        'may_change = RESUME_MAY_CHANGE - ({"max_steps_per_epoch"} if mid_epoch else set())',
        "may_change = RESUME_MAY_CHANGE",
        "tests/test_checkpoint.py::test_a_mid_epoch_checkpoint_resumes_only_onto_the_same_epoch_and_in_one_line",
    ),
    "--device auto finds CUDA only": (
        "runtime.py",
        'if found is not None and requested in ("auto", found.type):',
        'if found is not None and found.type == "cuda" and requested in ("auto", "cuda"):',
        "tests/test_cli.py::test_auto_trains_on_the_accelerator_torch_finds_and_one_named_but_missing_is_one_line",
    ),
    "a checkpoint keeps the random state of CUDA only": (
        "checkpoint_file.py",
        "state[accelerator.type] = torch.get_device_module(accelerator).get_rng_state()",
        'state["cuda"] = torch.cuda.get_rng_state()',
        "tests/test_checkpoint.py::test_a_gpu_run_keeps_the_random_state_of_its_own_gpu_only",
    ),
    "a run continued after another run wrote into its folder as it started": (
        "run_folder.py",
        "        if _state(self.path) != self.as_checked:",
        "        if False:",
        "tests/test_run_folder.py::test_a_run_that_another_run_wrote_into_as_it_started_is_refused_not_continued",
    ),
    "a link planted as a folder's lock replaced by a refused run": (
        "files.py",
        "    if path.is_symlink() or not path.exists():",
        "    if not path.exists():",
        "tests/test_run_folder.py::test_a_link_planted_as_the_lock_of_a_folder_of_other_files_is_left_as_it_is",
    ),
    "a tune writes its folder before refusing a missing device": (
        "tune.py",
        "    check_device(base.device, base.gpus)  # refused before the study is touched\n",
        "",
        "tests/test_tune.py::test_a_device_this_machine_lacks_is_refused_before_the_tune_folder_is_touched",
    ),
    "filelock's note on its fallback in every command's stderr": (
        "files.py",
        '    warnings.filterwarnings("ignore", "only soft file lock is available")',
        "    pass",
        "tests/test_run_folder.py::test_every_module_imports_and_a_run_guards_its_folder_without_fcntl_or_the_other_posix_calls",
    ),
    "workers per GPU id for a device that is not CUDA": (
        "launcher.py",
        'cuda = cfg.device in ("auto", "cuda") and torch.cuda.is_available()',
        'cuda = cfg.device != "cpu" and torch.cuda.is_available()',
        "tests/test_distributed.py::test_one_worker_per_gpu_id_or_as_many_as_nproc",
    ),
    "the package needs fcntl, which Windows lacks": (
        "files.py",
        "import contextlib\n",
        "import contextlib\nimport fcntl  # noqa: F401\n",
        "tests/test_run_folder.py::test_every_module_imports_and_a_run_guards_its_folder_without_fcntl_or_the_other_posix_calls",
    ),
    "a run's folder left held after the run": (
        "files.py",
        "    lock.release(force=True)\n",
        "    _KEPT.append(lock)\n\n\n_KEPT = []\n",
        "tests/test_run_folder.py::test_a_process_forked_during_a_run_does_not_keep_its_folder_locked_after_it",
    ),
    "model.pt written before the plots": (
        "train.py",
        "        plot_run(out)\n",
        '        save(weights_file(weights["model.pt"], classes), out / "model.pt")\n        plot_run(out)\n',
        "tests/test_checkpoint.py::test_a_run_killed_after_its_last_epoch_is_resumed_to_write_what_it_had_not",
    ),
    # Found by the review of stop 34: runs resumed onto fewer epochs, early-stopped runs, a live run's folder
    "a run cut back to fewer epochs than its checkpoint holds": (
        "continuation.py",
        "    if cfg.epochs < least:",
        "    if False:",
        "tests/test_checkpoint.py::test_a_run_is_never_cut_back_to_fewer_epochs_than_its_checkpoint_holds",
    ),
    "an early-stopped run cut short trains on when resumed": (
        "checkpoint.py",
        "            epochs = range(0)\n",
        "            pass\n",
        "tests/test_checkpoint.py::test_an_early_stopped_run_is_finished_and_one_cut_short_after_it_only_writes_its_files",
    ),
    "a finished early-stopped run trains on when resumed": (
        "continuation.py",
        '    if ended and "progress" not in state and _stopped_early(state, cfg.patience):',
        "    if False:",
        "tests/test_checkpoint.py::test_an_early_stopped_run_is_finished_and_one_cut_short_after_it_only_writes_its_files",
    ),
    "a live run's folder refused for the checkpoints it is writing": (
        "continuation.py",
        "        refuse_if_busy(out)  # a live run writing there is the reason to give",
        "        pass",
        "tests/test_checkpoint.py::test_an_unfinished_run_is_named_so_and_one_that_a_live_run_holds_is_refused_as_busy",
    ),
    "a starting run's folder refused as files no run wrote": (
        "run_folder.py",
        "            refuse_if_busy(self.path)  # a run starting there has not written them all yet",
        "            pass",
        "tests/test_run_folder.py::test_a_second_run_into_a_folder_in_use_stops_with_one_line",
    ),
    "a checkpoint's epoch taken on trust": (
        "checkpoint_file.py",
        '    if type(state["epoch"]) is not int or state["epoch"] < 0:',
        "    if False:",
        "tests/test_checkpoint.py::test_a_checkpoint_whose_epoch_is_no_count_is_refused_in_one_line",
    ),
    # Found by the second review of stop 34
    "a checkpoint with no epoch left continued into a new folder": (
        "continuation.py",
        "    _refuse_if_done(path, state, cfg, ended=finished or not own)",
        "    _refuse_if_done(path, state, cfg, ended=finished)",
        "tests/test_checkpoint.py::test_a_run_folder_is_continued_only_from_its_own_newest_checkpoint",
    ),
    "--overwrite skips the continuation checks": (
        "checkpoint.py",
        "        check_continuation(self.out, self.found, self.cfg)\n",
        "        if not self.cfg.overwrite:\n            check_continuation(self.out, self.found, self.cfg)\n",
        "tests/test_checkpoint.py::test_overwrite_never_resumes_a_checkpoint_with_no_epoch_left_to_train",
    ),
    "a finished run continued keeps its old model.pt": (
        "train.py",
        '        (out / "model.pt").unlink(missing_ok=True)',
        "        pass",
        "tests/test_checkpoint.py::test_a_run_killed_after_its_last_epoch_is_resumed_to_write_what_it_had_not",
    ),
    "a partway epoch dropped when a smaller patience stops the run": (
        "checkpoint.py",
        "        if self.resumed is None and stopped_early(",
        "        if stopped_early(",
        "tests/test_checkpoint.py::test_a_mid_epoch_checkpoint_finishes_its_epoch_before_a_smaller_patience_stops_the_run",
    ),
    "best.pt resumed over a newer mid-epoch last.pt": (
        "continuation.py",
        "    if newest and _reached(state) < _reached(newest[1]):",
        '    if newest and state["epoch"] < newest[1]["epoch"]:',
        "tests/test_checkpoint.py::test_a_run_is_never_cut_back_to_fewer_epochs_than_its_checkpoint_holds",
    ),
    "a finished run continued from a checkpoint older than its end": (
        "continuation.py",
        '    if finished and state["epoch"] < (recorded := _epochs_recorded(out)):',
        "    if False:",
        "tests/test_checkpoint.py::test_a_finished_run_whose_last_pt_cannot_be_read_is_not_continued_from_an_older_best_pt",
    ),
    "an unfinished run's missing model.pt not explained": (
        "inference.py",
        '    if not Path(weights).exists() and (run_dir / "last.pt").is_file():  # model.pt is written last',
        "    if False:",
        "tests/test_checkpoint.py::test_an_unfinished_run_is_named_so_and_one_that_a_live_run_holds_is_refused_as_busy",
    ),
    # Issue 36: the review's fixes.
    "loaders used as a library keep their workers at exit": (
        "loaders.py",
        "multiprocessing.util.Finalize(None, _stop_kept_workers, exitpriority=100)",
        "None",
        "tests/test_datasets.py::test_a_script_that_builds_loaders_outside_train_exits_when_it_ends",
    ),
    "bf16 emulated on a CPU without bf16 instructions": (
        "amp.py",
        '    if precision == "bf16" and device.type == "cpu" and not native_cpu_bf16():',
        "    if False:",
        "tests/test_amp.py::test_a_cpu_without_native_bf16_trains_in_fp32_and_says_why",
    ),
    "the last line credits model.pt with the best epoch's figure": (
        "train.py",
        '    said += f"): {out / best_file}" if best_file else "; no file keeps its weights)"',
        "    said += f\"): {out / 'model.pt'}\"",
        "tests/test_train.py::test_the_last_line_names_the_file_that_holds_each_figure",
    ),
    "an exported file replaced by another model's is trusted": (
        "deployed.py",
        "    check_carried(path, sidecar, carried)",
        "    pass",
        "tests/test_export.py::test_a_file_replaced_by_another_runs_export_is_refused_in_one_line",
    ),
    "a resume changes what the run learns without a word": (
        "continuation.py",
        "    if kept:\n",
        "    if False:\n",
        "tests/test_checkpoint.py::test_a_resume_that_changes_what_the_run_learns_is_refused_in_one_line_and_writes_nothing",
    ),
    "a resume's changes not kept in the run folder": (
        "checkpoint_file.py",
        "            files.write_text(out / CHANGES, table.getvalue())",
        "            pass",
        "tests/test_checkpoint.py::test_a_resume_says_what_it_changes_and_the_run_folder_keeps_each_change",
    ),
    "the changes of earlier resumes dropped": (
        "continuation.py",
        '    return state["metrics"], history + changes',
        '    return state["metrics"], changes',
        "tests/test_checkpoint.py::test_a_resume_says_what_it_changes_and_the_run_folder_keeps_each_change",
    ),
    "a resume onto another split": (
        "continuation.py",
        '        changed.append("split")',
        "        pass",
        "tests/test_checkpoint.py::test_a_resume_keeps_the_split_it_trained_on_wherever_its_folder_goes",
    ),
    "a stop signal as a run starts goes unheeded": (
        "checkpoint.py",
        "        self.stop = GracefulStop() if stop is None else stop",
        "        self.stop = GracefulStop()",
        "tests/test_checkpoint.py::test_a_stop_signal_as_the_run_starts_stops_it_before_its_first_step_saying_so",
    ),
    "a Ctrl-C as a run writes its final files raised after they are written": (
        "stop_signals.py",
        "            if callable(handler) and handler is not signal.default_int_handler:",
        "            if callable(handler):",
        "tests/test_checkpoint.py::test_a_stop_signal_as_the_run_writes_its_final_files_lets_it_finish_them_and_says_so",
    ),
    "a stop signal as a trial is set up goes unheeded": (
        "stop_signals.py",
        "            stop.signal, stop.since = _STOPS[-1].signal, _STOPS[-1].since",
        "            pass",
        "tests/test_tune.py::test_a_stop_signal_as_a_trial_is_set_up_stops_that_trial_before_its_first_step",
    ),
    "a stop signal between trials goes unheeded": (
        "tune.py",
        "        _stop_between_trials(stop, folder)\n",
        "",
        "tests/test_tune.py::test_a_stop_signal_between_trials_ends_the_search_there_and_the_same_command_goes_on",
    ),
    "a warm-up beyond the epochs accepted": (
        "config/__init__.py",
        "        if self.warmup_epochs > self.epochs:",
        "        if False:",
        "tests/test_config.py::test_the_range_checks_refuse_each_bad_value_with_its_flag_and_accept_the_edges",
    ),
    "a negative clipping norm type accepted": (
        "grad_clipping.py",
        "        if not self.clip_grad_norm_type > 0:",
        "        if False:",
        "tests/test_config.py::test_the_range_checks_refuse_each_bad_value_with_its_flag_and_accept_the_edges",
    ),
    "runs starting together race to create the MLflow store": (
        "tracking.py",
        "        with store_lock(uri):",
        "        with contextlib.nullcontext():",
        "tests/test_tracking.py::test_two_runs_starting_together_in_a_new_store_are_both_tracked",
    ),
    "a tune killed before its trial had a folder queues that trial again": (
        "tune.py",
        '        if "folder" not in trial.user_attrs:',
        "        if False:",
        "tests/test_tune.py::test_a_tune_killed_before_its_trial_had_a_folder_goes_on_and_counts_that_trial_for_nothing",
    ),
    "a trial whose own values cannot run stops the search": (
        "tune.py",
        "        if isinstance(exc, TrainingDiverged) or _about(exc, trial.params):",
        "        if isinstance(exc, TrainingDiverged):",
        "tests/test_tune.py::test_a_trial_whose_own_values_cannot_run_fails_with_its_reason_and_the_search_goes_on",
    ),
    "a key given twice in the search space keeps the last": (
        "search_space.py",
        "                raise _KeyTwice(key, (seen[key], line))",
        "                pass",
        "tests/test_tune.py::test_a_bad_search_space_is_one_line",
    ),
    "a search-space step too small for Optuna's decimals a traceback": (
        "search_space.py",
        "        except decimal.InvalidOperation:",
        "        except ZeroDivisionError:",
        "tests/test_tune.py::test_a_bad_search_space_is_one_line",
    ),
    "a range's number that YAML reads as text called no number": (
        "search_space.py",
        "        _read_as_text(values.get(key), where, key)",
        "        pass",
        "tests/test_tune.py::test_a_bad_search_space_is_one_line",
    ),
    "a study.db cut short a database traceback": (
        "tune.py",
        "    except DatabaseError as exc:",
        "    except ZeroDivisionError as exc:",
        "tests/test_tune.py::test_a_study_db_cut_short_or_emptied_is_one_line_naming_it",
    ),
    "the trials table credits model.pt with the best epoch's figure": (
        "tune.py",
        '        return int(epochs[best]["epoch"]), "best.pt"',
        '        return int(epochs[best]["epoch"]), "model.pt"',
        "tests/test_tune.py::test_the_table_and_best_yaml_name_the_file_with_the_best_epochs_weights",
    ),
    "a retrain from best.yaml tracked in the tune's experiment": (
        "tune.py",
        '    config["experiment"] = config["experiment"].removesuffix(f"-{folder.name}")',
        "    pass",
        "tests/test_tracking.py::test_a_retrain_from_tunes_best_yaml_is_tracked_as_a_run_of_the_projects_experiment",
    ),
    "a pruned trial's tracked run marked failed": (
        "tracking.py",
        '        return False, "pruned"',
        '        return True, "pruned"',
        "tests/test_tracking.py::test_a_run_that_raises_ends_its_tracked_run_saying_why",
    ),
    "a run not tracked from its start": (
        "tracked.py",
        "        self.tracker.start(first_epoch)",
        "        pass",
        "tests/test_tracking.py::test_a_run_is_tracked_with_its_config_from_its_start",
    ),
    "a sidecar mean far outside the pixels' range accepted": (
        "deployed.py",
        '    if not all(abs(value) <= MAX_NORMALISATION for value in given["mean"]):',
        "    if False:",
        "tests/test_export.py::test_bad_export_and_model_file_requests_are_one_line",
    ),
    "a sidecar std of zero accepted": (
        "deployed.py",
        '    if not all(1 / MAX_NORMALISATION <= value <= MAX_NORMALISATION for value in given["std"]):',
        "    if False:",
        "tests/test_export.py::test_bad_export_and_model_file_requests_are_one_line",
    ),
    "a sidecar nested too deep a traceback": (
        "deployed.py",
        "KeyError, RecursionError) as exc:",
        "KeyError) as exc:",
        "tests/test_export.py::test_bad_export_and_model_file_requests_are_one_line",
    ),
    "a mid-epoch checkpoint exported without a word": (
        "export.py",
        '        print(f"note: {weights} is {what}", file=sys.stderr)',
        "        pass",
        "tests/test_export.py::test_a_mid_epoch_checkpoint_exports_with_a_notice_and_its_sidecar_says_so",
    ),
    "a killed rank's job blamed on the rank that lost its connection to it": (
        "launcher.py",
        '            return (3, order.index(rank)) if report["lost"] else (0, rank)',
        "            return (0, rank)",
        "tests/test_distributed.py::test_a_failed_job_says_once_why_with_the_exit_code_of_its_cause",
    ),
    "an error under --nproc said by every rank": (
        "launcher.py",
        "    if REPORTS in os.environ:",
        "    if False:",
        "tests/test_distributed.py::test_a_failed_job_says_once_why_with_the_exit_code_of_its_cause",
    ),
}
MUTATIONS |= {name: spec for trick in ENTRIES for name, spec in trick.mutations.items()}  # a trick's own
MUTATIONS |= {name: (*spec, MULTI_LABEL_RENDER) for name, spec in MULTI_LABEL_MUTATIONS.items()}
# The optimizer lines live in optim.py; a 3-tuple names no file. A 5th item: the tracker of the render (else MLflow),
# or its answers that differ from all-on's, as pairs (MULTI_LABEL_RENDER).
MUTATIONS = {name: spec if len(spec) >= 4 else ("optim.py", *spec) for name, spec in MUTATIONS.items()}
MUTATIONS = {name: spec if len(spec) == 5 else (*spec, NAMED["all-on"]["tracker"]) for name, spec in MUTATIONS.items()}


@pytest.fixture(scope="module")
def all_on(cookies_session):
    """The all-on render with a given tracker (or other answers, as pairs), each rendered once."""
    answers = lambda render: {"tracker": render} if isinstance(render, str) else dict(render)  # noqa: E731
    return functools.cache(lambda render: baked_project(cookies_session, **(NAMED["all-on"] | answers(render))))


def source_of(project: Path, file: str) -> Path:
    """`file` from the top of the render, else the package module whose path ends so (engine.py, config/__init__.py)."""
    return project / file if (project / file).is_file() else next((project / "src").glob(f"*/**/{file}"))


def test_every_breakage_names_a_fragment_found_once_and_guards_that_exist(all_on):
    """The table checked against today's renders in seconds, in the fast lane: an edit that moves a fragment or renames
    a guarding test shows here, not after minutes of the slow mutation check."""
    wrong = []
    for name, (file, fragment, _, guards, tracker) in MUTATIONS.items():
        if source_of(all_on(tracker), file).read_text().count(fragment) != 1:
            wrong.append(f"{name}: {fragment!r} does not occur exactly once in {file}")
        for guard in guards.split():
            path, _, test = guard.partition("::")
            text = (all_on(tracker) / path).read_text() if (all_on(tracker) / path).is_file() else ""
            if not text or (test and f"def {test.partition('[')[0]}(" not in text):
                wrong.append(f"{name}: no guarding test {guard}")
    assert not wrong, "update MUTATIONS:\n" + "\n".join(wrong)


def in_the_slow_lane(guard: str) -> bool:
    """Whether a guarding test (or test file) is marked slow in the template: real subprocesses, signals and worker
    processes, which run in the lane of multi-process tests here."""
    path, _, test = guard.partition("::")
    file = GENERATED_TESTS / Path(path).name
    text = file.read_text() if file.is_file() else ""
    if not test:
        return "pytest.mark.slow" in text
    found = text.find(f"def {test.partition('[')[0]}(")
    if found < 0:
        return False  # no such test: the fast check above names it, collection goes on
    above = text[:found].rstrip().splitlines()
    decorators = itertools.takewhile(lambda line: line.startswith(("@", " ", ")", "{%")), reversed(above))
    return any("pytest.mark.slow" in line for line in decorators)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.processes] if any(map(in_the_slow_lane, spec[3].split())) else [])
        for name, spec in MUTATIONS.items()
    ],
)
def test_each_breakage_is_caught_by_the_tests_that_guard_it(name, all_on, tmp_path, forkserver):
    file, fragment, broken, guards, tracker = MUTATIONS[name]
    project = tmp_path / "project"
    shutil.copytree(all_on(tracker), project, ignore=shutil.ignore_patterns("__pycache__"))
    source = source_of(project, file)
    text = source.read_text()
    assert text.count(fragment) == 1, f"{name}: {fragment!r} must occur once in {file}; update MUTATIONS"
    source.write_text(text.replace(fragment, broken))
    args = ["-x", "-q", *own_pytest_run(), *guards.split()]
    code, summary = pytest_in_fork(forkserver, project, args, tmp_path / "guards.log", GUARD_TIMEOUT)
    if code is None:
        pytest.fail(f"{name}: the guarding tests ran past {GUARD_TIMEOUT} s")
    # exit 1: tests ran and failed. 2-5 (collection error, no tests, ...) would be a broken test, not a catch.
    assert code == 1, f"{name} was not caught by {guards}:\n{summary}"
