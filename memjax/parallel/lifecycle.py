"""What a training run uses of the process lifecycle: agreeing at start, a console for logs, stopping on request.

Owns:
- `agree_run(config)`: the processes of one run refuse to start unless their memjax sources and their configs
  are equal; the one line names the differing source files or config fields (memjax.parallel.confdiff).
- `run_console()`: the console of process 0; a line never wraps (piped or written to a file, a step line stays
  one line; in a terminal the terminal wraps it).
- `StopRequests` (memjax.parallel.preempt) with the CLI's second-signal unwinding, and `stop_line(stop, step,
  where)`: the `Stopped` exception (memjax.config) whose message is the one line printed at exit 143 / 130.
Invariants: `agree_run` is called by every process at the same point (it exchanges through the coordinator).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ..config import Stopped, _on_sigterm
from . import confdiff
from .preempt import StopRequests as _Requests


def agree_run(config: dict) -> None:
    confdiff.agree_fields("memjax sources", confdiff.source_digests(),
                          "run every process from the same checkout (same memjax version)", values=False)
    confdiff.agree_fields("config", confdiff.flatten(config),
                          "start every process with the same config file and --set overrides")


def run_console() -> Console:
    return Console(soft_wrap=True)


def StopRequests(processes: int) -> _Requests:
    return _Requests(processes, on_second=_on_sigterm)


def stop_line(stop: _Requests, step: int, where: Path) -> Stopped:
    return Stopped(f"stopped by {stop.signal_name} at step {step}; checkpoint {step} committed in {where}; "
                   "run the same command again to resume from it", stop.code)
