"""Step-time simulator for the training schedules: discrete events over per-trajectory rollouts, the update, the
weight transfer and checkpoints, from measured phase costs. It predicts; it measures nothing.

Owns `Rates` (phase costs), `Turn` / `Trajectory` (a rollout as a chain of conversations: MemAgent's chunk chain,
SUMER's tool turns), `Schedule` and `simulate(...) -> SimResult` (seconds per step, GPU-seconds per sample,
staleness, drops, busy fractions). Rollout devices are engine replicas that prefill their queue, then decode every
running conversation one token per step at the measured step time plus the KV reads beyond the measured context;
training takes the batch's FLOPs at a measured rate plus a fixed host cost, then a weight sync or push. The schedules
(sync, colocated_async, split_async) admit and batch through memjax.rl.staleness.Pacer. `Rates.shared_compute`
and `Rates.overlap_speed` model devices that draw on one pool of compute (host devices on a CPU's cores).
Invariants: deterministic for a seed; time advances only through events; every admitted trajectory is trained or
(policy "drop") dropped; with max_staleness 0 colocated_async is sync.
docs/async.md, "The step-time simulator", has the model's formulas and its predictions.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .staleness import Pacer

__all__ = ["SCHEDULES", "Rates", "Schedule", "SimResult", "Trajectory", "Turn", "simulate"]

SCHEDULES = ("sync", "colocated_async", "split_async")


@dataclass(frozen=True)
class Rates:
    decode_batch: tuple[int, ...]  # sequences per decode step, measured points
    decode_step_s: tuple[float, ...]  # seconds per decode step at those points
    prefill_tok_s: float  # prompt tokens per second per replica
    slots: int  # trajectories a replica holds at once (KV / max_slots)
    train_flops_s: float  # achieved training FLOP/s per device (memjax.model.flops estimator)
    decode_ctx: int = 0  # context length of the measured decode steps
    kv_bytes_per_token: float = 0.0
    attn_bytes_s: float = 1.0  # KV bytes per second the attention kernel streams
    devices_per_replica: int = 1
    weight_sync_s: float = 0.0  # trainer -> engine on the same devices, per update
    push_bytes: float = 0.0  # split: weight bytes each rollout device receives per update
    push_bytes_s: float = 1.0
    checkpoint_s: float = 0.0
    checkpoint_every: int = 0  # 0 = never
    forward_passes: int = 1  # extra forward passes per update (old log-probs 1, + reference 1)
    resume: str = "recompute"  # partial trajectories after a pause: KV "recompute" | "keep"
    split_slots: int | None = None  # slots of a rollout-only replica (no training state beside it); None = slots
    update_fixed_s: float = 0.0  # trainer seconds per update beside its FLOPs (host work: credit, engine sleep, logs)
    # every device draws on one pool of compute (host devices on a CPU's cores): an update takes FLOPs /
    # train_flops_s (the pool's rate) on any device count
    shared_compute: bool = False
    # split_async: the fraction of its rate each of the rollout and the update runs at while both run (1: separate
    # devices; 0.5: processor sharing of one pool, each at half rate)
    overlap_speed: float = 1.0

    def __post_init__(self):
        if len(self.decode_batch) != len(self.decode_step_s) or not self.decode_batch:
            raise ValueError("Rates: decode_batch and decode_step_s must be non-empty and of one length")
        if list(self.decode_batch) != sorted(self.decode_batch):
            raise ValueError("Rates.decode_batch must be increasing")
        for f in ("prefill_tok_s", "train_flops_s", "attn_bytes_s", "push_bytes_s"):
            if not getattr(self, f) > 0:
                raise ValueError(f"Rates.{f} must be > 0, got {getattr(self, f)}")
        if self.slots <= 0 or self.devices_per_replica <= 0:
            raise ValueError("Rates.slots and Rates.devices_per_replica must be > 0")
        if self.update_fixed_s < 0:
            raise ValueError(f"Rates.update_fixed_s must be >= 0, got {self.update_fixed_s}")
        if not 0 < self.overlap_speed <= 1:
            raise ValueError(f"Rates.overlap_speed must be in (0, 1], got {self.overlap_speed}")
        if self.resume not in ("recompute", "keep"):
            raise ValueError(f"Rates.resume must be 'recompute' or 'keep', got {self.resume!r}")

    def tau(self, n: int, ctx_sum: float) -> float:
        """Seconds of one decode step of n sequences of summed context ctx_sum."""
        b, s = self.decode_batch, self.decode_step_s
        if n <= b[0] or len(b) == 1:
            base = s[0] if n <= b[0] else s[0] * n / b[0]
        elif n >= b[-1]:
            base = s[-1] + (n - b[-1]) * (s[-1] - s[-2]) / (b[-1] - b[-2])
        else:
            base = float(np.interp(n, b, s))
        return base + max(ctx_sum - n * self.decode_ctx, 0.0) * self.kv_bytes_per_token / self.attn_bytes_s


@dataclass(frozen=True)
class Turn:
    prefill: int  # new prompt tokens of this turn
    decode: int  # generated tokens
    tool_s: float = 0.0  # off-device wait after the turn (tool call, memory operation)
    continues: bool = False  # continues the previous turn's sequence (its KV kept) instead of a new conversation


@dataclass(frozen=True)
class Trajectory:
    turns: tuple[Turn, ...]
    train_flops: float  # forward + backward FLOPs of its training rows
    forward_flops: float  # one forward over its training rows
    reward_s: float = 0.0  # off-device wait for its reward (an LLM judge)
    tag: float = 0.0  # workload label (e.g. chunk count) for the drop-bias report


@dataclass(frozen=True)
class Schedule:
    kind: str
    devices: int  # sync / colocated: all devices; split: rollout_devices + train_devices
    max_staleness: int = 0
    policy: str = "pace"
    rollout_devices: int = 0  # split only

    def __post_init__(self):
        if self.kind not in SCHEDULES:
            raise ValueError(f"Schedule.kind must be one of {SCHEDULES}, got {self.kind!r}")
        if self.kind == "split_async" and not 0 < self.rollout_devices < self.devices:
            raise ValueError(f"Schedule: split_async needs 0 < rollout_devices < devices, got {self.rollout_devices} "
                             f"of {self.devices}")
        if self.kind == "sync" and self.max_staleness:
            raise ValueError("Schedule: sync has max_staleness 0")

    @property
    def train_devices(self) -> int:
        return self.devices - self.rollout_devices if self.kind == "split_async" else self.devices


@dataclass
class SimResult:
    schedule: Schedule
    update_times: list[float]  # when each update's weights became live
    step_s: float
    gpu_s_per_sample: float
    samples_per_step: int
    staleness_mean: float
    staleness_max: int
    versions_spanned_mean: float
    dropped: int
    trained_tag_mean: float
    admitted_tag_mean: float
    rollout_busy: float  # fraction of rollout replica-time spent prefilling or decoding
    train_s: float  # seconds of one update (mean)
    train_times: list[float] = field(default_factory=list)  # seconds of each update, in order

    def row(self) -> dict:
        s = self.schedule
        return {"schedule": s.kind, "devices": s.devices, "rollout_devices": s.rollout_devices or s.devices,
                "train_devices": s.train_devices, "max_staleness": s.max_staleness, "policy": s.policy,
                "step_s": self.step_s, "gpu_s_per_sample": self.gpu_s_per_sample,
                "staleness_mean": self.staleness_mean, "staleness_max": self.staleness_max,
                "versions_spanned_mean": self.versions_spanned_mean, "dropped": self.dropped,
                "rollout_busy": self.rollout_busy, "train_s": self.train_s}


class _Traj:
    __slots__ = ("ctx", "gid", "kv", "replica", "sample", "spec", "turn", "v_admit", "v_first", "v_last")

    def __init__(self, spec, gid, sample, version):
        self.spec, self.gid, self.sample, self.turn = spec, gid, sample, 0
        self.ctx, self.kv, self.replica = 0, True, None
        self.v_admit = self.v_first = self.v_last = version


class _Seq:
    __slots__ = ("c0", "ctx", "decode", "prefill_total", "traj", "v0")

    def __init__(self, traj, prefill_total, ctx, decode):
        self.traj, self.prefill_total, self.ctx, self.decode = traj, prefill_total, ctx, decode
        self.c0 = self.v0 = 0.0


class _Replica:
    def __init__(self, rates: Rates, slots: int):
        self.r, self.slots = rates, slots
        self.now, self.v, self.k = 0.0, 0.0, 0.0
        self.pq: deque = deque()  # [seq, remaining prefill tokens]
        self.heap: list = []  # (finish v, tie, seq)
        self.paused, self.trajs, self.busy, self.epoch, self._tie = False, 0, 0.0, 0, 0
        self.speed = 1.0  # fraction of its rate (Rates.overlap_speed while split_async's update runs beside it)

    def active(self) -> bool:
        return not self.paused and bool(self.pq or self.heap)

    def tau(self) -> float:
        n = len(self.heap)
        return self.r.tau(n, self.k + n * self.v) / self.speed

    def next_time(self) -> float:
        if self.paused:
            return math.inf
        if self.pq:
            return self.now + self.pq[0][1] / (self.r.prefill_tok_s * self.speed)
        if self.heap:
            return self.now + (self.heap[0][0] - self.v) * self.tau()
        return math.inf

    def sync_to(self, t: float):
        if t <= self.now:
            return
        if not self.paused:
            dt = t - self.now
            if self.pq:
                self.pq[0][1] -= dt * self.r.prefill_tok_s * self.speed
                self.busy += dt
            elif self.heap:
                self.v += dt / self.tau()
                self.busy += dt
        self.now = t

    def add(self, seq: _Seq, tokens: float):
        self.pq.append([seq, float(tokens)])

    def fire(self) -> list[_Seq]:
        """Process the next internal event (a prefill ends, or the first decoding conversations end)."""
        t = self.next_time()
        self.busy += t - self.now
        self.now = t
        if self.pq:
            seq, _ = self.pq.popleft()
            seq.c0, seq.v0 = seq.ctx, self.v
            self.k += seq.c0 - self.v
            self._tie += 1
            heapq.heappush(self.heap, (self.v + seq.decode, self._tie, seq))
            return []
        self.v = self.heap[0][0]
        done = []
        while self.heap and self.heap[0][0] <= self.v + 1e-9:
            _, _, seq = heapq.heappop(self.heap)
            self.k -= seq.c0 - seq.v0
            seq.ctx = seq.c0 + (self.v - seq.v0)
            done.append(seq)
        return done

    def reset_kv(self):
        """After new weights (resume="recompute"): every running conversation re-prefills its context."""
        items = []
        for fv, _, seq in self.heap:
            seq.ctx = seq.c0 + (self.v - seq.v0)
            seq.decode = fv - self.v
            items.append([seq, seq.ctx])
        for seq, _ in self.pq:
            items.append([seq, seq.prefill_total])
        self.heap, self.k = [], 0.0
        self.pq = deque(items)


def simulate(make: Callable[[np.random.Generator], Trajectory], rates: Rates, schedule: Schedule, *,
             batch_groups: int, group_size: int, steps: int, warmup: int = 1, seed: int = 0,
             keep_fraction: float = 1.0) -> SimResult:
    """Run `steps` updates of `schedule`; `make(rng)` draws one trajectory. Seconds per step are the mean gap
    between update completions after `warmup` updates (the first steps fill the pipeline)."""
    if steps <= warmup:
        raise ValueError(f"simulate: steps ({steps}) must exceed warmup ({warmup})")
    rng = np.random.default_rng(seed)
    split = schedule.kind == "split_async"
    n_rep = (schedule.rollout_devices if split else schedule.devices) // rates.devices_per_replica
    if n_rep <= 0:
        raise ValueError("simulate: fewer rollout devices than one replica needs")
    slots = rates.split_slots if split and rates.split_slots else rates.slots
    reps = [_Replica(rates, slots) for _ in range(n_rep)]
    pacer = Pacer(batch_groups=batch_groups, max_staleness=schedule.max_staleness, policy=schedule.policy)
    events: list = []
    tie = [0]

    def push(t, kind, payload):
        tie[0] += 1
        heapq.heappush(events, (t, tie[0], kind, payload))

    def schedule_rep(i):
        r = reps[i]
        r.epoch += 1
        t = r.next_time()
        if t < math.inf:
            push(t, "rep", (i, r.epoch))

    trajs: dict[int, _Traj] = {}
    admitted_tags, trained_tags, stal, spans = [], [], [], []
    update_times, train_secs = [], []
    trainer_busy = [False]
    shared = split and rates.overlap_speed < 1
    work = {"on": False, "left": 0.0, "t": 0.0, "speed": 1.0, "epoch": 0}  # the split trainer's update in progress
    now = 0.0

    def start_turn(tr: _Traj, t: float):
        turn = tr.spec.turns[tr.turn]
        r = reps[tr.replica]
        r.sync_to(t)
        base = tr.ctx if turn.continues else 0
        extra = base if (turn.continues and not tr.kv) else 0
        tr.kv = True
        seq = _Seq(tr, base + turn.prefill, base + turn.prefill, turn.decode)
        r.add(seq, turn.prefill + extra)
        schedule_rep(tr.replica)

    def admit(t):
        while pacer.admissible():
            free = sum(r.slots - r.trajs for r in reps)
            if free < group_size:
                return
            g = pacer.admit(group_size)
            for s in g.samples:
                i = min(range(n_rep), key=lambda j: (reps[j].trajs - reps[j].slots, j))
                tr = _Traj(make(rng), g.gid, s, pacer.version)
                tr.replica = i
                reps[i].trajs += 1
                trajs[s] = tr
                admitted_tags.append(tr.spec.tag)
                start_turn(tr, t)

    def pause_all(t):
        for r in reps:
            r.sync_to(t)
            r.paused = True
            r.epoch += 1

    def resume_all(t):
        for i, r in enumerate(reps):
            r.sync_to(t)
            r.now, r.paused = t, False
            if rates.resume == "recompute":
                r.reset_kv()
        if rates.resume == "recompute":
            for tr in trajs.values():
                tr.kv = False  # retained KV between turns is recomputed on the next turn too
        for i in range(n_rep):
            schedule_rep(i)

    def train_seconds(batch) -> float:
        fl = sum(trajs[s].spec.train_flops + rates.forward_passes * trajs[s].spec.forward_flops
                 for g in batch for s in g.samples)
        sec = fl / (rates.train_flops_s * (1 if rates.shared_compute else schedule.train_devices))
        sec += rates.update_fixed_s
        n_upd = len(update_times) + 1
        if rates.checkpoint_every and n_upd % rates.checkpoint_every == 0:
            sec += rates.checkpoint_s
        return sec

    def try_train(t):
        if trainer_busy[0] or not pacer.ready():
            return
        batch = pacer.take()
        sec = train_seconds(batch)
        for g in batch:
            for s in g.samples:
                tr = trajs.pop(s)
                trained_tags.append(tr.spec.tag)
                stal.append(pacer.version - tr.v_admit)
                spans.append(tr.v_last - tr.v_first + 1)
        train_secs.append(sec)
        trainer_busy[0] = True
        if split:
            work.update(on=True, left=sec, t=t, epoch=work["epoch"] + 1)
            push(t + sec / work["speed"], "trained", work["epoch"])
        else:
            pause_all(t)
            push(t + sec + rates.weight_sync_s, "live", None)

    def share(t):
        """Rates.overlap_speed under split_async: the update and the rollout run at that fraction of their rates
        while both run."""
        sp = rates.overlap_speed if work["on"] and any(r.active() for r in reps) else 1.0
        if work["on"] and sp != work["speed"]:
            work["left"] -= (t - work["t"]) * work["speed"]
            work.update(t=t, epoch=work["epoch"] + 1)
            push(t + work["left"] / sp, "trained", work["epoch"])
        work["speed"] = sp
        for i, r in enumerate(reps):
            if r.speed != sp:
                r.sync_to(t)
                r.speed = sp
                schedule_rep(i)

    admit(0.0)
    while len(update_times) < steps:
        if not events:
            raise RuntimeError("simulate: no event left before the last update (the workload cannot fill a batch)")
        now, _, kind, payload = heapq.heappop(events)
        if kind == "rep":
            i, ep = payload
            r = reps[i]
            if ep != r.epoch:
                continue
            freed = False
            for seq in r.fire():
                tr = seq.traj
                tr.ctx, tr.v_last = seq.ctx, pacer.version
                turn = tr.spec.turns[tr.turn]
                tr.turn += 1
                if tr.turn < len(tr.spec.turns):
                    push(now + turn.tool_s, "turn", tr.sample)
                else:
                    r.trajs -= 1
                    freed = True
                    push(now + turn.tool_s + tr.spec.reward_s, "done", tr.sample)
            schedule_rep(i)
            if freed:
                admit(now)
        elif kind == "turn":
            tr = trajs.get(payload)
            if tr is not None:  # on a paused engine the turn queues until the resume
                start_turn(tr, now)
        elif kind == "done":
            tr = trajs.get(payload)
            if tr is None:
                continue
            g = pacer.finish(payload)
            if g.complete and keep_fraction < 1.0 and rng.random() >= keep_fraction:
                pacer.discard(g.gid)
                for s in g.samples:
                    trajs.pop(s, None)
            admit(now)
            try_train(now)
        elif kind == "trained":  # split: the update is done, push the weights (the rollout group pauses)
            if payload != work["epoch"]:
                continue  # rescheduled (Rates.overlap_speed)
            work["on"] = False
            pause_all(now)
            push(now + rates.push_bytes / rates.push_bytes_s, "live", None)
        elif kind == "live":
            update_times.append(now)
            for g in pacer.update_done():  # "drop": abort what the next update would train too stale
                for s in g.samples:
                    tr = trajs.pop(s, None)
                    if tr is not None and tr.turn < len(tr.spec.turns):
                        reps[tr.replica].trajs -= 1
                        _abort(reps[tr.replica], tr)
            trainer_busy[0] = False
            resume_all(now)
            admit(now)
            try_train(now)
        if shared:
            share(now)
    gaps = np.diff(np.asarray(update_times[warmup - 1:]))
    step_s = float(gaps.mean())
    samples = batch_groups * group_size
    busy = sum(r.busy for r in reps) / max(len(reps) * update_times[-1], 1e-12)
    return SimResult(schedule, update_times, step_s, step_s * schedule.devices / samples, samples,
                     float(np.mean(stal)) if stal else 0.0, int(max(stal)) if stal else 0,
                     float(np.mean(spans)) if spans else 0.0, pacer.stats["dropped"],
                     float(np.mean(trained_tags)) if trained_tags else 0.0,
                     float(np.mean(admitted_tags)) if admitted_tags else 0.0, float(busy),
                     float(np.mean(train_secs)), list(train_secs))


def _abort(rep: _Replica, tr: _Traj):
    rep.pq = deque(x for x in rep.pq if x[0].traj is not tr)
    keep = [(fv, tie, s) for fv, tie, s in rep.heap if s.traj is not tr]
    for fv, tie, s in rep.heap:
        if s.traj is tr:
            rep.k -= s.c0 - s.v0
    heapq.heapify(keep)
    rep.heap = keep
