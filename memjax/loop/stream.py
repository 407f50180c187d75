"""The `colocated_async` schedule's rollouts: generation batches admitted ahead of the update, driven across it.

Owns `RolloutStream`, the rollout side of TrainConfig.schedule="colocated_async" (one process, one device group):
- admission is by whole generation batches, oldest first, while the Pacer (memjax/rl/staleness.py) has room for
  one: at most max_staleness + 1 batches are outstanding. Batch j samples with the sync schedule's seeds of step j,
  so with max_staleness = 0 the stream submits exactly the sync schedule's requests;
- step k trains generation batch k, taken the moment its last trajectory ends (nothing is dropped for being slow);
  the later batches' trajectories pause between turns: their requests in flight are aborted (partial tokens
  discarded) and submitted again, same seeds, after the weights change, so each turn is one policy version's;
- every generated token records its version (`Completion.extra["versions"]`); a workflow that keeps KV across
  turns (Request.retain / parent) cannot pause (the update frees the pool): one-line RunError;
- `dumps()` / `loads()`: the outstanding batches (prepared samples, trajectories, requests to submit), the Pacer
  and the version, saved in the checkpoint's meta, so a resume submits exactly what the uninterrupted run does.
docs/async.md, "The colocated_async schedule".
"""

from __future__ import annotations

import base64
import dataclasses
import pickle
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..agents.workflow import Request, Trajectory, summarize
from ..core import seeds
from ..core.cli import RunError
from ..rl.offpolicy import staleness_metrics
from ..rl.staleness import Pacer
from .rollout import Rollout, account, filtered


@dataclass
class _Gen:
    """One admitted generation batch."""
    index: int  # j: the data stream's j-th generation batch, trained at step j + 1
    version: int  # the policy version at admission
    prepared: list
    trajs: list[Trajectory]
    records: list
    pacer_ids: list[int]  # the Pacer's sample id of each trajectory
    gids: list[int]
    open: list[int] = field(default_factory=list)  # requests in flight or waiting, per trajectory
    done: int = 0
    started: int = 0  # trajectories started (in index order)
    turn_versions: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # traj -> [(version, tokens)]


class RolloutStream:
    shares_engine = True  # one device group: the engine sleeps through the update and takes the new weights after it

    def __init__(self, parts, cfg):
        self.parts, self.cfg = parts, cfg
        self.sysm = parts.system
        self.group = self.sysm.group_size
        self.max_active = getattr(self.sysm, "max_active", 0)
        self.pacer = Pacer(cfg.prompts_per_step, cfg.max_staleness)
        self.gens: list[_Gen] = []  # outstanding, in admission order
        self.next_gen = 0
        self.waiting: list[tuple[_Gen, Trajectory, Request, int]] = []  # to submit (paused, or not yet submitted)
        self._inflight: dict[int, tuple[_Gen, Trajectory, Request, int, int]] = {}
        self._workflows: dict[int, Any] = {}
        self._paused = 0  # requests aborted at the last pause

    @property
    def version(self) -> int:
        return self.pacer.version

    def _workflow(self, gen: _Gen):
        if gen.index not in self._workflows:
            self._workflows[gen.index] = self.sysm.workflow(self.parts.engine, self.parts.tok, train=True)
        return self._workflows[gen.index]

    # -- admission and submission -----------------------------------------------------------------------
    def _admit(self) -> None:
        while self.pacer.admissible() >= self.cfg.prompts_per_step:
            samples = next(self.parts.data)
            records = list(getattr(self.parts.data, "last_records", []))
            gen = _Gen(self.next_gen, self.version, [], [], records, [], [])
            wf = self._workflow(gen)
            for s, sample in enumerate(samples):
                gen.prepared.append(wf.prepare(sample))
                g = self.pacer.admit(self.group)
                gen.gids.append(g.gid)
                gen.pacer_ids += g.samples
                gen.trajs += [Trajectory(s * self.group + r, s, r) for r in range(self.group)]
            gen.open = [0] * len(gen.trajs)
            self.gens.append(gen)
            self.next_gen += 1

    def _active(self) -> int:
        return sum(g.started - g.done for g in self.gens)

    def _start(self) -> None:
        """Start trajectories, oldest batch first, up to the system's max_active in flight."""
        for gen in self.gens:
            while gen.started < len(gen.trajs) and (not self.max_active or self._active() < self.max_active):
                traj = gen.trajs[gen.started]
                gen.started += 1
                reqs = self._workflow(gen).start(traj, gen.prepared[traj.sample])
                if not reqs:
                    raise ValueError(f"{type(self._workflow(gen)).__name__}.start returned no request for sample "
                                     f"{traj.sample}")
                self._queue(gen, traj, reqs)

    def _queue(self, gen: _Gen, traj: Trajectory, reqs: list[Request]) -> None:
        for req in reqs:
            if req.retain or req.parent is not None:
                raise RunError(f"schedule=colocated_async pauses trajectories between turns and frees the KV cache "
                               f"for the update; {type(self._workflow(gen)).__name__} keeps KV across turns "
                               "(Request.retain / parent): use schedule=sync")
            gen.open[traj.index] += 1
            self.waiting.append((gen, traj, req, traj.n_requests))
            traj.n_requests += 1

    def _submit_waiting(self) -> None:
        engine = self.parts.engine
        for gen, traj, req, k in self.waiting:
            seed = seeds.request(seeds.rollout(self.cfg.seed, gen.index, 0), traj.index, k)
            rid = engine.submit(req.prompt, dataclasses.replace(req.params, seed=seed))
            self._inflight[rid] = (gen, traj, req, k, self.version)
        self.waiting = []

    def _completed(self, comp) -> None:
        gen, traj, req, _, version = self._inflight.pop(comp.request_id)
        gen.open[traj.index] -= 1
        traj.prompt_tokens += len(req.prompt)
        traj.generated_tokens += len(comp.token_ids)
        comp.extra["versions"] = [version] * len(comp.token_ids)
        gen.turn_versions.setdefault(traj.index, []).append((version, len(comp.token_ids)))
        traj.turns.append((req, comp))
        wf = self._workflow(gen)
        follow = wf.react(traj, req, comp)
        if follow:
            self._queue(gen, traj, follow)
        elif not gen.open[traj.index]:
            traj.reward = float(wf.reward(traj))
            gen.done += 1
            self.pacer.finish(gen.pacer_ids[traj.index])

    def _pause(self) -> None:
        """Abort the requests in flight; they wait, in submission order, for the next weights."""
        if self._inflight:
            self.parts.engine.abort(list(self._inflight))
        self._paused = len(self._inflight)
        self.waiting = [(g, t, r, k) for g, t, r, k, _ in self._inflight.values()] + self.waiting
        self._inflight = {}

    # -- the step -------------------------------------------------------------------------------------------
    def collect(self, step: int) -> Rollout:
        """Step `step + 1`'s training batch: generation batch `step`, with later batches running meanwhile."""
        engine = self.parts.engine
        t0, before = time.perf_counter(), dict(engine.stats)
        try:
            while True:
                self._admit()
                self._start()
                oldest = self.gens[0]
                if oldest.done == len(oldest.trajs):
                    break
                self._submit_waiting()  # follow-ups first, then new trajectories: run_workflow's order
                for comp in engine.step():
                    self._completed(comp)
        finally:
            self._pause()
        gen = self.gens.pop(0)
        if gen.index != step:
            raise RunError(f"colocated_async: step {step + 1} would train generation batch {gen.index + 1}")
        taken = self.pacer.take()
        if taken is None or [g.gid for g in taken] != gen.gids:
            raise RunError(f"colocated_async: the pacer's batch is not generation batch {gen.index + 1}")
        wf = self._workflows.pop(gen.index)
        run_stats = {"seconds": time.perf_counter() - t0, "trajectories": len(gen.trajs),
                     "conversations": sum(t.n_requests for t in gen.trajs),
                     "prompt_tokens": sum(t.prompt_tokens for t in gen.trajs),
                     "generated_tokens": sum(t.generated_tokens for t in gen.trajs),
                     **{f"engine_{k}": engine.stats[k] - before.get(k, 0) for k in engine.stats}}
        res = summarize(wf, gen.trajs, run_stats)
        stats: dict = {}
        traces: list = []
        batch = account(self.parts, self.cfg, res, stats, traces)
        stats.update(self._metrics(gen))
        return filtered(self.cfg, batch, stats, traces, [gen.records])

    def _metrics(self, gen: _Gen) -> dict[str, float]:
        """Staleness of the trained batch's tokens (per turn: its version, its generated tokens), what runs ahead."""
        turns = [(t, v, n) for t, vs in gen.turn_versions.items() for v, n in vs if n]
        width = max((n for _, _, n in turns), default=1)
        versions = np.full((max(len(turns), 1), width), -1, np.int32)
        mask = np.zeros_like(versions, np.float32)
        for row, (_, v, n) in enumerate(turns):
            versions[row, :n], mask[row, :n] = v, 1.0
        sample = np.array([t for t, _, _ in turns] or [0], np.int32)
        out = staleness_metrics(versions, mask, sample, self.version, max_bin=2)
        out.update({"async_batches_ahead": float(len(self.gens)), "async_paused_requests": float(self._paused),
                    "async_admitted_version": float(gen.version)})
        return out

    def updated(self) -> None:
        """The update of the batch taken is applied (or skipped): the version moves on; paused turns continue."""
        self.pacer.update_done()
        self.pacer.forget_trained()

    def before_evaluation(self) -> None:
        """Nothing runs between steps (the paused requests wait), and the engine holds the current weights."""

    def close(self) -> None:
        """Nothing to release: the stream runs on the main thread."""

    # -- checkpoint -------------------------------------------------------------------------------------------
    def dumps(self) -> str:
        """The stream's state (no engine request is in flight between steps), for the checkpoint's meta."""
        if self._inflight:
            raise RunError("colocated_async: a checkpoint while requests are in flight")
        state = {"gens": self.gens, "next_gen": self.next_gen, "pacer": self.pacer,
                 "waiting": [(self.gens.index(g), t.index, r, k) for g, t, r, k in self.waiting]}
        return base64.b64encode(zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))).decode()

    def loads(self, text: str | None) -> None:
        if not text:
            raise RunError("colocated_async: the checkpoint holds no rollout stream (a sync run's?)")
        state = pickle.loads(zlib.decompress(base64.b64decode(text)))
        self.gens, self.next_gen, self.pacer = state["gens"], state["next_gen"], state["pacer"]
        self.waiting = [(self.gens[g], self.gens[g].trajs[t], r, k) for g, t, r, k in state["waiting"]]
        self._inflight, self._workflows = {}, {}
