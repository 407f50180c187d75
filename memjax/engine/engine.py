"""`memjax.Engine`: batched generation on the paged KV cache, driven from the host.

Owns: the request lifecycle on the host side (submit -> device queue -> completion), the page-pool
size, weight swaps, and the public `generate` / `submit` + `step` API.
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
Counters: request and group ids wrap below 2**31 - 1 (unique among live requests); `stats` are Python
ints summed from per-call device counters, so nothing overflows in a week-long run.
Invariants: prompts are non-empty lists of ints < vocab; prompt_len < window unless
overlong_prompt="truncate_left" (keeps the last window - 1 tokens, recorded in Completion.prompt_truncated).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..model.qwen2 import Qwen2
from .config import FINISH_NAMES, FINISH_PREEMPTED, Completion, EngineConfig, KVHandle, SamplingParams
from .loop import make_run
from .state import Queue, init_pool, init_ring, init_slots, kv_bytes_per_page, release_row

_ID_LIMIT = 2**31 - 1


@dataclass
class _Request:
    rid: int
    prompt: list[int]  # current prompt (original + generated before any preemption)
    orig_len: int
    params: SamplingParams
    seed: int
    group: int = -1
    shared_pages: int = 0
    truncated: int = 0
    gen: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)
    preemptions: int = 0
    retain: bool = False
    parent: KVHandle | None = None  # until admitted
    prefix_pages: int = 0  # full parent pages mapped instead of prefilled


def default_num_pages(model: Qwen2, ecfg: EngineConfig) -> int:
    per = kv_bytes_per_page(model.cfg, ecfg)
    budget = ecfg.kv_budget_bytes
    if budget is None:
        stats = jax.devices()[0].memory_stats() or {}
        if "bytes_limit" in stats:
            budget = int(0.9 * (stats["bytes_limit"] - stats.get("bytes_in_use", 0)))
        else:  # CPU: enough for every slot's full window, capped at 1 GiB
            budget = min(1 << 30, per * (ecfg.max_slots * ecfg.pages_per_seq + 1))
    pages = budget // per
    if pages < ecfg.pages_per_seq + 2:
        raise ValueError(f"KV budget of {budget:,} bytes holds {pages} pages of {per:,} bytes; need at least "
                         f"{ecfg.pages_per_seq + 2} (one {ecfg.window}-token window + headroom + null page)")
    return int(pages)


class Engine:
    def __init__(self, model: Qwen2, config: EngineConfig | None = None):
        ecfg = config or EngineConfig()
        if ecfg.schedule == "auto":  # memjax/engine/config.py: mixed on CPU, split on GPUs (no ragged kernel yet)
            ecfg = dataclasses.replace(ecfg, schedule="mixed" if jax.default_backend() == "cpu" else "split")
        self.config = ecfg
        if ecfg.compilation_cache_dir:
            jax.config.update("jax_compilation_cache_dir", ecfg.compilation_cache_dir)
        self.model_config = model.cfg
        self._graphdef, master = nnx.split(model, nnx.Param)
        wd = jnp.dtype(model.cfg.dtype if ecfg.weight_dtype == "compute" else ecfg.weight_dtype)
        self._cast = jax.jit(lambda p: jax.tree.map(
            lambda a: a.astype(wd) if jnp.issubdtype(a.dtype, jnp.floating) else a, p))
        self._master_shapes = jax.tree.map(lambda a: a.shape, master)
        self._params = self._cast(master)  # the engine's own copy; the master is never kept
        self.num_pages = ecfg.num_pages or default_num_pages(model, ecfg)
        self._slots = init_slots(ecfg)
        self._pool = init_pool(model.cfg, ecfg, self.num_pages)
        self._ring = init_ring(ecfg)
        attend = None
        if ecfg.attention != "reference":
            from ..kernels import engine_attend

            attend = engine_attend(impl=ecfg.attention, num_splits=ecfg.decode_splits)
        self._run = make_run(nnx.graphdef(model), model.cfg, ecfg, attend=attend)
        self._release_row = jax.jit(release_row, donate_argnums=0)
        self.retained_pages = 0  # page references held by unreleased KVHandles
        self._pending: collections.deque[_Request] = collections.deque()
        self._live: dict[int, _Request] = {}  # rid -> request, queued or running
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
        self._params = self._cast(new)

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
            self._slots, self._ring = init_slots(self.config), init_ring(self.config)
            self._aborted.clear()
            self._groups.clear()
            self._live_gids.clear()
            self.stats["sleeps"] += 1
        return freed

    @property
    def asleep(self) -> bool:
        return self._pool is None

    def _wake(self) -> None:
        if self._params is None:
            raise RuntimeError("Engine: the rollout weights were freed by sleep(); call update_weights first")
        if self._pool is None:
            self._pool = init_pool(self.model_config, self.config, self.num_pages)

    # -- submission ---------------------------------------------------------------------------------
    def submit(self, prompt, params: SamplingParams | None = None, *, parent: Completion | None = None,
               retain: bool = False) -> int:
        """Queue a request; returns its id. retain=True keeps the finished sequence's KV pages
        (Completion.kv) until `release`; parent=a retained Completion continues that sequence: `prompt`
        holds only the new tokens, appended after the parent's prompt + generated tokens, and the
        parent's full pages are mapped (shared, never written) instead of prefilled again."""
        params = params or SamplingParams()
        if parent is not None:
            return self._submit_continuation(self._check_tokens(prompt, params), params, parent, retain)
        return self._enqueue(*self._check(prompt, params), retain=retain)

    def _check_tokens(self, prompt, params: SamplingParams) -> list[int]:
        ecfg, vocab = self.config, self.model_config.vocab_size
        bad = next((t for t in prompt if isinstance(t, bool) or not isinstance(t, (int, np.integer))), None)
        if bad is not None:
            raise ValueError(f"Engine.submit: prompt token ids must be integers, got {bad!r} ({type(bad).__name__})")
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError("Engine.submit: prompt is empty")
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"Engine.submit: prompt has token ids outside [0, {vocab})")
        if len(params.stop_token_ids) > ecfg.max_stop_ids:
            raise ValueError(f"Engine.submit: {len(params.stop_token_ids)} stop ids > EngineConfig.max_stop_ids="
                             f"{ecfg.max_stop_ids}")
        return prompt

    def _check(self, prompt, params: SamplingParams) -> tuple[list[int], SamplingParams, int]:
        """Validate one request; returns (prompt as ints, params, tokens truncated). Enqueues nothing."""
        ecfg = self.config
        prompt = self._check_tokens(prompt, params)
        truncated = 0
        if len(prompt) >= ecfg.window:
            if ecfg.overlong_prompt == "error":
                raise ValueError(f"Engine.submit: prompt of {len(prompt)} tokens leaves no room in the "
                                 f"{ecfg.window}-token window (set overlong_prompt='truncate_left' to keep its end)")
            truncated = len(prompt) - (ecfg.window - 1)
            prompt = prompt[truncated:]
        return prompt, params, truncated

    def _enqueue(self, prompt: list[int], params: SamplingParams, truncated: int, retain: bool = False) -> int:
        ecfg = self.config
        rid = self._fresh_id("req", self._live.keys() | self._aborted)
        seed = params.seed if params.seed is not None else (ecfg.seed * 1_000_003 + rid) % (2**31 - 1)
        if tuple(prompt) not in self._groups:
            self._groups[tuple(prompt)] = (self._fresh_id("group", self._live_gids), set())
            self._live_gids.add(self._groups[tuple(prompt)][0])
        gid, members = self._groups[tuple(prompt)]
        members.add(rid)
        self._live[rid] = _Request(rid, prompt, len(prompt), params, seed, group=gid, truncated=truncated,
                                   shared_pages=(len(prompt) - 1) // ecfg.page_size, retain=retain)
        self._pending.append(self._live[rid])
        return rid

    def abort(self, rids=None) -> int:
        """Forget the given requests (every unfinished one when None); returns how many were live.

        Queued requests are removed now; a request already on the device finishes there (its slot and
        pages are released as usual, retained pages included) and its completion is dropped by `step`."""
        targets = set(self._live) if rids is None else {int(r) for r in rids} & set(self._live)
        queued = {r.rid for r in self._pending}
        self._pending = collections.deque(r for r in self._pending if r.rid not in targets)
        for rid in targets:
            req = self._live.pop(rid)
            self._forget(req)
            if req.parent is not None:  # a continuation never admitted: its parent's pages are not needed
                req.parent.holders -= 1
                self._maybe_free(req.parent)
                req.parent = None
        self._aborted |= targets - queued
        return len(targets)

    def _forget(self, req: _Request) -> None:
        if req.group < 0:
            return
        key = tuple(req.prompt[: req.orig_len])
        if key in self._groups:
            self._groups[key][1].discard(req.rid)
            if not self._groups[key][1]:
                self._live_gids.discard(self._groups.pop(key)[0])

    def _submit_continuation(self, new: list[int], params: SamplingParams, parent: Completion, retain: bool) -> int:
        kv, ecfg = parent.kv, self.config
        if kv is None or kv.released:
            raise ValueError("Engine.submit: parent has no retained KV pages (submit it with retain=True "
                             "and do not release it before its continuations are submitted)")
        full = kv.tokens + new
        if len(full) >= ecfg.window:
            raise ValueError(f"Engine.submit: continuation of {len(full)} tokens leaves no room in the "
                             f"{ecfg.window}-token window")
        rid = self._fresh_id("req", self._live.keys() | self._aborted)
        seed = params.seed if params.seed is not None else (ecfg.seed * 1_000_003 + rid) % (2**31 - 1)
        kv.holders += 1
        n_prefix = min(kv.n_cached // ecfg.page_size, (len(full) - 1) // ecfg.page_size, len(kv.pages))
        self._live[rid] = _Request(rid, full, len(full), params, seed, group=-1, truncated=kv.truncated,
                                   retain=retain, parent=kv, prefix_pages=n_prefix)
        self._pending.append(self._live[rid])
        return rid

    def release(self, completion: Completion) -> None:
        """Give back a retained Completion's KV pages (after its continuations are submitted; pages a
        queued child still needs are dropped when it is admitted). Idempotent."""
        kv = completion.kv
        if kv is None or kv.released:
            return
        kv.released = True
        self._maybe_free(kv)

    def _maybe_free(self, kv: KVHandle) -> None:
        if kv.released and kv.holders == 0 and not kv.freed:
            kv.freed = True
            row = np.zeros(self.config.pages_per_seq, np.int32)
            row[: len(kv.pages)] = kv.pages
            self._pool = self._release_row(self._pool, jnp.asarray(row), jnp.int32(len(kv.pages)))
            self.retained_pages -= len(kv.pages)

    def _fresh_id(self, kind: str, taken) -> int:
        """Next request / group id in [0, 2**31 - 1) not in `taken` (ids are int32 on the device and are
        reused after 2**31 - 1 submissions, so a week-long run never overflows; live ids stay unique)."""
        while True:
            i = self._next_id[kind]
            self._next_id[kind] = (i + 1) % _ID_LIMIT
            if i not in taken:
                return i

    @property
    def num_unfinished(self) -> int:
        return len(self._live)

    # -- device calls -------------------------------------------------------------------------------
    def _queue(self) -> tuple[Queue, list[_Request]]:
        ecfg = self.config
        q, wc, ns = ecfg.queue_len, ecfg.window + ecfg.prefill_chunk, ecfg.max_stop_ids
        rows = list(itertools.islice(self._pending, q))
        a = {k: np.zeros(q, np.int32) for k in ("req", "prompt_len", "group", "shared_pages", "top_k", "max_new",
                                                "seed", "pos_offset", "n_prefix")}
        prefix, retain = np.zeros((q, ecfg.pages_per_seq), np.int32), np.zeros(q, bool)
        tokens, stop = np.zeros((q, wc), np.int32), np.full((q, ns), -1, np.int32)
        temp, top_p, valid, proc = np.ones(q, np.float32), np.ones(q, np.float32), np.zeros(q, bool), np.zeros(q, bool)
        for i, r in enumerate(rows):
            p = r.params
            valid[i] = True
            tokens[i, : len(r.prompt)] = r.prompt
            stop[i, : len(p.stop_token_ids)] = p.stop_token_ids
            group = -1 if r.preemptions else r.group  # a requeued request recomputes its prompt
            a["req"][i], a["prompt_len"][i], a["group"][i] = r.rid, len(r.prompt), group
            a["shared_pages"][i] = r.shared_pages if group >= 0 else 0
            a["top_k"][i], a["max_new"][i], a["seed"][i] = p.top_k, p.max_tokens - len(r.gen), r.seed
            a["pos_offset"][i] = r.truncated
            retain[i] = r.retain
            if r.parent is not None:  # a requeued (preempted) continuation has dropped its parent: recompute
                a["n_prefix"][i] = r.prefix_pages
                prefix[i, : len(r.parent.pages)] = r.parent.pages
            temp[i], top_p[i], proc[i] = p.temperature, p.top_p, p.logprobs == "processed"
        queue = Queue(valid=jnp.asarray(valid), admitted=jnp.zeros(q, bool), tokens=jnp.asarray(tokens),
                      stop=jnp.asarray(stop), temperature=jnp.asarray(temp), top_p=jnp.asarray(top_p),
                      processed=jnp.asarray(proc), retain=jnp.asarray(retain), prefix_table=jnp.asarray(prefix),
                      **{k: jnp.asarray(v) for k, v in a.items()})
        return queue, rows

    def step(self, max_rounds: int | None = None, idle_return: int | None = None) -> list[Completion]:
        """One device call: up to max_rounds (default rounds_per_sync) rounds, or fewer when idle_return
        (default EngineConfig.idle_return; 0 = off) slots go idle after a finish. Returns finished requests."""
        if not self._live:
            return []
        self._wake()
        queue, rows = self._queue()
        self._slots, self._pool, queue, self._ring, counters = self._run(
            self._params, self._slots, self._pool, queue, self._ring,
            jnp.int32(max_rounds or self.config.rounds_per_sync),
            jnp.int32(self.config.idle_return if idle_return is None else idle_return))
        admitted, ring, cnt = jax.device_get((queue.admitted, self._ring, counters))
        if int(cnt.rounds) == 0:
            raise RuntimeError(f"Engine.step: no progress with {len(self._live)} unfinished requests "
                               f"({len(self._pending)} queued, {int(self._pool.n_free)} free pages, "
                               f"{self.retained_pages} held by unreleased KVHandles: Engine.release them)")
        taken = {r.rid for r, ok in zip(rows, admitted[: len(rows)]) if ok}
        for r in rows:
            if r.rid in taken and r.parent is not None:  # the child now holds its own page references
                self.stats["continued_tokens"] += r.prefix_pages * self.config.page_size
                r.parent.holders -= 1
                self._maybe_free(r.parent)
                r.parent = None
        self._pending = collections.deque(r for r in self._pending if r.rid not in taken)
        for f in ("rounds", "prefill_rounds", "preemptions", "prefill_tokens", "decode_tokens", "shared_pages"):
            self.stats[f] += int(getattr(cnt, f))  # this call's counts; Python ints never overflow
        done, requeue = [], []
        for i in range(int(ring.count)):
            rid = int(ring.req[i])
            if rid not in self._live:  # aborted while on the device (finished or preempted: it has left it)
                self._aborted.discard(rid)
                if ring.retained[i] and int(ring.reason[i]) != FINISH_PREEMPTED:  # nobody will release them
                    orphan = KVHandle(pages=tuple(ring.page_table[i, : int(ring.n_pages[i])].tolist()),
                                      n_cached=0, tokens=[], released=True)
                    self.retained_pages += len(orphan.pages)
                    self._maybe_free(orphan)
                continue
            req = self._live[rid]
            p, g = int(ring.prompt_len[i]), int(ring.n_gen[i])
            req.gen += ring.tokens[i, p: p + g].tolist()
            req.lps += ring.logprobs[i, p: p + g].tolist()
            if int(ring.reason[i]) == FINISH_PREEMPTED:
                req.preemptions += 1
                req.prompt = req.prompt[:p] + ring.tokens[i, p: p + g].tolist()
                requeue.append(req)
                continue
            del self._live[req.rid]
            self._forget(req)
            kv = None
            if ring.retained[i]:
                kv = KVHandle(pages=tuple(ring.page_table[i, : int(ring.n_pages[i])].tolist()),
                              n_cached=int(ring.seq_len[i]), tokens=ring.tokens[i, : p + g].tolist(),
                              truncated=req.truncated)
                self.retained_pages += len(kv.pages)
            done.append(Completion(token_ids=req.gen, logprobs=req.lps, finish_reason=FINISH_NAMES[int(ring.reason[i])],
                                   prompt_len=req.orig_len, request_id=req.rid, preemptions=req.preemptions,
                                   prompt_truncated=req.truncated, kv=kv))
        self._pending.extendleft(reversed(requeue))
        self._ring = self._ring.replace(count=jnp.int32(0))
        return done

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
        show = self.config.progress and len(rids) >= 8
        with Progress(TextColumn("generate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[tok]} tok"), disable=not show, transient=True) as bar:
            task = bar.add_task("gen", total=len(rids), tok=0)
            while want - out.keys():
                for c in self.step(idle_return=0):
                    out[c.request_id] = c
                bar.update(task, completed=len(out.keys() & want), tok=self.stats["decode_tokens"])
        return [out[r] for r in rids]
