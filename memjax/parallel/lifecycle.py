"""What a training run uses of the process lifecycle: agreeing at start, a console for logs, stopping on request.

Owns `agree_run(config)` (processes whose memjax sources, Python and package versions or configs differ refuse
to start; memjax.parallel.confdiff's one line names the differing files, packages or fields), `run_console()`
(process 0's console; a line never wraps), `peer_loss(where)` (an exception from a collective whose peer went away
is not the run's error: the process waits for the runtime's report of the lost process, else raises a one-line
`RunError` saying where to resume from), `StopRequests` with `stop_line`, `evaluation_stops()`, `stop_point(where)`.
Invariants: a SIGTERM / SIGINT is a stop request, never an exception inside a compiled call or a collective: the
loops call `stop_point` on every process the same number of times, and the first call after the request raises
`Stopped` (exit 143 / 130) with one line; evaluation batches already finished are on disk, so a rerun resumes
after them; `heldout_stops(stop)` / `heldout_stop_due()` let a training run's held-out evaluation end with
`HeldoutStopped` between its engine steps or sample batches. `agree_run` is called by every process at the
same point (it exchanges through the coordinator).
docs/multihost.md, "Start-up, stopping and faults".
"""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from ..core.cli import RunError, Stopped, _on_sigterm
from . import confdiff
from .preempt import StopRequests as _Requests

_stops: list = []


@contextmanager
def evaluation_stops(out_dir: str):
    """Around an evaluation: signals become stop requests honoured at the next `stop_point`."""
    import jax

    req = _Requests(jax.process_count())
    _stops.append([req, 0, out_dir])
    try:
        yield req
    finally:
        _stops.pop()
        req.restore()


def stop_point(where: str) -> None:
    """Called before each question batch by every process (the same number of times): raises `Stopped` once a
    SIGTERM / SIGINT has arrived (on any process)."""
    if not _stops:
        return
    st = _stops[-1]
    st[1] += 1
    req = st[0]
    if req.due(st[1]):
        raise Stopped(f"stopped by {req.signal_name} {where}; the finished question batches are kept in {st[2]}; "
                      "run the same command again to resume", req.code or 143)


class HeldoutStopped(Exception):
    """A stop request honoured inside a training run's held-out evaluation: the evaluation is discarded (the Run
    commits the step's checkpoint with the evaluation still to do, and a resume runs it)."""


_heldout: list = []


@contextmanager
def heldout_stops(stop: _Requests):
    """Around a training run's held-out evaluation: `heldout_stop_due()` asks `stop`."""
    _heldout.append(stop)
    try:
        yield
    finally:
        _heldout.pop()


def heldout_active() -> bool:
    return bool(_heldout)


def heldout_stop_due() -> bool:
    """Whether the held-out evaluation running under `heldout_stops` should end now. One process: the signal
    flag (no collective, so it may be asked at any engine step). Several: the run's `due`, which every process
    must call the same number of times (between sample batches)."""
    return bool(_heldout) and _heldout[-1].due()


def heldout_stop_requested() -> bool:
    """One process only: whether a stop was requested (a flag read, no call counted)."""
    return bool(_heldout) and _heldout[-1].code != 0


def agree_run(config: dict) -> None:
    from ..core.environment import describe

    confdiff.agree_fields("memjax sources", confdiff.source_digests(),
                          "run every process from the same checkout (same memjax version)", values=False)
    env = describe(devices=False)  # not the processor: hosts of one run may have different ones
    confdiff.agree_fields("packages", {"python": env["python"], **env["packages"]},
                          "install the same versions everywhere (pip install -c constraints.txt -e .)")
    confdiff.agree_fields("config", confdiff.flatten(config),
                          "start every process with the same config file and --set overrides")


def run_console() -> Console:
    return Console(soft_wrap=True)


def StopRequests(processes: int) -> _Requests:
    return _Requests(processes, on_second=_on_sigterm)


def stop_line(stop: _Requests, step: int, where: Path) -> Stopped:
    return Stopped(f"stopped by {stop.signal_name} at step {step}; checkpoint {step} committed in {where}; "
                   "run the same command again to resume from it", stop.code)


# gloo's words for a dropped peer, and the coordination service's for a barrier or heartbeat that a lost task broke
# (orbax's save waits at such a barrier: a peer killed during a save surfaces there, not in a collective)
_LOST = re.compile(r"Gloo \w+ failed|Connection (reset|closed) by peer|Socket closed|another task died|"
                   r"tasks are unhealthy|tasks have crashed|remote task has failed|heartbeat timeout|"
                   r"Barrier timed out|only expected if one of the tasks is unhealthy")


def _lost_peer(e: BaseException | None) -> bool:
    seen = 0
    while e is not None and seen < 8:
        if _LOST.search(str(e)):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


@contextmanager
def peer_loss(where: Path):
    import jax

    try:
        yield
    except Exception as e:
        if jax.process_count() == 1 or not _lost_peer(e):
            raise
        from .startup import DEFAULT_HEARTBEAT_S, HEARTBEAT_ENV

        wait = int(os.environ.get(HEARTBEAT_ENV, "") or DEFAULT_HEARTBEAT_S) + 5
        time.sleep(wait)  # the runtime ends this process when it has noticed the lost one (logtee's line)
        from .logtee import newest_checkpoint

        raise RunError(f"a collective with another process failed (a process stopped or the network failed): "
                       f"resume from {newest_checkpoint(str(where.parent))}") from None
