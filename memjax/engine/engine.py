"""`memjax.Engine`: batched generation on the paged KV cache, driven from the host.

Owns the device state (weights, slots, ring, KV pool) and its placement, the page-pool size, weight swaps and the
public API: `generate(prompts, params)` (one Completion per prompt, in input order) and the streaming form for
agent workflows, `rid = submit(prompt, params)` then `step()` (one device call; returns the Completions that
finished in it). Requests live in a `RequestBook` (request_book.py) and the device side in a placement
(placement.py: one device, or data-parallel groups), so the host code has one path. A request preempted by memory
pressure is requeued and, since sampling keys depend only on (seed, position), ends as it would have unpreempted.
`update_weights` swaps weights without recompiling; `sleep()` frees the pool and rollout weights during updates.
Invariants: prompts are non-empty lists of ints < vocab; `stats` are Python ints summed from per-call device
counters, so nothing overflows in a long run. docs/engine.md describes the loop, sampler and options.
"""

from __future__ import annotations

import collections
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..model.qwen2 import Qwen2
from ..parallel import process_local
from .config import FINISH_NAMES, FINISH_PREEMPTED, Completion, EngineConfig, KVHandle, SamplingParams
from .loop import make_loop
from .placement import placement
from .request_book import RequestBook
from .live_request import LiveRequest, pack_queue
from .sampler import Truncation
from .state import Queue, kv_bytes_per_page
from .weights import engine_layout, uses_layout

_LOOPS: collections.OrderedDict = collections.OrderedDict()  # shared_loop's programs, most recently used last
_MAX_LOOPS = 16


def shared_loop(place, graphdef, mc, local: EngineConfig, attend: tuple | None, truncate):
    """The jitted generation loop for one placement, architecture, group config, attention back-end and truncation,
    shared by every Engine of the process that asks for the same: a new Engine of a shape the process has run
    before neither traces, lowers nor compiles its loop again (jax's in-memory caches of the one jitted function
    hold them). The loop closes over nothing else; the weights, state and queue are its arguments. The 16 most
    recently used loops are kept."""
    key = (place.key, graphdef, mc, local, attend, truncate)
    run = _LOOPS.get(key)
    if run is None:
        fn = None
        if attend is not None:
            from ..kernels import engine_attend

            fn = engine_attend(impl=attend[0], num_splits=attend[1])
        run = _LOOPS[key] = place.compile(make_loop(graphdef, mc, local, attend=fn, truncate=truncate))
        while len(_LOOPS) > _MAX_LOOPS:
            _LOOPS.popitem(last=False)
    _LOOPS.move_to_end(key)
    return run


_absmax = jax.jit(lambda a: jnp.max(jnp.abs(a.astype(jnp.float32))))  # one fused reduction: no f32 copy of the pool


def default_num_pages(model: Qwen2, ecfg: EngineConfig, shards: int = 1) -> int:
    """Pages of one pool; shards = devices that split each page by KV heads (tensor_parallel)."""
    per = kv_bytes_per_page(model.cfg, ecfg)
    budget = ecfg.kv.budget_bytes
    if budget is None:
        stats = jax.local_devices()[0].memory_stats() or {}
        if "bytes_limit" in stats:  # up to memory_utilization of one device's limit, on each of the pool's devices
            limit = ecfg.kv.memory_utilization * stats["bytes_limit"]
            budget = shards * max(int(limit - stats.get("bytes_in_use", 0)), 0)
        else:  # CPU: enough for every slot's full window, capped at 1 GiB
            budget = min(1 << 30, per * (ecfg.max_slots * ecfg.pages_per_seq + 1))
    pages = budget // per
    if pages < ecfg.pages_per_seq + 2:
        raise ValueError(f"KV budget of {budget:,} bytes holds {pages} pages of {per:,} bytes; need at least "
                         f"{ecfg.pages_per_seq + 2} (one {ecfg.window}-token window + headroom + null page)")
    return int(pages)


def decode_splits_auto(max_slots: int, kv_heads: int) -> int:
    """EngineConfig.kernels.decode_splits=0: split-K count of the Pallas decode kernel, from the H100 sweep in
    benchmarks/results/paged_attention_nvidia-h100-80gb-hbm3.json (2 at >= 256 sequence-heads, else 4)."""
    return 2 if max_slots * kv_heads >= 256 else 4


class Engine:
    def __init__(self, model: Qwen2, config: EngineConfig | None = None, devices=None):
        """devices: those a data/tensor-parallel engine spans (default jax.local_devices(); D groups of T =
        tensor_parallel consecutive devices; data_parallel=-1 takes len(devices) // T groups, D > 1 the first
        D x T devices). Ignored when D x T = 1."""
        ecfg = (config or EngineConfig()).resolve(jax.default_backend(), model.cfg.head_dim)  # "auto" decided
        self.config = ecfg
        if ecfg.kernels.compilation_cache_dir:
            jax.config.update("jax_compilation_cache_dir", ecfg.kernels.compilation_cache_dir)
        self.model_config = mc = model.cfg
        self._graphdef, master = nnx.split(model, nnx.Param)
        master = process_local(master)  # a multi-process trainer's weights: this process's copy
        wd = jnp.dtype(mc.dtype if ecfg.kernels.weight_dtype == "compute" else ecfg.kernels.weight_dtype)
        cast = lambda p: jax.tree.map(lambda a: a.astype(wd) if jnp.issubdtype(a.dtype, jnp.floating) else a, p)
        # the engine's own copy, in its layout (memjax/engine/weights.py: fused / per-layer when configured)
        self._cast = jax.jit((lambda p: engine_layout(cast(p), mc, ecfg)) if uses_layout(ecfg) else cast)
        self._master_shapes = jax.tree.map(lambda a: a.shape, master)
        self.place = place = placement(ecfg, jax.local_devices() if devices is None else devices, mc)
        self.data_parallel = d = place.size
        local, t = place.local, ecfg.tensor_parallel
        attend = None  # (impl, decode splits) of a kernel back-end, None for the engine's built-in reference path
        if ecfg.kernels.attention != "reference":
            from ..kernels.paged_attention import resolve_impl

            impl = resolve_impl(ecfg.kernels.attention, ecfg.page_size, mc.head_dim)
            if impl != "reference":  # "auto" off GPU keeps the engine's built-in reference path
                attend = (impl, ecfg.kernels.decode_splits or decode_splits_auto(ecfg.max_slots, mc.num_kv_heads // t))
        self._params = place.params(self._cast(master))  # the engine's own copy; the master is never kept
        per_group = local.kv.num_pages or default_num_pages(model, local, shards=t)
        self.num_pages = d * per_group  # total over the groups (each has its own null page)
        self._new_pool = lambda: place.pool(mc, per_group)
        graphdef = nnx.graphdef(model)
        # the loop for calls where no request has a top-p or top-k (the RL recipes' sampling; no truncation pass,
        # no branch: memjax/engine/sampler.py), and, built on first need, one per truncation a call needs
        self._build_run = lambda truncate: shared_loop(place, graphdef, mc, local, attend, truncate)
        self._run, self._runs_truncating = self._build_run(False), {}
        self._slots, self._ring = place.slots_ring()
        self._pool = self._new_pool()
        self.book = RequestBook(ecfg, mc.vocab_size, d, free_pages=self._free_pages)
        self.device_stats = [collections.Counter() for _ in range(d)]
        self.stats = collections.Counter()

    # -- the request book -----------------------------------------------------------------------------
    def submit(self, prompt, params: SamplingParams | None = None, *, parent: Completion | None = None,
               retain: bool = False) -> int:
        """Queue a request; returns its id. retain=True keeps the finished sequence's KV pages
        (Completion.kv) until `release`; parent=a retained Completion continues that sequence: `prompt`
        holds only the new tokens, appended after the parent's prompt + generated tokens, and the
        parent's full pages are mapped (shared, never written) instead of prefilled again."""
        return self.book.submit(prompt, params, parent=parent, retain=retain)

    def abort(self, rids=None) -> int:
        """Forget the given requests (every unfinished one when None); returns how many were live.

        Queued requests are removed now; a request already on the device finishes there (its slot and
        pages are released as usual, retained pages included) and its completion is dropped by `step`."""
        return self.book.abort(rids)

    def release(self, completion: Completion) -> None:
        """Give back a retained Completion's KV pages (after its continuations are submitted; pages a
        queued child still needs are dropped when it is admitted). Idempotent."""
        self.book.release(completion)

    def _free_pages(self, group: int, row: np.ndarray, n: int) -> None:
        self._pool = self.place.release_row(self._pool, group, row, n)

    @property
    def num_unfinished(self) -> int:
        return len(self.book.live)

    @property
    def retained_pages(self) -> int:
        """Page references held by unreleased KVHandles."""
        return self.book.retained_pages

    # -- weights ------------------------------------------------------------------------------------
    def update_weights(self, params) -> None:
        """Swap in new parameters (an nnx.State of Params, or a Qwen2 module) of identical structure and
        shapes, in any float dtype (e.g. the trainer's fp32 master): the engine keeps only its own copy in
        EngineConfig.kernels.weight_dtype, made by one jitted cast compiled once (no recompilation on refresh)."""
        self._params = None  # drop the old copy first: peak memory is one rollout copy, not two
        self._params = self.prepare_weights(params)

    def prepare_weights(self, params):
        """The engine's copy of `params` (checked, cast to the weight dtype, placed on the engine's devices) without
        installing it: a split schedule makes it when an update ends and installs it before the generation that
        samples with it (`install_weights`), while the engine is still generating with an older copy."""
        new = nnx.state(params, nnx.Param) if isinstance(params, nnx.Module) else params
        new_s = jax.tree.map(lambda a: a.shape, new)
        floats = all(jnp.issubdtype(a.dtype, jnp.floating) for a in jax.tree.leaves(new))
        if jax.tree.structure(self._master_shapes) != jax.tree.structure(new_s) or self._master_shapes != new_s \
                or not floats:
            raise ValueError("update_weights: parameter structure, shapes or dtypes differ from the engine's model")
        new = process_local(new)  # multi-process: all-gathered into this process (the engine never crosses hosts)
        return self.place.params(self._cast(new))

    def install_weights(self, prepared) -> None:
        """Sample with a copy made by `prepare_weights` from now on."""
        self._params = prepared

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
        if self.book.live or self.retained_pages:
            raise RuntimeError(f"Engine.sleep: {len(self.book.live)} unfinished requests and {self.retained_pages} "
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
            self._slots, self._ring = self.place.slots_ring()
            self.book.reset_device_state()
            self.stats["sleeps"] += 1
        return freed

    def kv_absmax(self) -> tuple[float, float]:
        """(max |K|, max |V|) over the KV pool as stored, times its scales: the per-tensor calibration of a float8
        pool (EngineConfig.kv.k_scale = max |K| / 448 puts the largest cached value at the top of e4m3's range).
        Read after a representative generate() on a compute-dtype engine (unused pages hold zeros)."""
        if self._pool is None:
            raise RuntimeError("Engine.kv_absmax: the engine is asleep (no KV pool)")
        kv = self.config.kv
        return float(_absmax(self._pool.k)) * kv.k_scale, float(_absmax(self._pool.v)) * kv.v_scale

    @property
    def asleep(self) -> bool:
        return self._pool is None

    def _wake(self) -> None:
        if self._params is None:
            raise RuntimeError("Engine: the rollout weights were freed by sleep(); call update_weights first")
        if self._pool is None:
            self._pool = self._new_pool()

    # -- device calls -------------------------------------------------------------------------------
    def _queue(self) -> tuple[Queue, list[list[LiveRequest]]]:
        """The device queue ([D, Q / D] per group, placed) and its rows per device group."""
        ecfg, d, pending = self.config, self.data_parallel, self.book.pending
        q = ecfg.queue_len // d
        rows = [list(itertools.islice((r for r in pending if r.device == g), q)) for g in range(d)] \
            if d > 1 else [list(itertools.islice(pending, q))]
        return self.place.queue(pack_queue(rows, ecfg, q)), rows

    def step(self, max_rounds: int | None = None, idle_return: int | None = None) -> list[Completion]:
        """One device call: up to max_rounds (default rounds_per_sync) rounds, or fewer when idle_return
        (default EngineConfig.idle_return; 0 = off) slots go idle after a finish (per device group, at most
        its max_slots / D, with data_parallel). Returns finished requests."""
        book = self.book
        if not book.live:
            return []
        self._wake()
        queue, rows = self._queue()
        idle = min(self.config.idle_return if idle_return is None else idle_return, self.place.max_idle)
        self._slots, self._pool, queue, self._ring, counters = self._loop_for_call()(
            self._params, self._slots, self._pool, queue, self._ring,
            jnp.int32(max_rounds or self.config.rounds_per_sync), jnp.int32(idle))
        admitted, ring, cnt = self.place.fetch((queue.admitted, self._ring, counters))  # [D, ...] host arrays
        if int(cnt.rounds.sum()) == 0:
            raise RuntimeError(f"Engine.step: no progress with {len(book.live)} unfinished requests "
                               f"({len(book.pending)} queued, {int(np.sum(self._pool.n_free))} free pages, "
                               f"{self.retained_pages} held by unreleased KVHandles: Engine.release them)")
        taken = {r.rid for g in range(self.data_parallel) for r, ok in zip(rows[g], admitted[g, : len(rows[g])]) if ok}
        for r in (r for rs in rows for r in rs):
            if r.rid in taken:
                self.stats["continued_tokens"] += book.admitted(r)
        book.pending = collections.deque(r for r in book.pending if r.rid not in taken)
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
            if rid not in book.live:  # aborted while on the device (finished or preempted: it has left it)
                book.aborted.discard(rid)
                if ring.retained[g, i] and int(ring.reason[g, i]) != FINISH_PREEMPTED:  # nobody will release them
                    book.maybe_free(book.retain(KVHandle(
                        pages=tuple(ring.page_table[g, i, : int(ring.n_pages[g, i])].tolist()), n_cached=0,
                        tokens=[], released=True, device=g)))
                continue
            req = book.live[rid]
            p, n = int(ring.prompt_len[g, i]), int(ring.n_gen[g, i])
            new = ring.tokens[g, i, p: p + n].tolist()
            req.gen += new
            req.lps += ring.logprobs[g, i, p: p + n].tolist()
            if int(ring.reason[g, i]) == FINISH_PREEMPTED:
                req.preemptions += 1
                req.prompt = req.prompt[:p] + new
                requeue.append(req)
                continue
            book.finish(req)
            kv = None
            if ring.retained[g, i]:
                kv = book.retain(KVHandle(pages=tuple(ring.page_table[g, i, : int(ring.n_pages[g, i])].tolist()),
                                          n_cached=int(ring.seq_len[g, i]), tokens=ring.tokens[g, i, : p + n].tolist(),
                                          truncated=req.truncated, device=g))
            done.append(Completion(token_ids=req.gen, logprobs=req.lps,
                                   finish_reason=FINISH_NAMES[int(ring.reason[g, i])], prompt_len=req.orig_len,
                                   request_id=req.rid, preemptions=req.preemptions, prompt_truncated=req.truncated,
                                   kv=kv))
        book.pending.extendleft(reversed(requeue))
        self._ring = self._ring.replace(count=self.place.zero_counts())
        return done

    def _loop_for_call(self):
        """The compiled loop for this call: with the searches for top-p and for top-k that some live (queued or running)
        request samples with, and none when none does (a request aborted while on the device finishes with them; its
        output is dropped)."""
        live = [r.params for r in self.book.live.values() if r.params.temperature > 0]
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
        checked = [self.book.check(p, sp or SamplingParams()) for p, sp in zip(prompts, plist)]  # all, before any
        rids = [self.book.enqueue(*c) for c in checked]  # is queued
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
