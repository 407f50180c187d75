"""`memjax.Engine`: batched generation on the paged KV cache, driven from the host.

Owns: the request lifecycle on the host side (submit -> device queue -> completion), the page-pool
size, weight swaps, and the public `generate` / `submit` + `step` API. The request book (validation, ids,
prefix-sharing groups, continuations, `abort`, `release`) is the `Submissions` mixin, memjax/engine/submission.py.
- `generate(prompts, params)` returns one Completion per prompt, in input order.
- Rounds (EngineConfig.schedule; "auto" = mixed on CPU, split on GPUs): "mixed" packs every running sequence's decode token and
  prefill chunks of pending prompts into one forward of at most token_budget tokens (memjax/engine/mixed.py);
  "split" runs padded prefill rounds and pauses decoding while a prompt is pending. Same tokens either way.
- Streaming form for agent workflows: `rid = submit(prompt, params)`; `step()` runs one device call
  (up to `rounds_per_sync` rounds) and returns the Completions that finished in it; the caller may
  submit follow-up turns before the next `step()`, so trajectories advance independently; with
  `step(idle_return=n)` (or EngineConfig.idle_return) the call comes back as soon as a turn finished and
  n slots sit idle with nothing queued, so chained turns do not run in lockstep.
- Identical prompts submitted while an earlier copy is queued or running share its full prompt pages
  (prefix sharing for GRPO groups): they form a group, and a member shares from any running member.
- A request preempted by memory pressure comes back from the device with what it generated so far
  and is requeued at the front with prompt + generated tokens; because sampling keys depend only on
  (seed, position), its final output is the one it would have produced unpreempted.
- Multi-turn continuation: `submit(..., retain=True)` keeps a finished sequence's KV pages
  (Completion.kv); `submit(new_tokens, parent=completion)` appends new_tokens to that sequence and maps
  its full pages (refcount + 1, never written: the partial last page is recomputed, < page_size tokens)
  instead of prefilling the history again; `release(completion)` gives the pages back. A 20-turn agent
  retains every turn, continues it, then releases the parent. stats["continued_tokens"] = prefill saved.
- `update_weights(params)` swaps in new policy weights of the same shapes without recompiling; the engine
  holds only its own copy in `EngineConfig.weight_dtype` (bf16 for real configs), never the fp32 master.
- `sleep()` frees the KV pool and the rollout weights while the trainer updates (hybrid engine: the two
  peaks do not add); the next device call allocates an empty pool again, after `update_weights`.
- `abort(rids=None)` forgets requests (all when None): queued ones leave the queue at once; one already
  on the device runs to its end there and its completion is dropped (retained pages freed), so after an
  exception inside a workflow the engine serves the next caller with no orphan completions. `generate`
  validates every prompt before enqueueing any and aborts its own requests if it is interrupted.
- Data parallel (EngineConfig.data_parallel = D > 1, memjax/engine/data_parallel.py): the slots, KV pool,
  queue and ring are split into D device groups (one per device, weights replicated). The host assigns
  each request to a group when it is submitted: a prefix-sharing group (identical prompts) and a
  continuation (its parent's pages) go where their pages are, anything else to the group with the fewest
  tokens (prompt + max_tokens) of live requests; a request stays in its group (also when preempted).
  With tensor_parallel = T each group spans T devices that split its heads and its pool's KV heads.
  `device_stats[d]` holds group d's counters; `stats` their sums, and stats["wall_rounds"] the rounds of the
  slowest group per call, summed (= rounds with one group). D = 1 runs the single-device loop, with the weights and
  every state array it is handed committed to the engine's device (one argument sharding per call: one compile).
- Compiled loops: the one for calls where no live request samples with a top-p or top-k (built with the engine; the
  RL recipes sample at top_p = 1), and, compiled on first need, one per truncation a call needs (top-p, top-k or
  both: `sampler.Truncation`; an evaluation at top_p < 1 adds one), which computes only those thresholds in every
  round; either way the sampler makes no branch decision on the device (memjax/engine/loop.py).
Counters: request and group ids wrap below 2**31 - 1 (unique among live requests); `stats` are Python
ints summed from per-call device counters, so nothing overflows in a week-long run.
Invariants: prompts are non-empty lists of ints < vocab; prompt_len < window unless
overlong_prompt="truncate_left" (keeps the last window - 1 tokens, recorded in Completion.prompt_truncated).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..model.qwen2 import Qwen2
from ..parallel import process_local
from .config import FINISH_NAMES, FINISH_PREEMPTED, Completion, EngineConfig, KVHandle, SamplingParams
from .data_parallel import DataParallel
from .loop import make_loop, make_run
from .requests import Request, pack_queue
from .sampler import Truncation
from .state import Queue, init_pool, init_ring, init_slots, kv_bytes_per_page, release_row
from .submission import Submissions
from .weights import engine_layout, uses_layout

_absmax = jax.jit(lambda a: jnp.max(jnp.abs(a.astype(jnp.float32))))  # one fused reduction: no f32 copy of the pool


def default_num_pages(model: Qwen2, ecfg: EngineConfig, shards: int = 1) -> int:
    """Pages of one pool; shards = devices that split each page by KV heads (tensor_parallel)."""
    per = kv_bytes_per_page(model.cfg, ecfg)
    budget = ecfg.kv_budget_bytes
    if budget is None:
        stats = jax.local_devices()[0].memory_stats() or {}
        if "bytes_limit" in stats:  # free memory of one device, on each of the pool's devices
            budget = shards * int(0.9 * (stats["bytes_limit"] - stats.get("bytes_in_use", 0)))
        else:  # CPU: enough for every slot's full window, capped at 1 GiB
            budget = min(1 << 30, per * (ecfg.max_slots * ecfg.pages_per_seq + 1))
    pages = budget // per
    if pages < ecfg.pages_per_seq + 2:
        raise ValueError(f"KV budget of {budget:,} bytes holds {pages} pages of {per:,} bytes; need at least "
                         f"{ecfg.pages_per_seq + 2} (one {ecfg.window}-token window + headroom + null page)")
    return int(pages)


def decode_splits_auto(max_slots: int, kv_heads: int) -> int:
    """EngineConfig.decode_splits=0: split-K count of the Pallas decode kernel, from the H100 sweep in
    benchmarks/results/paged_attention_nvidia-h100-80gb-hbm3.json (2 at >= 256 sequence-heads, else 4)."""
    return 2 if max_slots * kv_heads >= 256 else 4


class Engine(Submissions):
    def __init__(self, model: Qwen2, config: EngineConfig | None = None, devices=None):
        """devices: those a data/tensor-parallel engine spans (default jax.local_devices(); D groups of T =
        tensor_parallel consecutive devices; data_parallel=-1 takes len(devices) // T groups, D > 1 the first
        D x T devices). Ignored when D x T = 1."""
        ecfg = config or EngineConfig()
        if ecfg.schedule == "auto":  # memjax/engine/config.py: mixed on CPU, split on GPUs (the ragged kernel untimed)
            mixed = jax.default_backend() == "cpu" and not ecfg.fuse_rope_kv  # the fused kernel is a split round's
            ecfg = dataclasses.replace(ecfg, schedule="mixed" if mixed else "split")
        self.config = ecfg
        if ecfg.compilation_cache_dir:
            jax.config.update("jax_compilation_cache_dir", ecfg.compilation_cache_dir)
        self.model_config = model.cfg
        self._graphdef, master = nnx.split(model, nnx.Param)
        master = process_local(master)  # a multi-process trainer's weights: this process's copy
        wd = jnp.dtype(model.cfg.dtype if ecfg.weight_dtype == "compute" else ecfg.weight_dtype)
        cast = lambda p: jax.tree.map(lambda a: a.astype(wd) if jnp.issubdtype(a.dtype, jnp.floating) else a, p)
        # the engine's own copy, in its layout (memjax/engine/weights.py: fused / per-layer when configured)
        self._cast = jax.jit((lambda p: engine_layout(cast(p), model.cfg, ecfg)) if uses_layout(ecfg) else cast)
        self._master_shapes = jax.tree.map(lambda a: a.shape, master)
        attend = None
        devs = list(jax.local_devices() if devices is None else devices)
        t, mc = ecfg.tensor_parallel, model.cfg
        if ecfg.attention != "reference":
            from ..kernels import engine_attend
            from ..kernels.paged_attention import resolve_impl

            impl = resolve_impl(ecfg.attention, ecfg.page_size, mc.head_dim)
            if impl != "reference":  # "auto" off GPU keeps the engine's built-in reference path
                splits = ecfg.decode_splits or decode_splits_auto(ecfg.max_slots, mc.num_kv_heads // t)
                attend = engine_attend(impl=impl, num_splits=splits)
        d = len(devs) // t if ecfg.data_parallel == -1 else ecfg.data_parallel
        if d < 1 or d * t > len(devs):
            raise ValueError(f"EngineConfig data_parallel={ecfg.data_parallel} x tensor_parallel={t} needs more than "
                             f"the {len(devs)} device(s) the engine was given")
        if (mc.num_heads % t or mc.num_kv_heads % t or mc.intermediate_size % t) and t > 1:
            raise ValueError(f"EngineConfig.tensor_parallel={t} must divide the model's heads ({mc.num_heads}), KV "
                             f"heads ({mc.num_kv_heads}) and MLP width ({mc.intermediate_size})")
        ecfg.per_device(d)  # the totals must split into d groups (data_parallel=-1 is resolved only here)
        self.data_parallel = d
        self._dp = DataParallel(devs[: d * t], tensor=t) if d * t > 1 else None
        if self._dp is None:
            # weights, slots, ring and pool committed to the engine's device (a re-commit, no copy): the loop sees
            # the same argument shardings on every call. A multi-process trainer's weights arrive committed; with
            # the state uncommitted, the first call's outputs (committed) made the second call compile the whole
            # loop again (two-process tiny run: 13.3 s, then 15.0 s of compiling; one compile now)
            put = functools.partial(jax.device_put, device=devs[0])
            self._put = put
            self._params = put(self._cast(master))  # the engine's own copy; the master is never kept
            self.num_pages = ecfg.num_pages or default_num_pages(model, ecfg)
            self._new_slots_ring = lambda: put((init_slots(ecfg), init_ring(ecfg)))
            self._new_pool = lambda: put(init_pool(model.cfg, ecfg, self.num_pages))
            build = functools.partial(make_run, nnx.graphdef(model), model.cfg, ecfg, attend=attend)
            release = jax.jit(release_row, donate_argnums=0)
            self._release_row = lambda pool, _, row, n: release(pool, jnp.asarray(row), jnp.int32(n))
        else:
            self.local_config = local = ecfg.per_device(d)  # one group's shapes (totals / d)
            self._params = self._dp.shard_params(self._cast(master))
            per_group = local.num_pages or default_num_pages(model, local, shards=t)
            self.num_pages = d * per_group  # total over the groups (each has its own null page)
            self._new_slots_ring = lambda: self._dp.init_slots_ring(local)
            self._new_pool = lambda: self._dp.init_pool(model.cfg, local, per_group)
            build = lambda truncate: self._dp.run(make_loop(nnx.graphdef(model), model.cfg, local, attend=attend,
                                                            truncate=truncate))
            self._release_row = self._dp.release_row
        # the loop for calls where no request has a top-p or top-k (the RL recipes' sampling; no truncation pass,
        # no branch: memjax/engine/sampler.py), and, built on first need, one per truncation a call needs
        self._run = build(truncate=False)
        self._build_run, self._runs_truncating = build, {}
        self._slots, self._ring = self._new_slots_ring()
        self._pool = self._new_pool()
        self._load = [0] * d  # per group: prompt + max_tokens of its live requests (the balance key)
        self.device_stats = [collections.Counter() for _ in range(d)]
        self.retained_pages = 0  # page references held by unreleased KVHandles
        self._pending: collections.deque[Request] = collections.deque()
        self._live: dict[int, Request] = {}  # rid -> request, queued or running
        self._groups: dict[tuple[int, ...], tuple[int, set[int]]] = {}  # prompt -> (group id, live rids)
        self._next_id = {"req": 0, "group": 0}  # wrap at 2**31 - 1 (device int32), skipping live ids
        self._live_gids: set[int] = set()
        self._aborted: set[int] = set()  # aborted while on the device: their completions are dropped
        self.stats = collections.Counter()

    # -- weights ------------------------------------------------------------------------------------
    def update_weights(self, params) -> None:
        """Swap in new parameters (an nnx.State of Params, or a Qwen2 module) of identical structure and
        shapes, in any float dtype (e.g. the trainer's fp32 master): the engine keeps only its own copy in
        EngineConfig.weight_dtype, made by one jitted cast compiled once (no recompilation on refresh)."""
        new = nnx.state(params, nnx.Param) if isinstance(params, nnx.Module) else params
        new_s = jax.tree.map(lambda a: a.shape, new)
        floats = all(jnp.issubdtype(a.dtype, jnp.floating) for a in jax.tree.leaves(new))
        if jax.tree.structure(self._master_shapes) != jax.tree.structure(new_s) or self._master_shapes != new_s \
                or not floats:
            raise ValueError("update_weights: parameter structure, shapes or dtypes differ from the engine's model")
        self._params = None  # drop the old copy first: peak memory is one rollout copy, not two
        new = process_local(new)  # multi-process: all-gathered into this process (the engine never crosses hosts)
        self._params = self._put(self._cast(new)) if self._dp is None else self._dp.shard_params(self._cast(new))

    def wait_weights(self) -> None:
        """Block until the last `update_weights` hand-off has landed on the engine's devices (timing)."""
        if self._params is not None:
            jax.block_until_ready(self._params)

    # -- hybrid-engine memory: free the pool while the trainer runs -----------------------------------
    def sleep(self, weights: bool = True) -> int:
        """Free the KV pool (and, with weights=True, the rollout copy of the weights) between rollouts, so
        that the trainer's update and the engine's pool do not need memory at the same time (verl's hybrid
        engine does the same). Refused while a request is live or a retained KVHandle is unreleased (their
        pages live in the pool). The pool is allocated again, empty, by the next device call; after
        weights=True, `update_weights` must come before it. Requests aborted while on the device are dropped
        with their slots. Returns the bytes freed (0 when already asleep)."""
        if self._live or self.retained_pages:
            raise RuntimeError(f"Engine.sleep: {len(self._live)} unfinished requests and {self.retained_pages} "
                               "retained pages live in the KV pool; finish, abort or release them first")
        targets = [t for t in (self._pool, self._params if weights else None) if t is not None]
        if not targets:
            return 0
        freed = 0
        for a in jax.tree.leaves(targets):
            freed += a.nbytes
            a.delete()
        if weights:
            self._params = None
        if self._pool is not None:
            self._pool = None
            # requests aborted while on the device lose their slots with the pool: fresh slots and ring
            self._slots, self._ring = self._new_slots_ring()
            self._aborted.clear()
            self._groups.clear()
            self._live_gids.clear()
            self.stats["sleeps"] += 1
        return freed

    def kv_absmax(self) -> tuple[float, float]:
        """(max |K|, max |V|) over the KV pool as stored, times its scales: the per-tensor calibration of a float8
        pool (EngineConfig.k_scale = max |K| / 448 puts the largest cached value at the top of e4m3's range).
        Read after a representative generate() on a compute-dtype engine (unused pages hold zeros)."""
        if self._pool is None:
            raise RuntimeError("Engine.kv_absmax: the engine is asleep (no KV pool)")
        return (float(_absmax(self._pool.k)) * self.config.k_scale, float(_absmax(self._pool.v)) * self.config.v_scale)

    @property
    def asleep(self) -> bool:
        return self._pool is None

    def _wake(self) -> None:
        if self._params is None:
            raise RuntimeError("Engine: the rollout weights were freed by sleep(); call update_weights first")
        if self._pool is None:
            self._pool = self._new_pool()

    # -- device calls -------------------------------------------------------------------------------
    def _queue(self) -> tuple[Queue, list[list[Request]]]:
        """The device queue ([Q] arrays; [D, Q / D] with data_parallel) and its rows per device group."""
        ecfg, d = self.config, self.data_parallel
        q = ecfg.queue_len // d
        rows = [list(itertools.islice((r for r in self._pending if r.device == g), q)) for g in range(d)] \
            if d > 1 else [list(itertools.islice(self._pending, q))]
        queue = pack_queue(rows, ecfg, q)
        if self._dp is not None:
            return self._dp.put(queue), rows
        return jax.tree.map(lambda x: jnp.asarray(x[0]), queue), rows

    def step(self, max_rounds: int | None = None, idle_return: int | None = None) -> list[Completion]:
        """One device call: up to max_rounds (default rounds_per_sync) rounds, or fewer when idle_return
        (default EngineConfig.idle_return; 0 = off) slots go idle after a finish (per device group, at most
        its max_slots / D, with data_parallel). Returns finished requests."""
        if not self._live:
            return []
        self._wake()
        queue, rows = self._queue()
        idle = self.config.idle_return if idle_return is None else idle_return
        if self._dp is not None:
            idle = min(idle, self.local_config.max_slots)
        self._slots, self._pool, queue, self._ring, counters = self._loop_for_call()(
            self._params, self._slots, self._pool, queue, self._ring,
            jnp.int32(max_rounds or self.config.rounds_per_sync), jnp.int32(idle))
        admitted, ring, cnt = jax.device_get((queue.admitted, self._ring, counters))
        if self._dp is None:  # one group: the same [D = 1] view as a data-parallel engine's
            admitted, ring, cnt = jax.tree.map(lambda x: np.asarray(x)[None], (admitted, ring, cnt))
        if int(cnt.rounds.sum()) == 0:
            raise RuntimeError(f"Engine.step: no progress with {len(self._live)} unfinished requests "
                               f"({len(self._pending)} queued, {int(np.sum(self._pool.n_free))} free pages, "
                               f"{self.retained_pages} held by unreleased KVHandles: Engine.release them)")
        taken = {r.rid for g in range(self.data_parallel) for r, ok in zip(rows[g], admitted[g, : len(rows[g])]) if ok}
        for r in (r for rs in rows for r in rs):
            if r.rid in taken and r.parent is not None:  # the child now holds its own page references
                self.stats["continued_tokens"] += r.prefix_pages * self.config.page_size
                r.parent.holders -= 1
                self._maybe_free(r.parent)
                r.parent = None
        self._pending = collections.deque(r for r in self._pending if r.rid not in taken)
        for f in ("rounds", "prefill_rounds", "preemptions", "prefill_tokens", "decode_tokens", "shared_pages",
                  "prefill_executed"):
            v = getattr(cnt, f)  # this call's counts; Python ints never overflow
            self.stats[f] += int(v.sum())
            for g in range(self.data_parallel):
                self.device_stats[g][f] += int(v[g])
        self.stats["wall_rounds"] += int(cnt.rounds.max())  # groups run their rounds side by side
        done, requeue = [], []
        for g, i in ((g, i) for g in range(self.data_parallel) for i in range(int(ring.count[g]))):
            rid = int(ring.req[g, i])
            if rid not in self._live:  # aborted while on the device (finished or preempted: it has left it)
                self._aborted.discard(rid)
                if ring.retained[g, i] and int(ring.reason[g, i]) != FINISH_PREEMPTED:  # nobody will release them
                    orphan = KVHandle(pages=tuple(ring.page_table[g, i, : int(ring.n_pages[g, i])].tolist()),
                                      n_cached=0, tokens=[], released=True, device=g)
                    self.retained_pages += len(orphan.pages)
                    self._maybe_free(orphan)
                continue
            req = self._live[rid]
            p, n = int(ring.prompt_len[g, i]), int(ring.n_gen[g, i])
            new = ring.tokens[g, i, p: p + n].tolist()
            req.gen += new
            req.lps += ring.logprobs[g, i, p: p + n].tolist()
            if int(ring.reason[g, i]) == FINISH_PREEMPTED:
                req.preemptions += 1
                req.prompt = req.prompt[:p] + new
                requeue.append(req)
                continue
            del self._live[req.rid]
            self._discharge(req)
            self._forget(req)
            kv = None
            if ring.retained[g, i]:
                kv = KVHandle(pages=tuple(ring.page_table[g, i, : int(ring.n_pages[g, i])].tolist()),
                              n_cached=int(ring.seq_len[g, i]), tokens=ring.tokens[g, i, : p + n].tolist(),
                              truncated=req.truncated, device=g)
                self.retained_pages += len(kv.pages)
            done.append(Completion(token_ids=req.gen, logprobs=req.lps,
                                   finish_reason=FINISH_NAMES[int(ring.reason[g, i])], prompt_len=req.orig_len,
                                   request_id=req.rid, preemptions=req.preemptions, prompt_truncated=req.truncated,
                                   kv=kv))
        self._pending.extendleft(reversed(requeue))
        self._ring = self._ring.replace(count=self._put(jnp.int32(0)) if self._dp is None
                                        else self._dp.put(np.zeros(self.data_parallel, np.int32)))
        return done

    def _loop_for_call(self):
        """The compiled loop for this call: with the searches for top-p and for top-k that some live (queued or running)
        request samples with, and none when none does (a request aborted while on the device finishes with them; its
        output is dropped)."""
        live = [r.params for r in self._live.values() if r.params.temperature > 0]
        tr = Truncation(top_k=any(p.top_k > 0 for p in live), top_p=any(p.top_p < 1 for p in live))
        if not tr.any:
            return self._run
        if tr not in self._runs_truncating:
            self._runs_truncating[tr] = self._build_run(truncate=tr)
        return self._runs_truncating[tr]

    def generate(self, prompts, params: SamplingParams | list[SamplingParams] | None = None) -> list[Completion]:
        """Generate for every prompt (continuous batching); Completions in input order."""
        if isinstance(params, (list, tuple)):
            if len(params) != len(prompts):
                raise ValueError(f"Engine.generate: {len(params)} SamplingParams for {len(prompts)} prompts")
            plist = list(params)
        else:
            plist = [params or SamplingParams()] * len(prompts)
        checked = [self._check(p, sp or SamplingParams()) for p, sp in zip(prompts, plist)]  # all, before any is queued
        rids = [self._enqueue(*c) for c in checked]
        try:
            return self._collect(rids)
        except BaseException:
            self.abort(rids)
            raise

    def _collect(self, rids: list[int]) -> list[Completion]:
        want, out = set(rids), {}
        show = self.config.progress and len(rids) >= 8 and jax.process_index() == 0  # bars: process 0 only
        with Progress(TextColumn("generate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[tok]} tok"), disable=not show, transient=True) as bar:
            task = bar.add_task("gen", total=len(rids), tok=0)
            while want - out.keys():
                for c in self.step(idle_return=0):
                    out[c.request_id] = c
                bar.update(task, completed=len(out.keys() & want), tok=self.stats["decode_tokens"])
        return [out[r] for r in rids]
