"""The jitted generation loop: many prefill/decode rounds per host sync, in one `lax.while_loop`.

Owns `make_run(graphdef, mcfg, ecfg)` -> jitted run(params, slots, pool, queue, ring, max_rounds, idle_return) ->
(slots, pool, queue, ring, counters), `make_loop` (the same, unjitted, for data_parallel.py's `shard_map`) and
`LOOP_COMPILER_OPTIONS`. A call admits once, then loops rounds (forward or preemption, then
scheduler.release_and_admit) until `max_rounds`, a full ring, nothing admissible, or enough idle slots for the
host's follow-up turns (idle_return > 0).
Invariants: Slots, Pool and Ring are donated (the KV pool is updated in place); each round decides its kind once,
so XLA:GPU reads back 3 predicates per forward round (tests/unit/engine/test_loop_syncs.py); the Counters are this
call's only, so int32 cannot overflow. docs/engine.md, "The loop", has the round kinds, the host syncs and what the
compiler options remove.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from ..model.config import ModelConfig
from .config import FINISH_LENGTH, FINISH_STOP, FINISH_WINDOW, EngineConfig
from .mixed import make_mixed_round
from .paged_kv import PagedAttention
from .sampler import Truncation, sample
from .scheduler import admit, grant_decode_pages, pages_short, preempt_while_short, rebase_order, release_and_admit
from .state import Counters, Pool, Queue, Ring, Slots, init_counters
from .weights import engine_forward, engine_logits, uses_layout


def _finish_code(tok, n_gen, index, stop, max_new, window):
    is_stop = (tok[:, None] == stop).any(-1) & (tok >= 0)
    return jnp.where(is_stop, FINISH_STOP, jnp.where(n_gen >= max_new, FINISH_LENGTH,
                     jnp.where(index + 1 >= window, FINISH_WINDOW, -1)))


# XLA DebugOptions for the loop's compile (other backends ignore the xla_gpu_ field)
LOOP_COMPILER_OPTIONS = {"xla_gpu_copy_insertion_use_region_analysis": True, "xla_gpu_enable_triton_gemm": False,
                         "xla_gpu_dot_merger_threshold_mb": 0}


def make_run(graphdef, mcfg: ModelConfig, ecfg: EngineConfig, attend=None, truncate: bool | Truncation | None = None):
    """The generation loop, jitted, with Slots, Pool and Ring donated. truncate: the sampler's (memjax/engine/sampler.py
    `sample`): False when no request of the call has a top-p or top-k, a `Truncation` naming those some may have
    (True: both), None to decide per round."""
    return jax.jit(make_loop(graphdef, mcfg, ecfg, attend, truncate), donate_argnums=(1, 2, 4),
                   compiler_options=LOOP_COMPILER_OPTIONS)


def make_loop(graphdef, mcfg: ModelConfig, ecfg: EngineConfig, attend=None, truncate: bool | Truncation | None = None):
    """The generation loop of one device (group), unjitted."""
    rounds = make_rounds(graphdef, mcfg, ecfg, attend, truncate)
    return _loop(rounds, ecfg)


@dataclass(frozen=True)
class Rounds:
    """The round functions of one engine config: each (params, slots, pool, ring, cnt) -> the same, except
    forward/emit (the building blocks the mixed round shares). benchmarks/gpu_aot_rounds.py compiles them one by one."""
    forward: Callable
    emit: Callable
    prefill: Callable
    decode: Callable
    preempt: Callable
    mixed: Callable


def make_rounds(graphdef, mcfg: ModelConfig, ecfg: EngineConfig, attend=None,
                truncate: bool | Truncation | None = None) -> Rounds:
    """The prefill, decode and mixed rounds over params in the engine's layout (memjax/engine/weights.py:
    the model's nnx.State by default)."""
    S, C, BP, W = ecfg.page_size, ecfg.prefill_chunk, ecfg.prefill_slots, ecfg.window
    attn_kw = ({} if attend is None else {"attend": attend}) | {"k_scale": float(ecfg.kv.k_scale),
                                                                  "v_scale": float(ecfg.kv.v_scale),
                                                                  "fuse_rope_kv": ecfg.kernels.fuse_rope_kv,
                                                                  "fuse_split_combine": ecfg.kernels.fuse_split_combine}
    own_layout = uses_layout(ecfg)

    def forward(params, ids, pos, page_table, start, n_valid, pool, ragged=None):
        """-> (logits_fn(hidden) -> f32 logits, final hidden [b, t, h], pool with this step's K/V written).
        ragged: the mixed round's per-sequence layout (PagedAttention.ragged)."""
        att = PagedAttention(page_table, start, n_valid, ragged=ragged, **attn_kw)
        state = att.open_state(pool.k, pool.v, decode=ids.shape[1] == 1)
        if own_layout:
            hidden, state = engine_forward(mcfg, params, ids, pos, att, state)
            k, v = att.close_state(state)
            return partial(engine_logits, mcfg, params), hidden, pool.replace(k=k, v=v)
        model = nnx.merge(graphdef, params)
        hidden, state = model.forward(ids, pos, attention=att, state=state, return_hidden=True)
        k, v = att.close_state(state)
        return model.logits, hidden, pool.replace(k=k, v=v)

    def emit(slots: Slots, rows, tok, lp, mask):
        """Write sampled tokens at index seq_len... of the given slot rows where mask; update finish."""
        idx = slots.prompt_len[rows] + slots.n_gen[rows]
        n_gen = slots.n_gen[rows] + 1
        fin = _finish_code(tok, n_gen, idx, slots.stop[rows], slots.max_new[rows], W)
        r = jnp.where(mask, rows, slots.active.shape[0])
        return slots.replace(tokens=slots.tokens.at[r, idx].set(tok, mode="drop"),
                             logprobs=slots.logprobs.at[r, idx].set(lp, mode="drop"),
                             n_gen=slots.n_gen.at[r].set(n_gen, mode="drop"),
                             finish=slots.finish.at[r].set(fin, mode="drop"))

    def prefill_at(length, params, slots: Slots, rows, start, n, pool: Pool):
        """[BP, length] prefill forward of rows (n <= length tokens each) -> (logits at each row's last token, pool)."""
        ids = jax.vmap(lambda row, s: jax.lax.dynamic_slice(row, (s,), (length,)))(slots.tokens[rows], start)
        pos = start[:, None] + jnp.arange(length, dtype=jnp.int32)[None]
        logits_fn, hidden, pool = forward(params, ids, pos, slots.page_table[rows], start, n, pool)
        last = jnp.take_along_axis(hidden, jnp.maximum(n - 1, 0)[:, None, None], axis=1)[:, 0]
        return logits_fn(last), pool

    lengths = ecfg.prefill_lengths

    def prefill_round(params, slots: Slots, pool: Pool, ring: Ring, cnt: Counters):
        b = slots.active.shape[0]
        pending = slots.active & (slots.seq_len < slots.prompt_len)
        sel = jnp.nonzero(pending, size=BP, fill_value=b)[0]
        ok = sel < b
        rows = jnp.minimum(sel, b - 1)
        start = jnp.where(ok, slots.seq_len[rows], 0)
        n = jnp.where(ok, jnp.minimum(C, slots.prompt_len[rows] - start), 0)
        if len(lengths) == 1:
            logits, pool = prefill_at(C, params, slots, rows, start, n, pool)
            executed = jnp.int32(BP * C)
        else:  # the shortest compiled chunk length that holds every row's chunk (EngineConfig.kernels.prefill_buckets)
            which = jnp.searchsorted(jnp.asarray(lengths, jnp.int32), n.max())
            logits, pool = jax.lax.switch(which, [partial(prefill_at, x) for x in lengths], params, slots, rows,
                                          start, n, pool)
            executed = BP * jnp.asarray(lengths, jnp.int32)[which]
        done = ok & (start + n == slots.prompt_len[rows])
        new_index = slots.prompt_len[rows]
        tok, lp = sample(logits, slots.temperature[rows], slots.top_p[rows], slots.top_k[rows],
                         slots.seed[rows], new_index + slots.pos_offset[rows], slots.processed[rows], truncate)
        slots = slots.replace(seq_len=slots.seq_len.at[jnp.where(ok, rows, b)].add(n, mode="drop"))
        slots = emit(slots, rows, tok, lp, done)
        cnt = cnt.replace(prefill_rounds=cnt.prefill_rounds + 1, prefill_tokens=cnt.prefill_tokens + n.sum(),
                          prefill_executed=cnt.prefill_executed + executed)
        return slots, pool, ring, cnt

    def decode_round(params, slots: Slots, pool: Pool, ring: Ring, cnt: Counters):
        slots, pool = grant_decode_pages(slots, pool, S)  # the round runs only when the pool is not short
        b = slots.active.shape[0]
        live = slots.active & (slots.finish < 0)
        start = slots.seq_len
        ids = jnp.take_along_axis(slots.tokens, start[:, None], axis=1)
        logits_fn, hidden, pool = forward(params, ids, start[:, None], slots.page_table, start,
                                          live.astype(jnp.int32), pool)
        logits = logits_fn(hidden[:, 0])
        tok, lp = sample(logits, slots.temperature, slots.top_p, slots.top_k, slots.seed,
                         start + 1 + slots.pos_offset, slots.processed, truncate)
        slots = slots.replace(seq_len=slots.seq_len + live.astype(jnp.int32))
        slots = emit(slots, jnp.arange(b), tok, lp, live)
        cnt = cnt.replace(decode_tokens=cnt.decode_tokens + live.sum())
        return slots, pool, ring, cnt

    def preempt_round(params, slots: Slots, pool: Pool, ring: Ring, cnt: Counters):
        """A round without a forward: preempt (LIFO) until every sequence that needs a page can have one."""
        slots, pool, ring, n_pre = preempt_while_short(slots, pool, ring, S)
        return slots, pool, ring, cnt.replace(preemptions=cnt.preemptions + n_pre)

    return Rounds(forward=forward, emit=emit, prefill=prefill_round, decode=decode_round, preempt=preempt_round,
                  mixed=make_mixed_round(forward, emit, preempt_round, ecfg, truncate))


def _loop(rounds: Rounds, ecfg: EngineConfig):
    def idle(params, slots, pool, ring, cnt):
        return slots, pool, ring, cnt

    def split_round(params, slots, pool, ring, cnt):
        """One decision per round: 0 nothing running (only when the queue waits), 1 a prefill round while any
        running sequence still has prompt tokens to cache, else 2 a decode round, or 3 a preemption round first
        when more sequences need a new page than the pool has free."""
        running = (slots.active & (slots.finish < 0)).any()
        any_prefill = (slots.active & (slots.seq_len < slots.prompt_len)).any()
        which = jnp.where(running, jnp.where(any_prefill, 1, jnp.where(pages_short(slots, pool, ecfg.page_size), 3, 2)),
                          0)
        return jax.lax.switch(which, [partial(f, params) for f in (idle, rounds.prefill, rounds.decode,
                                                                    rounds.preempt)], slots, pool, ring, cnt)

    # the mixed round needs no idle branch: with nothing running it plans no rows and changes nothing
    one_round = rounds.mixed if ecfg.schedule == "mixed" else split_round

    def run(params, slots: Slots, pool: Pool, queue: Queue, ring: Ring, max_rounds, idle_return):
        b = slots.active.shape[0]
        slots, cnt = rebase_order(slots), init_counters()
        r = ring.req.shape[0]
        # round r's admissions happen at the end of round r - 1 (release_and_admit), the first round's here
        slots, pool, queue, adm = admit(slots, pool, queue, jnp.int32(0), ecfg.page_size)
        cnt = cnt.replace(shared_pages=cnt.shared_pages + adm[1])

        def admissible(q: Queue):
            return (q.valid & ~q.admitted).any()

        def cond(c):
            slots, _, queue, ring, cnt, i = c
            room = ring.count + b <= r
            work = slots.active.any() | admissible(queue)
            idle = (idle_return > 0) & (ring.count > 0) & ((~slots.active).sum() >= idle_return) & ~admissible(queue)
            return (i < max_rounds) & room & work & ~idle

        def body(c):
            slots, pool, queue, ring, cnt, i = c
            slots, pool, ring, cnt = one_round(params, slots, pool, ring, cnt)
            slots, pool, queue, ring, adm = release_and_admit(slots, pool, queue, ring, (cnt.rounds + 1) * b,
                                                              ecfg.page_size)
            cnt = cnt.replace(shared_pages=cnt.shared_pages + adm[1])
            return slots, pool, queue, ring, cnt.replace(rounds=cnt.rounds + 1), i + 1

        slots, pool, queue, ring, cnt, _ = jax.lax.while_loop(
            cond, body, (slots, pool, queue, ring, cnt, jnp.int32(0)))
        return slots, pool, queue, ring, cnt

    return run
