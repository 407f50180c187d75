"""Stopping a run at a step boundary on SIGTERM (scancel, SLURM preemption) or Ctrl-C, on every process at once.

Owns `StopRequests`: `due(step)` says when the run should commit a checkpoint and exit; `code` is then 143
(SIGTERM) or 130 (SIGINT), `signal_name` names it; `restore()` puts the previous handlers back.
- Several processes: JAX's preemption service owns SIGTERM (jax.distributed.initialize installs its notifier) and
  propagates it to all; `due` is reached_preemption_sync_point over its own call count, true at the same call
  everywhere. A SIGINT becomes a SIGTERM to this process (exit 130 there, 143 on the others).
- One process: SIGTERM and SIGINT set a flag (never an exception inside a step, a collective or a save); `due`
  is that flag. A second signal of either kind raises at once.
- A signal the process inherited as ignored (SIGINT in a background job of a non-interactive shell) stays
  ignored, as Python itself leaves it: Ctrl-C meant for the shell does not stop the run.
Invariants: nothing here runs a collective outside `due`; every process calls it the same number of times (at
every step, and between the batches of a held-out evaluation).
"""

from __future__ import annotations

import os
import signal
import threading


class StopRequests:
    def __init__(self, processes: int, on_second=None):
        self.multi = processes > 1
        self.code = 0
        self.calls = 0  # due() calls so far: the preemption sync manager's step counter (several processes)
        self._on_second = on_second  # signum -> raises (the CLI's unwinding)
        self._saved: dict[int, object] = {}
        if threading.current_thread() is not threading.main_thread():
            return
        kinds = (signal.SIGINT,) if self.multi else (signal.SIGINT, signal.SIGTERM)
        for s in kinds:
            if signal.getsignal(s) is not signal.SIG_IGN:
                self._saved[s] = signal.signal(s, self._handle)

    @property
    def signal_name(self) -> str:
        return {143: "SIGTERM", 130: "SIGINT"}.get(self.code, "a stop request")

    def _handle(self, signum, frame) -> None:
        if self.code == 0:
            self.code = 130 if signum == signal.SIGINT else 143
            if self.multi:  # to JAX's preemption notifier: every process stops at the same step
                os.kill(os.getpid(), signal.SIGTERM)
            return
        if self.multi:
            return
        if signum == signal.SIGTERM and self._on_second is not None:  # one process, second signal: unwind now
            self._on_second(signum, frame)
        raise KeyboardInterrupt

    def due(self, step: int | None = None) -> bool:
        """Whether to stop now; with several processes, true at the same call on every process (`step` is only
        a label: the sync point counts calls, so training steps and evaluation batches share one counter)."""
        self.calls += 1
        if not self.multi:
            return self.code != 0
        from jax.experimental import multihost_utils

        if multihost_utils.reached_preemption_sync_point(self.calls):
            self.code = self.code or 143
            return True
        return False

    def restore(self) -> None:
        for s, h in self._saved.items():
            signal.signal(s, h)
        self._saved = {}
