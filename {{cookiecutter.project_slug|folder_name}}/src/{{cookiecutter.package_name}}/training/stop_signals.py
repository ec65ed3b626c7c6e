{% if cookiecutter.use_checkpointing %}
"""Stop signals (SIGTERM, SIGINT, SIGUSR1): a run that receives one stops at its next resumable point, saves, and
says how to go on.
"""

import contextlib
import functools
import shlex
import signal
import sys
import time
from pathlib import Path

from ..config import SCRIPT
{% if cookiecutter.use_distributed %}
from ..core.distributed import gather, is_main
{% endif %}
from ..core.runtime import STOP_SIGNALS

REPEAT_SECONDS = 1.0  # the same signal again within this: the same request (a second one later stops at once)
_STOPS: list["GracefulStop"] = []  # the stop requests being caught (GracefulStop.caught), innermost last


class GracefulStop:
    """SIGTERM, SIGINT and SIGUSR1 (how schedulers, Ctrl-C and SLURM's warning before a time limit stop jobs) end
    the run at a resumable point: the current optimizer step finishes and a mid-epoch checkpoint is written, from
    which the resumed run continues exactly as the uninterrupted one would have. A second signal exits at once.
{% if cookiecutter.use_distributed %}
    Every process stops at the same step: they agree on it in the background, one step after the signal.
{% endif %}
    """

    def __init__(self):
        self.signal: int | None = None
        self.since = 0.0  # when it came

    def __bool__(self) -> bool:
        return self.signal is not None

    def _request(self, number: int, frame) -> None:
        if self.signal is not None:
            if number == self.signal and time.monotonic() - self.since < REPEAT_SECONDS:
                return  # one request delivered twice: to the process group, and passed on by a launcher
            raise SystemExit(128 + number)
        self.signal, self.since = number, time.monotonic()
        name = signal.Signals(number).name
        fresh_line = "\n" if sys.stderr.isatty() else ""  # not after the ^C a terminal echoes behind the progress bar
        print(f"{fresh_line}{name}: stopping at the next resumable point (send it again to stop now)", file=sys.stderr)

{% if cookiecutter.use_distributed %}
    def adopt(self, number: int) -> None:
        """Another rank's signal (0: none): this rank stops as if it had received it."""
        if number and self.signal is None:
            self.signal, self.since = number, time.monotonic()

{% endif %}
    @contextlib.contextmanager
    def caught(self):
        """The stop signals are requests to this object while the block runs; the handlers before it, after."""
        previous = {number: signal.signal(number, self._request) for number in STOP_SIGNALS}
        _STOPS.append(self)
        try:
            yield previous
        finally:
            _STOPS.pop()
            for number, handler in previous.items():
                signal.signal(number, handler)

    def epochs(self, epochs):
        """Yield epochs with the signal handlers installed; stop yielding once a stop was asked for."""
        with self.caught():
            for epoch in epochs:
{% if cookiecutter.use_distributed %}
                self.adopt(max(gather(self.signal or 0)))  # every rank stops at the same epoch
{% endif %}
                if self:
                    return
                yield epoch
{% if cookiecutter.use_distributed %}
            self.adopt(max(gather(self.signal or 0)))  # and after the last one: all save their results, or none
{% endif %}

    def exit_if_stopped(self, out: Path, saved: str | None = None) -> None:
        """After a stop: say where the run can continue from (`saved`: what last.pt holds, if this run wrote it), and
        exit with the conventional 128 + signal."""
{% if cookiecutter.use_distributed %}
        if self and not is_main():
            raise SystemExit(128 + self.signal)  # rank 0 says where to continue
{% endif %}
        if self:
            name = signal.Signals(self.signal).name
            last = out / "last.pt"
            again = f"continue with: {SCRIPT} train --config {shlex.quote(str(out / 'config.yaml'))} --resume auto"
            if saved:
                said = f"{last} holds {saved}; {again}"
            elif last.exists():  # stopped as it started: the checkpoint it would have continued from
                said = f"{last} is as it was; {again}"
            else:  # the command may hold what config.yaml does not (--resume PATH, --init-from)
                said = "nothing was saved yet; run the same command again"
            print(f"stopped by {name}: {said}", file=sys.stderr)
            raise SystemExit(128 + self.signal)


def current_stop() -> "GracefulStop | None":
    """The stop request being caught innermost: train()'s, or tune's between trials; None outside them."""
    return _STOPS[-1] if _STOPS else None


def catching_stop_signals(function):
    """Stop signals are requests for the whole of a run, not only its epochs: one that comes while the run starts
    stops it at its first resumable point, the start of the epoch loop, saying so; one that comes while it writes its
    final files lets it finish them, then says so. A caller's own handler (tune's, between trials) then gets it, and
    a request the caller had not acted on yet is this run's from its start."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        stop = GracefulStop()
        if _STOPS and _STOPS[-1]:  # tune's, asked for as the trial was set up
            stop.signal, stop.since = _STOPS[-1].signal, _STOPS[-1].since
        with stop.caught() as previous:
            result = function(*args, **kwargs)
        if stop:  # the epochs were done: exit_if_stopped ends the run otherwise
            name = signal.Signals(stop.signal).name
{% if cookiecutter.use_distributed %}
            if is_main():
                print(f"{name} came as the run wrote its final files: they are complete", file=sys.stderr)
{% else %}
            print(f"{name} came as the run wrote its final files: they are complete", file=sys.stderr)
{% endif %}
            handler = previous[stop.signal]
            if callable(handler) and handler is not signal.default_int_handler:  # a KeyboardInterrupt: not now
                handler(stop.signal, None)
        return result

    return call
{% endif %}
