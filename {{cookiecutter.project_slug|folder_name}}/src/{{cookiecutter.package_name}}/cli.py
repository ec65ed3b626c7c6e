"""Command line: `python -m {{ cookiecutter.package_name }} train|tune|evaluate|predict ...`."""

import argparse
import multiprocessing
{% if cookiecutter.use_distributed %}
import os
{% endif %}
import signal
import sys

from .config import (
    DEVICES,
    EXPORT_FORMATS,
    EXPORT_TOLERANCE,
    GPU_IDS_HELP,
    PER_INVOCATION,
    add_config_arguments,
    make_config,
)
from .core.errors import UserError, one_line

# torch, torchvision and matplotlib take seconds to import: they are imported once a command runs (in `run`),
# so that --help and a bad flag answer at once.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="{{ cookiecutter.project_slug }}",
        description="{{ cookiecutter.description | escaped }}",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show full tracebacks instead of one-line errors")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", parents=[common], help="train a model", argument_default=argparse.SUPPRESS)
    train.add_argument("--config", help="YAML file with config keys; flags given here override it")
    add_config_arguments(train)

    tune = commands.add_parser(
        "tune",
        parents=[common],
        help="search hyper-parameters with Optuna: a training run per trial",
        argument_default=argparse.SUPPRESS,
        description="Train flags set what every trial shares; --output-dir is the tune folder (study.db, trials.csv, "
        "best.yaml, a folder per trial). The same command again continues a stopped search.",
    )
    tune.add_argument("--space", required=True, help="YAML search space: option -> list of choices, or low/high range")
    tune.add_argument("--trials", type=int, default=20, help="trials to finish, over every run of the command")
    tune.add_argument("--timeout", type=float, default=None, help="start no trial after this many seconds")
    tune.add_argument("--startup-trials", type=int, default=5, help="trials that run in full before any is pruned")
    tune.add_argument("--config", help="YAML file with config keys; flags given here override it")
    add_config_arguments(tune)
    for action in tune._actions:  # tune's own default, not train's runs/<date-time>
        if action.dest == "output_dir":
            action.help = "the tune folder (auto: runs/tune-<space file name>)"

    evaluate = commands.add_parser("evaluate", parents=[common], help="{{ 'mAP' if cookiecutter.task == 'multi_label' else 'accuracy' }} and per-class report of weights")
    evaluate.add_argument("--weights", required=True, help="model.pt written by train")
    evaluate.add_argument("--data", help="dataset to evaluate on (default: the one trained on)")
    evaluate.add_argument("--data-root", help="where downloadable datasets live")
    evaluate.add_argument("--batch-size", type=int, help="images per step")
    evaluate.add_argument("--num-workers", type=int, help="data-loading processes")
    evaluate.add_argument(
        "--output-dir", help="where the reports go (default: eval-<weights>-<data>/ beside the weights)"
    )
{% if cookiecutter.task == "multi_label" %}
    evaluate.add_argument(
        "--fit-thresholds",
        action="store_true",
        help="choose each class's threshold for its best F1 here; saved beside the weights for predict and export",
    )
{% endif %}

    predict = commands.add_parser("predict", parents=[common], help="top classes and probabilities of images")
    model = predict.add_mutually_exclusive_group(required=True)
    model.add_argument("--weights", help="model.pt written by train")
    model.add_argument("--model-file", help="a file written by export (.onnx, .pt, .pt2; runs on the CPU)")
    predict.add_argument("images", nargs="+", help="image files, and folders searched for images recursively")
    predict.add_argument("--top-k", type=int, default=1, help="how many classes per image (default: 1)")
    predict.add_argument("--output", default="predictions.csv", help="the CSV written (default: predictions.csv)")
    for command in (evaluate, predict):
        command.add_argument("--tta", action="store_true", help="average over each image and its mirror image")

    features = commands.add_parser("features", parents=[common], help="save one layer's output for the val images")
    features.add_argument("--weights", required=True, help="model.pt written by train")
    features.add_argument("--layer", required=True, help="a node name, e.g. layer4, features.3 or fc")
    features.add_argument("--data", help="dataset (default: the one trained on)")
    features.add_argument("--batch-size", type=int, help="images per step")
    features.add_argument("--output", help="the .npy file (default: features_<layer>.npy beside the weights)")

    export = commands.add_parser("export", parents=[common], help="a file to ship: ONNX, TorchScript, torch.export")
    export.add_argument("--weights", required=True, help="weights or a checkpoint that train wrote (model.pt, say)")
    export.add_argument("--format", required=True, choices=list(EXPORT_FORMATS), help="the kind of file")
    export.add_argument("--output", help="the file (default: beside the weights, e.g. model.onnx)")
    export.add_argument(
        "--tolerance",
        type=float,
        default=EXPORT_TOLERANCE,
        help=f"the largest difference of logits from PyTorch's an export may have (default {EXPORT_TOLERANCE:g})",
    )

    plot = commands.add_parser("plot", parents=[common], help="learning curves and {{ 'precision-recall curves' if cookiecutter.task == 'multi_label' else 'confusion matrix' }} as PNG")
    plot.add_argument("run_dir", help="output dir of a training run (or of evaluate)")

    for command in (evaluate, predict, features):
        command.add_argument("--device", default="auto", choices=DEVICES, help="where to run")
        command.add_argument("--gpus", default="{{ cookiecutter.gpu_ids | gpus | escaped }}", help=GPU_IDS_HELP)
    return parser


{% if cookiecutter.use_distributed %}
def run(args: argparse.Namespace, argv: list[str]) -> None:
{% else %}
def run(args: argparse.Namespace) -> None:
{% endif %}
    if args.command == "predict" and args.model_file:  # an exported file: no model definition of this repo is needed
        from .serving.deployed import predict_exported

        if args.tta:
            raise UserError("--tta works with --weights; an exported file is run as it is")
        predict_exported(args.model_file, args.images, args.output, args.top_k)
        return
    if args.command == "export":
        from .serving.export import export_model

        export_model(args.weights, args.format, args.output, args.tolerance)
        return
{% if cookiecutter.use_distributed %}
    from .core.distributed import teardown
{% endif %}
    from .core.runtime import explaining_nondeterministic_kernels, resolve_device, select_gpus
    from .reports.plots import plot_run
    from .serving.inference import evaluate_run, extract_features, predict
    from .training.train import train

    if args.command == "tune":
        from .training.tune import tune

        search = ("space", "trials", "timeout", "startup_trials")
        values = {k: v for k, v in vars(args).items() if k not in ("command", "debug", "config", *search)}
        given = sorted(PER_INVOCATION & set(values))
        if given:
            raise UserError(f"tune decides how each trial starts: leave out --{given[0].replace('_', '-')}")
        if args.trials < 1 or args.startup_trials < 0 or (args.timeout is not None and not args.timeout > 0):
            raise UserError("--trials must be at least 1, --startup-trials at least 0, --timeout a positive number")
        cfg = make_config(values, getattr(args, "config", None))
{% if cookiecutter.use_distributed %}
        if _started_in_workers(cfg, argv):  # each trial trains in all of them
            return
{% else %}
        select_gpus(cfg.gpus, cfg.deterministic)
{% endif %}
{% if cookiecutter.use_distributed %}
        try:
            with explaining_nondeterministic_kernels():
                tune(cfg, args.space, args.trials, args.timeout, args.startup_trials)
        except SystemExit:  # stopped by a signal: as train's
            teardown(wait=False)
            raise
        teardown()
{% else %}
        with explaining_nondeterministic_kernels():
            tune(cfg, args.space, args.trials, args.timeout, args.startup_trials)
{% endif %}
        return

    if args.command == "train":
        values = {k: v for k, v in vars(args).items() if k not in ("command", "debug", "config")}
        cfg = make_config(values, getattr(args, "config", None))
{% if cookiecutter.use_distributed %}
        if _started_in_workers(cfg, argv):
            return
{% else %}
        select_gpus(cfg.gpus, cfg.deterministic)
{% endif %}
{% if cookiecutter.use_distributed %}
        try:
            with explaining_nondeterministic_kernels():
                train(cfg)
        except SystemExit:  # stopped by a signal, every rank's state saved: the groups go before the interpreter exits
            teardown(wait=False)
            raise
        teardown()
{% else %}
        with explaining_nondeterministic_kernels():
            train(cfg)
{% endif %}
        return

    if args.command == "plot":
        for path in plot_run(args.run_dir):
            print(path)
        return
    select_gpus(args.gpus)
    device = resolve_device(args.device, args.gpus)
    if args.command == "evaluate":
        overrides = {k: getattr(args, k) for k in ("data", "data_root", "batch_size", "num_workers")}
        overrides = {k: v for k, v in overrides.items() if v is not None}
        evaluate_run(args.weights, device, args.output_dir, args.tta, {{ "args.fit_thresholds, " if cookiecutter.task == "multi_label" }}**overrides)
    elif args.command == "features":
        overrides = {k: getattr(args, k) for k in ("data", "batch_size") if getattr(args, k) is not None}
        extract_features(args.weights, args.layer, device, args.output, **overrides)
    else:
        predict(args.weights, args.images, device, args.output, args.top_k, args.tta)


{% if cookiecutter.use_distributed %}
def _started_in_workers(cfg, argv: list[str]) -> bool:
    """Select the GPUs and, when the command wants several processes and is not one of them, run it in them."""
    from .core.distributed import launched
    from .core.launcher import launch, workers_wanted
    from .core.runtime import select_gpus

    if launched():  # torchrun's workers inherit the launcher's CUDA_VISIBLE_DEVICES
        return False
    select_gpus(cfg.gpus, cfg.deterministic)
    if workers_wanted(cfg) > 1:
        launch(workers_wanted(cfg), argv, __package__)
        return True
    return False


{% endif %}
def main(argv: list[str] | None = None) -> int:
{% if cookiecutter.use_distributed %}
    argv = sys.argv[1:] if argv is None else argv  # the launcher starts its workers with the same arguments
{% endif %}
    args = build_parser().parse_args(argv)
    try:
        run(args{{ ', argv' if cookiecutter.use_distributed else '' }})
    except UserError as exc:
        if args.debug:
            raise
{% if cookiecutter.use_distributed %}
        if "LOCAL_RANK" in os.environ:  # a worker of torchrun or --nproc
            from .core.launcher import worker_failed

            return worker_failed(exc)
{% endif %}
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
{% if cookiecutter.use_distributed %}
    except Exception as exc:
        if args.debug or "LOCAL_RANK" not in os.environ:
            raise
        from .core.launcher import lost_connection, worker_failed

        if not lost_connection(exc):
            raise
        return worker_failed(exc)  # another worker died: gloo's traceback would only say that a connection broke
{% endif %}
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        _stop_data_workers()
    return 0


def _stop_data_workers() -> None:
    """Data-loading workers ignore SIGTERM (the run stops them itself). After an error, Python's exit would send them
    one and wait for them forever: they are killed instead. Meanwhile SIGCHLD is at its default, or the DataLoader's
    handler would report each kill as a failed worker (a traceback) wherever the program is then."""
    children = multiprocessing.active_children()
    if not children:  # the usual case: the loaders stopped their own workers
        return
    sigchld = getattr(signal, "SIGCHLD", None)  # none on Windows
    previous = signal.signal(sigchld, signal.SIG_DFL) if sigchld else None
    for child in children:
        child.kill()
    for child in children:
        child.join()
    if sigchld:
        signal.signal(sigchld, previous)
