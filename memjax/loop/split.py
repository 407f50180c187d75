"""The `split_async` schedule's rollouts: an engine on its own devices generates ahead while the trainer updates.

Owns `SplitStream`, the rollout side of TrainConfig.schedule="split_async" (each process's first `rollout_split`
devices roll out on its engine, the trainer's mesh holds every process's others):
- generation batch i samples with policy version max(0, i - max_staleness): when step j's update ends, the engine's
  copy of those weights is made on the rollout devices (`Engine.prepare_weights`; several processes: an all-gather
  over the trainer's mesh) and batch j + max_staleness is queued with it; one worker thread generates the queued
  batches in order, installing each one's copy first. A batch is never paused: its every token is of one version;
- each process generates its own block of every batch with the sync schedule's seeds; the worker runs only this
  process's programs (engine, workflows, data stream), every cross-process collective is the main thread's;
- `drain()` waits until the worker is idle (before a held-out evaluation and a checkpoint); `dumps()` / `loads()`
  carry this process's generated batches not yet trained, so a resume trains exactly what the uninterrupted run does.
docs/async.md, "The split_async schedule".
"""

from __future__ import annotations

import base64
import pickle
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..agents.workflow import run_workflow
from ..core import seeds
from ..core.cli import RunError
from ..rl.offpolicy import staleness_metrics
from .rollout import Rollout, account, filtered


class SplitStream:
    shares_engine = False  # the engine is not the trainer's: run_step neither puts it to sleep nor hands it the weights

    def __init__(self, parts, cfg):
        self.parts, self.cfg = parts, cfg
        self.version = 0  # updates applied by the trainer
        self.next_gen = 0  # the next generation batch to queue
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="memjax-rollout")
        self._pending: dict[int, Future] = {}  # generation batch -> its generation, queued or running
        self._ready: dict[int, tuple] = {}  # generated (restored from a checkpoint, or drained)

    # -- the worker ------------------------------------------------------------------------------------------
    def _generate(self, index: int, weights, version: int) -> tuple:
        p, engine = self.parts, self.parts.engine
        engine.install_weights(weights)
        t0 = time.perf_counter()
        samples = next(p.data)
        records = list(getattr(p.data, "last_records", []))
        sysm = p.system
        res = run_workflow(engine, sysm.workflow(engine, p.tok, train=True), samples, group_size=sysm.group_size,
                           seed=seeds.rollout(self.cfg.seed, index, 0), max_active=getattr(sysm, "max_active", 0),
                           first_trajectory=p.block[0] * sysm.group_size)
        return res, records, version, time.perf_counter() - t0

    def _queue(self, upto: int) -> None:
        """Queue generation batches next_gen..upto with the current weights."""
        if self.next_gen > upto:
            return
        weights = self.parts.engine.prepare_weights(self.parts.model)
        for i in range(self.next_gen, upto + 1):
            self._pending[i] = self._pool.submit(self._generate, i, weights, self.version)
        self.next_gen = upto + 1

    def _result(self, index: int) -> tuple:
        if index in self._ready:
            return self._ready.pop(index)
        if index not in self._pending:
            raise RunError(f"split_async: generation batch {index + 1} was never queued")
        return self._pending.pop(index).result()  # re-raises the worker's exception here

    def drain(self) -> None:
        """Wait for every queued generation (its results kept for the step that trains it)."""
        for i in sorted(self._pending):
            self._ready[i] = self._pending.pop(i).result()

    # -- the step ----------------------------------------------------------------------------------------------
    def collect(self, step: int) -> Rollout:
        """Step `step + 1`'s training batch: generation batch `step`, with the later ones queued behind it."""
        t0 = time.perf_counter()
        # version `step` (this step's weights) samples batch step + max_staleness, not past the run's last step
        self._queue(min(step + self.cfg.max_staleness, self.cfg.steps - 1))
        res, records, version, generate_s = self._result(step)
        waited = time.perf_counter() - t0
        batch = res.batch
        gen_mask = batch.loss_mask > 0
        batch = batch.replace(version=np.where(gen_mask, np.int32(version), np.int32(-1)).astype(np.int32),
                              behaviour_logp=batch.old_logp.copy())
        res.batch = batch
        stats: dict = {}
        traces: list = []
        trained = account(self.parts, self.cfg, res, stats, traces)
        stats.update(staleness_metrics(batch.version, gen_mask.astype(np.float32), batch.sample, self.version,
                                       max_bin=2))
        stats.update({"async_batches_ahead": float(len(self._pending) + len(self._ready)),
                      "async_admitted_version": float(version), "async_generate_s": generate_s,
                      "async_wait_s": waited})
        return filtered(self.cfg, trained, stats, traces, [records])

    def updated(self) -> None:
        """The update of the batch taken is applied (or skipped): the version moves on."""
        self.version += 1

    def before_evaluation(self) -> None:
        """The worker idle (its batches kept), the engine holding the trainer's current weights."""
        self.drain()
        self.parts.engine.update_weights(self.parts.model)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- checkpoint --------------------------------------------------------------------------------------------
    def dumps(self) -> str:
        """This process's generated batches not yet trained (the worker drained first), for the checkpoint's meta."""
        self.drain()
        state = {"ready": self._ready, "next_gen": self.next_gen, "version": self.version}
        return base64.b64encode(zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))).decode()

    def loads(self, text: str | None) -> None:
        if not text:
            raise RunError("split_async: the checkpoint holds no rollout stream (another schedule's?)")
        state = pickle.loads(zlib.decompress(base64.b64decode(text)))
        if "ready" not in state:
            raise RunError("split_async: the checkpoint's rollout stream is another schedule's")
        self._ready, self.next_gen, self.version = state["ready"], state["next_gen"], state["version"]
        self._pending = {}
