{% if cookiecutter.use_distributed %}
"""Starting the workers of a job on this machine: `train --gpus 0,1` (or `--device cpu --nproc 2`) runs PyTorch's own
launcher, torch.distributed.run, in this process; a job whose workers failed ends with one line naming the cause
and how to go on.
"""

import contextlib
import json
import logging
import os
import shlex
import signal
import socket
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend
from torch.distributed.run import get_args_parser, run

{% if cookiecutter.use_checkpointing %}
from .distributed import is_main
{% endif %}
from .errors import DeviceError, UserError, first_line, one_line
from .runtime import {{ "STOP_SIGNALS, " if cookiecutter.use_checkpointing }}gpu_ids

{% if cookiecutter.use_checkpointing %}
STOPPED = {128 + number for number in STOP_SIGNALS}  # workers stopped by a signal
{% endif %}
# Set by `launch` for its workers: the folder where each says why it stopped, for the launcher to say it once.
REPORTS = "{{ cookiecutter.package_name | upper }}_WORKER_REPORTS"
# the console script, as the launcher's one line names it
SCRIPT = "{{ cookiecutter.project_slug }}"


def workers_wanted(cfg) -> int:
    """--nproc when given, else one worker per --gpus id when training on GPUs, else one. On GPUs, never more
    workers than visible GPUs: the extra ones would die in CUDA with 'invalid device ordinal'."""
    cuda = cfg.device in ("auto", "cuda") and torch.cuda.is_available()
    workers = cfg.nproc or ((len(gpu_ids(cfg.gpus)) or 1) if cuda else 1)
    if cuda and workers > torch.cuda.device_count():
        raise DeviceError(
            f"{workers} workers need {workers} GPUs but {torch.cuda.device_count()} is visible with --gpus {cfg.gpus}; "
            "pass ids that nvidia-smi lists, fewer --nproc, or --device cpu"
        )
    return workers


def launch(workers: int, argv: list[str], package: str) -> None:
    """Run this same command in `workers` processes on this machine, through torch.distributed.run."""
    print(f"starting {workers} workers with torch.distributed.run")
    one_machine = ["--standalone", "--local-addr", "127.0.0.1"]  # workers reach the agent over loopback
    launcher = get_args_parser().parse_args([*one_machine, f"--nproc-per-node={workers}", "-m", package])
    launcher.training_script_args = argv  # set apart so torchrun's parser never reads our flags
    # The workers import this very package, wherever it was imported from here.
    here = str(Path(__file__).resolve().parents[2])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    # The agent logs each worker it stops and the first failure: the one line below says what happened instead.
    agent_log = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    level = agent_log.level
    with tempfile.TemporaryDirectory(prefix="worker-reports-") as reports:
        os.environ[REPORTS] = reports
        agent_log.setLevel(logging.CRITICAL)
        try:
            with _stores_on_loopback():
                run(launcher)
        except ChildFailedError as exc:
{% if cookiecutter.use_checkpointing %}
            # A signal to the workers: they saved, said where to continue and left together, the agent stopping (by
            # SIGTERM) those still exiting once the first had exited.
            codes = {failure.exitcode for failure in exc.failures.values()}
            stopped = codes & STOPPED
            if len(stopped) == 1 and codes <= stopped | {-signal.SIGTERM}:
                raise SystemExit(stopped.pop()) from None
{% endif %}
            raise _job_failure(exc.failures, Path(reports), argv) from None
        except SignalException as exc:  # the workers got it too and said where to continue
            raise SystemExit(128 + exc.sigval) from None
        finally:
            agent_log.setLevel(level)
            del os.environ[REPORTS]


def worker_failed(exc: Exception) -> int:
    """A worker's error: under `launch`, handed to the launcher, which says once for the whole job why it stopped
    (every rank often meets the same bad flag); under torchrun, one line with the rank. Returns the exit code."""
    lost = lost_connection(exc) or lost_connection(exc.__context__)  # a UserError raised because a peer died too
    if isinstance(exc, UserError):
        message, code = one_line(exc), exc.exit_code
    else:
        message, code = f"lost the connection to the other workers ({first_line(exc)})", 1
    if REPORTS in os.environ:
        report = Path(os.environ[REPORTS]) / f"rank{os.environ['RANK']}.json"
        written = report.with_suffix(".tmp")  # renamed: the launcher never reads half a report
        written.write_text(json.dumps({"message": message, "exit_code": code, "lost": lost}))
        written.replace(report)
    else:
        print(f"error (rank {os.environ['RANK']}): {message}", file=sys.stderr)
    return code


def lost_connection(exc: BaseException | None) -> bool:
    """Whether `exc` is a collective that failed because another worker is gone (killed, or failed itself)."""
    if isinstance(exc, dist.DistError):  # NCCL's errors, the store's
        return True
    return isinstance(exc, RuntimeError) and "gloo/transport" in str(exc)  # gloo raises plain RuntimeErrors


{% if cookiecutter.use_checkpointing %}
def note_run_folder(out: Path) -> None:
    """Under `launch`, rank 0 leaves the run folder's name to the launcher, which names its checkpoint when a worker
    dies."""
    if REPORTS in os.environ and is_main():
        (Path(os.environ[REPORTS]) / "run_folder").write_text(str(out))


{% endif %}
def _job_failure(failures: dict, reports: Path, argv: list[str]) -> UserError:
    """The one error of a job whose workers failed, with the exit code of its cause: a worker's own message (rank
    0's first), else a worker that died unexplained (killed, or a traceback of its own), else one stopped by SIGTERM
    (the agent's, once another had failed), else one that lost its connection to the others."""
    said = {rank: json.loads(path.read_text()) for rank in failures if (path := reports / f"rank{rank}.json").exists()}
    order = list(failures)  # as the agent found them

    def blame(rank: int) -> tuple[int, int]:
        report, exitcode = said.get(rank), failures[rank].exitcode
        if report:
            return (3, order.index(rank)) if report["lost"] else (0, rank)
        stopped = exitcode in (-signal.SIGTERM, 128 + signal.SIGTERM)  # as the agent stops the others, or saved first
        return (2 if stopped else 1), order.index(rank)

    cause = min(failures, key=blame)
    failure, report = failures[cause], said.get(cause)
    if report and not report["lost"]:
        error = UserError(report["message"])
        error.exit_code = report["exit_code"]
        return error
    if failure.exitcode < 0:
        what, code = f"was killed by {failure.signal_name()}", 128 - failure.exitcode
    elif report:
        what, code = report["message"], report["exit_code"]
    else:
        what, code = f"exited with code {failure.exitcode} (its output is above)", failure.exitcode
    error = UserError(f"worker rank {cause} {what}, and the job stopped; {_how_to_continue(argv, reports)}")
    error.exit_code = code
    return error


def _how_to_continue(argv: list[str], reports: Path) -> str:
    command = next((arg for arg in argv if not arg.startswith("-")), "train")
    if command == "tune":  # the study is in its folder: the same command goes on with it
        return f"the same command continues the search: {SCRIPT} {shlex.join(argv)}"
{% if cookiecutter.use_checkpointing %}
    noted = reports / "run_folder"
    out = Path(noted.read_text()) if noted.exists() else None
    if out and (out / "last.pt").exists():
        config = shlex.quote(str(out / "config.yaml"))
        return f"continue with: {SCRIPT} train --config {config} --resume auto"
    return "nothing was saved yet, run it again"
{% else %}
    return "run it again"
{% endif %}


class LoopbackTCPStore(dist.TCPStore):
    """A TCPStore whose server listens on 127.0.0.1 alone: torch's own binds every interface, which would let
    anyone on the network talk to an unauthenticated store while a one-machine job runs."""

    def __init__(self, host_name, port, *args, **kwargs):
        if kwargs.get("is_master") and "master_listen_fd" not in kwargs:
            listener = socket.create_server(("127.0.0.1", port), backlog=512)
            host_name, port = listener.getsockname()
            kwargs["master_listen_fd"] = listener.detach()  # the store owns the socket from here on
        super().__init__(host_name, port, *args, **kwargs)


@contextlib.contextmanager
def _stores_on_loopback():
    """While torchrun's agent runs in this process, the stores it hosts are LoopbackTCPStores."""
    modules = (dist, c10d_rendezvous_backend)
    originals = [module.TCPStore for module in modules]
    for module in modules:
        module.TCPStore = LoopbackTCPStore
    try:
        yield
    finally:
        for module, original in zip(modules, originals, strict=True):
            module.TCPStore = original
{% endif %}
