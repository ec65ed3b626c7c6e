"""A smoke run inside a child forked from a forkserver that has imported torch and run no torch op.

Forking such a parent is safe and costs milliseconds, against ~3 s for a fresh interpreter. The child
imports the render's package from its src/, runs the command line in-process and reports what it saw.
"""

import functools
import hashlib
import importlib
import importlib.util
import io
import json
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path


def join_one_process_group() -> None:
    """What torchrun would set for a single worker: the distributed code path runs (gloo, world of 1)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    os.environ.update(env)


def _watch(package: str, checks: dict, seen: dict):
    """Hooks that show each chosen trick at work inside the real run: the loss the loop computes, the inputs
    the model receives, the gradients each optimizer step gets. Installed before the run builds anything."""
    import torch
    from torch import nn
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    train_module = importlib.import_module(f"{package}.training.train")
    mixed, received, initial = [], [], {}
    seen |= {"losses": 0, "smoothed_losses": 0, "soft_targets": 0, "logits_dtypes": [], "step_norms": []}
    seen |= {"sync_bn_layers": 0, "epochs": []}
    _watch_updates(package, train_module, seen)

    def loss_hook(module, args, output):
        seen["sync_bn_layers"] += isinstance(module, nn.SyncBatchNorm) and module.training  # forwards through one
        if isinstance(module, nn.BCEWithLogitsLoss) and module.reduction == "mean":  # a multi-label training loss
            logits, targets = args
            seen["losses"] += 1
            seen["soft_targets"] += bool(((targets != 0) & (targets != 1)).any())  # mixed: between 0 and 1
            seen["logits_dtypes"].append(str(logits.dtype).removeprefix("torch."))
            smoothed = targets * (1 - checks["smoothing"]) + checks["smoothing"] / 2  # toward 0.5
            expected = nn.functional.binary_cross_entropy_with_logits(logits.float(), smoothed)
            seen["smoothed_losses"] += bool(torch.isclose(output.float(), expected, rtol=1e-4))
        if isinstance(module, nn.CrossEntropyLoss) and module.reduction == "mean":  # the training loss
            logits, targets = args
            seen["losses"] += 1
            seen["soft_targets"] += targets.is_floating_point()
            seen["logits_dtypes"].append(str(logits.dtype).removeprefix("torch."))
            expected = nn.functional.cross_entropy(logits.float(), targets, label_smoothing=checks["smoothing"])
            seen["smoothed_losses"] += bool(torch.isclose(output.float(), expected, rtol=1e-4))

    def step_hook(optimizer, args, kwargs):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        seen["step_norms"].append(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])).item())

    nn.modules.module.register_module_forward_hook(loss_hook)
    register_optimizer_step_pre_hook(step_hook)
    build_model = train_module.build_model

    def watched_model(*args):
        model = build_model(*args)
        if (checks["frozen"] or checks["ema"]) and "state" not in initial:  # as the run's first command built them
            initial["state"] = {name: value.clone() for name, value in model.state_dict().items()}

        def trained_on(module, args):  # the model's own inputs: a copy of it (a trick's average) has the hook too
            if module.training and module is model:
                received.append(args[0])

        model.register_forward_pre_hook(trained_on)
        return model

    train_module.build_model = watched_model
    if checks["mixup"]:
        mixup = importlib.import_module(f"{package}.tricks.mixup")
        build_mix = mixup.build_mix

        def watched_mix(*args):
            mix = build_mix(*args)

            def mix_and_keep(images, targets):
                images, soft = mix(images, targets)
                mixed.append(images)
                return images, soft

            return mix_and_keep

        mixup.build_mix = watched_mix
    return lambda: len(mixed) == len(received) > 0 and all(map(torch.equal, mixed, received)), initial


def _watch_updates(package: str, train_module, seen: dict) -> None:
    """Every update the loop attempts, per epoch, in seen["epochs"]: whether the optimizer really stepped (fp16's
    GradScaler skips a step whose gradients overflowed), the norm clipping measured before it, and how often the
    EMA was updated after it. Told apart from outside the loop's own bookkeeping: a step is taken when the
    optimizer's step hook fires, whatever the scaler or the loop believe."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    state = {"in_scaler_step": False, "stepped": 0, "norm": None}

    def attempt(taken: bool) -> None:
        if not seen["epochs"]:  # an update outside train_one_epoch: keep it visible, in an epoch of its own
            seen["epochs"].append([])
        seen["epochs"][-1].append({"taken": taken, "norm": state["norm"], "ema_updates": 0})
        state["norm"] = None

    def stepped(optimizer, args, kwargs):
        state["stepped"] += 1
        if not state["in_scaler_step"]:  # no GradScaler in this loop: every update is a step
            attempt(True)

    register_optimizer_step_post_hook(stepped)
    scaler_step = torch.amp.GradScaler.step

    def watched_scaler_step(self, optimizer, *args, **kwargs):
        before, state["in_scaler_step"] = state["stepped"], True
        try:
            return scaler_step(self, optimizer, *args, **kwargs)
        finally:
            state["in_scaler_step"] = False
            attempt(state["stepped"] > before)
            seen["epochs"][-1][-1]["scale"] = self.get_scale() if self.is_enabled() else None

    torch.amp.GradScaler.step = watched_scaler_step
    clip = torch.nn.utils.clip_grad_norm_

    def watched_clip(*args, **kwargs):
        norm = clip(*args, **kwargs)
        state["norm"] = float(norm)  # the total norm before clipping; inf or NaN when the gradients overflowed
        return norm

    torch.nn.utils.clip_grad_norm_ = watched_clip
    train_one_epoch = train_module.train_one_epoch

    def watched_epoch(*args, **kwargs):
        seen["epochs"].append([])
        return train_one_epoch(*args, **kwargs)

    train_module.train_one_epoch = watched_epoch
    if importlib.util.find_spec(f"{package}.tricks.ema") is not None:
        average = importlib.import_module(f"{package}.tricks.ema").MovingAverage
        update = average.after_step

        def counted(self, *args, **kwargs):
            if seen["epochs"] and seen["epochs"][-1]:
                seen["epochs"][-1][-1]["ema_updates"] += 1
            else:  # an EMA update before any update of the weights: a trace of its own
                seen["epochs"].append([{"taken": False, "norm": None, "ema_updates": 1}])
            return update(self, *args, **kwargs)

        average.after_step = counted


def _read(path: Path) -> dict:
    """A file the run just wrote, read back. Ours, in a temp folder: pickle's own unpickler reads it 4x as fast as
    the one that weights_only=True runs in Python (0.1 s per torchvision checkpoint, thousands of reads here)."""
    import torch

    return torch.load(path, weights_only=False, map_location="cpu", mmap=True)


def _share_synthetic_images(package: str, folder: Path) -> None:
    """The render's synthetic images (2,560 drawn for every smoke run, 0.16 s of it), drawn once per text of its
    data/sources.py (or data/multi_label.py) and arguments by that very code, then read back by every later run: the
    lru_cache the render puts on them, across processes. The same code on the same arguments gives the same tensors (a
    seeded generator)."""
    import torch

    data = importlib.import_module(f"{package}.data.sources")
    name = "_stripes"
    if not hasattr(data, name):  # a multi-label render: its synthetic images come from data/multi_label.py
        data, name = importlib.import_module(f"{package}.data.multi_label"), "_tags"
    draw = getattr(data, name).__wrapped__  # under the render's own lru_cache
    code = hashlib.sha256(Path(data.__file__).read_bytes()).hexdigest()[:16]

    @functools.lru_cache(maxsize=4)
    def shared(*args):
        path = folder / f"{name}-{code}-{'-'.join(map(str, args))}.pt"
        if path.exists():
            return tuple(torch.load(path, weights_only=True, mmap=True))
        drawn = draw(*args)
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        torch.save(drawn, part)
        part.replace(path)  # whole or not at all: runs beside this one read it
        return drawn

    setattr(data, name, shared)


def _poll_wandb_quickly() -> None:
    """W&B's client polls for the port file of the service it starts every 0.2 s, and the service writes it sooner: each
    W&B run here waited 0.2 s at its start, hundreds of runs. Polled every 10 ms instead, through the hook that
    W&B's own unit tests patch (the service, its start and its timeout are unchanged)."""
    from wandb.sdk.lib.service import service_port_file

    sleep = time.sleep  # bound now, as W&B binds it: a test that patches time.sleep later leaves this alone
    service_port_file._SLEEP = lambda seconds: sleep(min(seconds, 0.01))


def run(src: str, package: str, commands: list[list[str]], report: str, checks: dict, ddp: bool, shared: str) -> None:
    log = os.open(Path(report).with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.path.insert(0, src)
    if ddp:
        join_one_process_group()
    import torch
    import torch.utils.serialization

    # The zip records' CRC-32 costs 0.05 s per 90 MB checkpoint written (resnet18's with its momentum), and neither
    # torch.load nor these checks read it: left out of the files written here.
    torch.utils.serialization.config.save.compute_crc32 = False
    _poll_wandb_quickly()
    cli = importlib.import_module(f"{package}.cli")
    _share_synthetic_images(package, Path(shared))
    seen = {"exit_codes": [], "checkpoint_epochs": []}
    model_trained_on_mixed_inputs, built = _watch(package, checks, seen)
    for argv in commands:
        seen["exit_codes"].append(cli.main(argv))
        run_dir = Path(argv[argv.index("--output-dir") + 1])
        if (run_dir / "last.pt").exists():
            seen["checkpoint_epochs"].append(_read(run_dir / "last.pt")["epoch"])
    seen["mixed_inputs"] = model_trained_on_mixed_inputs()
    if (checks["frozen"] or checks["ema"]) and all(code == 0 for code in seen["exit_codes"]):
        # The initial weights of the run against the trained and the averaged ones it wrote.
        initial = built["state"]
        trained = _read(run_dir / "model.pt")
        if checks["frozen"]:
            frozen = checks["frozen"] + "."
            names = [n for n in initial if n.startswith(frozen) and n.endswith(("weight", "running_mean"))]
            seen["frozen_unchanged"] = bool(names) and all(torch.equal(initial[n], trained[n]) for n in names)
        if checks["ema"]:
            averaged = _read(run_dir / "ema.pt")
            moved = [n for n in trained if trained[n].is_floating_point() and not torch.equal(initial[n], trained[n])]
            # updated (not the initial weights) and averaged (not the last ones), wherever training moved them
            seen["ema_updated"] = bool(moved) and all(not torch.equal(averaged[n], initial[n]) for n in moved)
            seen["ema_averaged"] = bool(moved) and any(not torch.equal(averaged[n], trained[n]) for n in moved)
    sys.stdout.flush()
    Path(report).write_text(json.dumps(seen))


def train_until_killed(src: str, package: str, argv: list[str], log: str, point: str, n: int = 0) -> None:
    """Train, and SIGKILL this process at a named point: point="step" as the n-th optimizer step (counted over the
    whole run) begins, "save" halfway through writing the n-th file torch.save writes, "plots" as the run starts
    drawing its plots (after its last epoch); "" trains to the end. Events, not times: the same point on any machine
    under any load."""
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.path.insert(0, src)
    import torch

    def die(*args, **kwargs):
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "plots":
        importlib.import_module(f"{package}.training.train").plot_run = die
    elif point == "step":
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        steps = []

        def count_then_die(*args):
            steps.append(None)
            if len(steps) == n:
                die()

        register_optimizer_step_pre_hook(count_then_die)
    elif point == "save":
        real_save, calls = torch.save, []

        def save_half_then_die(obj, target, *args, **kwargs):
            calls.append(target)
            if len(calls) < n:
                return real_save(obj, target, *args, **kwargs)
            buffer = io.BytesIO()
            real_save(obj, buffer, *args, **kwargs)
            half = buffer.getvalue()[: len(buffer.getvalue()) // 2]
            if hasattr(target, "write"):
                target.write(half)
                target.flush()
            else:
                Path(target).write_bytes(half)
            die()

        torch.save = save_half_then_die
    cli = importlib.import_module(f"{package}.cli")
    sys.exit(cli.main(argv))


def make_mlflow_store(db: str) -> None:
    """A new, empty MLflow store in the SQLite file `db`, as a run's first MLflow call creates it."""
    import mlflow

    mlflow.MlflowClient(f"sqlite:///{db}").search_experiments()


def _block_fcntl() -> None:
    """Every later `import fcntl` fails, here and (through a sitecustomize on PYTHONPATH) in subprocesses; filelock,
    which may have found it as the fork server started, is imported anew."""
    sys.modules["fcntl"] = None
    for name in [name for name in sys.modules if name.split(".")[0] == "filelock"]:
        del sys.modules[name]
    shim = tempfile.mkdtemp(prefix="no-fcntl-")
    Path(shim, "sitecustomize.py").write_text('import sys\n\nsys.modules["fcntl"] = None\n')
    os.environ["PYTHONPATH"] = os.pathsep.join([shim, os.environ["PYTHONPATH"]])


def pytest_in(project: str, args: list[str], log: str, without_fcntl: bool = False) -> None:
    """`python -m pytest args` in a render's folder, as `run_in` would start it, minus the ~6 s of importing torch
    in a fresh interpreter: the output goes to `log`, pytest's exit code is this process's (70 when the set-up here
    failed, never 1: exit 1 means tests ran and failed). In a session of its own, so that whoever started it can end
    it and every process its tests started at once. `without_fcntl`: as on a system that has no fcntl (Windows),
    here and in the processes the tests start with this environment."""
    try:
        os.setsid()
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.chdir(project)
        for key in [key for key in os.environ if key.startswith(("PYTEST_", "TORCH_TEMPLATE_"))]:
            del os.environ[key]  # this suite's own pytest is no worker of the template's
        src = str(Path(project) / "src")
        sys.path.insert(0, src)
        os.environ["PYTHONPATH"] = src  # what the tests start in subprocesses imports the render too
        if without_fcntl:
            _block_fcntl()
        # A forkserver's children inherit its start method; DataLoader workers started that way cost seconds each.
        multiprocessing.set_start_method(multiprocessing.get_all_start_methods()[0], force=True)  # the platform's own
        import pytest

        _poll_wandb_quickly()
    except BaseException:  # noqa: BLE001 (whatever it was, it is no test failing)
        traceback.print_exc()
        os._exit(70)
    code = pytest.main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))
