"""`memjax.Engine`: batched generation on the paged KV cache, driven from the host.

Owns: the request lifecycle on the host side (submit -> device queue -> completion), the page-pool
size, weight swaps, and the public `generate` / `submit` + `step` API.
- `generate(prompts, params)` returns one Completion per prompt, in input order.
- Streaming form for agent workflows: `rid = submit(prompt, params)`; `step()` runs one device call
  (up to `rounds_per_sync` rounds) and returns the Completions that finished in it; the caller may
  submit follow-up turns before the next `step()`, so trajectories advance independently.
- Identical prompts submitted while an earlier copy is queued or running share its full prompt pages
  (prefix sharing for GRPO groups): they form a group, and a member shares from any running member.
- A request preempted by memory pressure comes back from the device with what it generated so far
  and is requeued at the front with prompt + generated tokens; because sampling keys depend only on
  (seed, position), its final output is the one it would have produced unpreempted.
- `abort(rids)` cancels requests (a failed agent run leaves no orphans behind).
- `update_weights(params)` swaps in new policy weights of the same shapes without recompiling.
Invariants: prompts are non-empty lists of ints < vocab; prompt_len < window unless
overlong_prompt="truncate_left" (keeps the last window - 1 tokens, recorded in Completion.prompt_truncated).
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..model.qwen2 import Qwen2
from .config import FINISH_NAMES, FINISH_PREEMPTED, Completion, EngineConfig, SamplingParams
from .loop import make_run
from .state import Queue, init_counters, init_pool, init_ring, init_slots, kv_bytes_per_page


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


def default_num_pages(model: Qwen2, ecfg: EngineConfig) -> int:
    per = kv_bytes_per_page(model.cfg, ecfg)
    budget = ecfg.kv_cache_bytes
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
        self.config = ecfg = config or EngineConfig()
        if ecfg.compilation_cache_dir:
            jax.config.update("jax_compilation_cache_dir", ecfg.compilation_cache_dir)
        self.model_config = model.cfg
        self._graphdef, self._params = nnx.split(model, nnx.Param)
        self.num_pages = ecfg.num_pages or default_num_pages(model, ecfg)
        self._slots = init_slots(ecfg)
        self._pool = init_pool(model.cfg, ecfg, self.num_pages)
        self._ring = init_ring(ecfg)
        self._counters = init_counters()
        attend = None
        if ecfg.attention != "reference":
            from ..kernels import engine_attend

            attend = engine_attend(impl=ecfg.attention, num_splits=ecfg.decode_splits)
        self._run = make_run(nnx.graphdef(model), model.cfg, ecfg, attend=attend)
        self._pending: collections.deque[_Request] = collections.deque()
        self._live: dict[int, _Request] = {}  # rid -> request, queued or running
        self._aborted: set[int] = set()  # running requests whose completions are discarded
        self._groups: dict[tuple[int, ...], tuple[int, set[int]]] = {}  # prompt -> (group id, live rids)
        self._group_ids = itertools.count()
        self._ids = itertools.count()
        self.stats = collections.Counter()

    # -- weights ------------------------------------------------------------------------------------
    def update_weights(self, params) -> None:
        """Swap in new parameters (an nnx.State of Params, or a Qwen2 module) of identical structure."""
        new = nnx.state(params, nnx.Param) if isinstance(params, nnx.Module) else params
        old_s = jax.tree.map(lambda a: (a.shape, a.dtype), self._params)
        new_s = jax.tree.map(lambda a: (a.shape, a.dtype), new)
        if jax.tree.structure(old_s) != jax.tree.structure(new_s) or old_s != new_s:
            raise ValueError("update_weights: parameter structure, shapes or dtypes differ from the engine's model")
        self._params = new

    # -- submission ---------------------------------------------------------------------------------
    def submit(self, prompt, params: SamplingParams | None = None) -> int:
        params = params or SamplingParams()
        ecfg, vocab = self.config, self.model_config.vocab_size
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError("Engine.submit: prompt is empty")
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"Engine.submit: prompt has token ids outside [0, {vocab})")
        if len(params.stop_token_ids) > ecfg.max_stop_ids:
            raise ValueError(f"Engine.submit: {len(params.stop_token_ids)} stop ids > EngineConfig.max_stop_ids="
                             f"{ecfg.max_stop_ids}")
        truncated = 0
        if len(prompt) >= ecfg.window:
            if ecfg.overlong_prompt == "error":
                raise ValueError(f"Engine.submit: prompt of {len(prompt)} tokens leaves no room in the "
                                 f"{ecfg.window}-token window (set overlong_prompt='truncate_left' to keep its end)")
            truncated = len(prompt) - (ecfg.window - 1)
            prompt = prompt[truncated:]
        rid = next(self._ids)
        seed = params.seed if params.seed is not None else (ecfg.seed * 1_000_003 + rid) % (2**31 - 1)
        gid, members = self._groups.setdefault(tuple(prompt), (next(self._group_ids), set()))
        members.add(rid)
        self._live[rid] = _Request(rid, prompt, len(prompt), params, seed, group=gid, truncated=truncated,
                                   shared_pages=(len(prompt) - 1) // ecfg.page_size)
        self._pending.append(self._live[rid])
        return rid

    def abort(self, rids) -> None:
        """Cancel requests: queued ones are dropped now; running ones finish on the device (or are dropped
        at their next preemption) and their completions are discarded. Unknown / finished rids are ignored."""
        rids = {int(r) for r in rids} & self._live.keys()
        queued = {r.rid for r in self._pending if r.rid in rids}
        self._pending = collections.deque(r for r in self._pending if r.rid not in queued)
        for rid in rids:
            if rid in queued:
                self._forget(self._live[rid])
            else:
                self._aborted.add(rid)

    def _forget(self, req: _Request) -> None:
        del self._live[req.rid]
        self._aborted.discard(req.rid)
        key = tuple(req.prompt[: req.orig_len])
        self._groups[key][1].discard(req.rid)
        if not self._groups[key][1]:
            del self._groups[key]

    @property
    def num_unfinished(self) -> int:
        return len(self._live) - len(self._aborted)

    # -- device calls -------------------------------------------------------------------------------
    def _queue(self) -> tuple[Queue, list[_Request]]:
        ecfg = self.config
        q, wc, ns = ecfg.queue_len, ecfg.window + ecfg.prefill_chunk, ecfg.max_stop_ids
        rows = list(itertools.islice(self._pending, q))
        a = {k: np.zeros(q, np.int32) for k in ("req", "prompt_len", "group", "shared_pages", "top_k", "max_new",
                                                "seed", "pos_offset")}
        tokens, stop = np.zeros((q, wc), np.int32), np.full((q, ns), -1, np.int32)
        temp, top_p, valid = np.ones(q, np.float32), np.ones(q, np.float32), np.zeros(q, bool)
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
            temp[i], top_p[i] = p.temperature, p.top_p
        queue = Queue(valid=jnp.asarray(valid), admitted=jnp.zeros(q, bool), tokens=jnp.asarray(tokens),
                      stop=jnp.asarray(stop), temperature=jnp.asarray(temp), top_p=jnp.asarray(top_p),
                      **{k: jnp.asarray(v) for k, v in a.items()})
        return queue, rows

    def step(self, max_rounds: int | None = None) -> list[Completion]:
        """One device call: up to max_rounds (default rounds_per_sync) rounds. Returns finished requests."""
        if not self._live:
            return []
        queue, rows = self._queue()
        before = jax.device_get(self._counters)
        self._slots, self._pool, queue, self._ring, self._counters = self._run(
            self._params, self._slots, self._pool, queue, self._ring, self._counters, jnp.int32(0),
            jnp.int32(max_rounds or self.config.rounds_per_sync))
        admitted, ring, after = jax.device_get((queue.admitted, self._ring, self._counters))
        if int(after.rounds) == int(before.rounds):
            raise RuntimeError(f"Engine.step: no progress with {len(self._live)} unfinished requests "
                               f"({len(self._pending)} queued, {int(self._pool.n_free)} free pages); this is a bug")
        taken = {r.rid for r, ok in zip(rows, admitted[: len(rows)]) if ok}
        self._pending = collections.deque(r for r in self._pending if r.rid not in taken)
        for f in ("rounds", "prefill_rounds", "preemptions", "prefill_tokens", "decode_tokens", "shared_pages"):
            self.stats[f] += int(getattr(after, f) - getattr(before, f))
        done, requeue = [], []
        for i in range(int(ring.count)):
            req = self._live[int(ring.req[i])]
            p, g = int(ring.prompt_len[i]), int(ring.n_gen[i])
            req.gen += ring.tokens[i, p: p + g].tolist()
            req.lps += ring.logprobs[i, p: p + g].tolist()
            if req.rid in self._aborted:
                self._forget(req)
                continue
            if int(ring.reason[i]) == FINISH_PREEMPTED:
                req.preemptions += 1
                req.prompt = req.prompt[:p] + ring.tokens[i, p: p + g].tolist()
                requeue.append(req)
                continue
            self._forget(req)
            done.append(Completion(token_ids=req.gen, logprobs=req.lps, finish_reason=FINISH_NAMES[int(ring.reason[i])],
                                   prompt_len=req.orig_len, request_id=req.rid, preemptions=req.preemptions,
                                   prompt_truncated=req.truncated))
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
        rids = [self.submit(p, sp) for p, sp in zip(prompts, plist)]
        want, out = set(rids), {}
        show = self.config.progress and len(prompts) >= 8
        with Progress(TextColumn("generate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[tok]} tok"), disable=not show, transient=True) as bar:
            task = bar.add_task("gen", total=len(prompts), tok=0)
            while want - out.keys():
                for c in self.step():
                    out[c.request_id] = c
                bar.update(task, completed=len(out.keys() & want), tok=self.stats["decode_tokens"])
        return [out[r] for r in rids]
