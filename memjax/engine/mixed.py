"""Token-budget batching (`EngineConfig.schedule="mixed"`): one ragged forward per round holding every running
sequence's decode token plus prefill chunks of pending prompts, as vLLM's and SGLang's schedulers do.

Owns `plan_round(slots, n_rows)` (which token of which sequence goes in which row) and
`make_mixed_round(forward, emit, ecfg)` (the round the loop runs instead of split prefill / decode rounds).
Decoding slots rank first, then prefilling ones in admission order, cut at the round's token budget; a round runs
at the smallest of `EngineConfig.round_sizes` that holds its need (one `lax.switch`). A slot completing its
prompt samples at position prompt_len + n_gen, as the split schedule does, so both schedules return the same
tokens. The Pallas back-end gets the plan as `PagedAttention(ragged=...)` (docs/engine.md, "Ragged prefill").
Invariants: token_budget >= max_slots; rows are contiguous per slot and in position order; slots with take = 0 are
untouched; a short pool makes the round the split schedule's preemption round (the same `lax.switch`).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from flax import struct

from .config import EngineConfig
from .sampler import Truncation, sample
from .scheduler import grant_decode_pages, pages_short
from .state import Counters, Pool, Ring, Slots


@struct.dataclass
class RoundPlan:
    take: jax.Array  # int32 [B] tokens of each slot in this round
    row_start: jax.Array  # int32 [B] first row of each slot's tokens
    decoding: jax.Array  # bool [B] running with its prompt cached (take = 1)
    slot: jax.Array  # int32 [N] slot of each row (padding: 0)
    pos: jax.Array  # int32 [N] position of each row's token (padding: 0)
    valid: jax.Array  # bool [N]
    order: jax.Array  # int32 [B] slots ranked (decoding, prefilling by admission, idle): take > 0 is a prefix


def round_need(slots: Slots) -> jax.Array:
    """int32 [B]: tokens each running slot has but has not cached (1 when decoding, rest of prompt when prefilling)."""
    live = slots.active & (slots.finish < 0)
    return jnp.where(live, slots.prompt_len + slots.n_gen - slots.seq_len, 0)


def plan_round(slots: Slots, n_rows: int) -> RoundPlan:
    b = slots.active.shape[0]
    live = slots.active & (slots.finish < 0)
    need = round_need(slots)
    decoding = live & (slots.seq_len >= slots.prompt_len)
    cls = jnp.where(live, jnp.where(decoding, 0, 1), 2)
    perm = jnp.lexsort((slots.order, cls))  # decoding, then prefilling by admission order, then idle
    need_s = need[perm]
    before = jnp.cumsum(need_s) - need_s
    take_s = jnp.clip(n_rows - before, 0, need_s)
    cum = jnp.cumsum(take_s)
    start_s = cum - take_s
    r = jnp.arange(n_rows, dtype=jnp.int32)
    seg = jnp.minimum(jnp.searchsorted(cum, r, side="right"), b - 1)
    valid = r < cum[-1]
    slot = jnp.where(valid, perm[seg], 0).astype(jnp.int32)
    pos = jnp.where(valid, slots.seq_len[slot] + r - start_s[seg], 0)
    take = jnp.zeros(b, jnp.int32).at[perm].set(take_s)
    row_start = jnp.zeros(b, jnp.int32).at[perm].set(start_s)
    return RoundPlan(take=take, row_start=row_start, decoding=decoding, slot=slot, pos=pos, valid=valid,
                     order=perm.astype(jnp.int32))


def make_mixed_round(forward, emit, preempt, ecfg: EngineConfig, truncate: bool | Truncation | None = None):
    """forward(params, ids [N,1], pos [N,1], page_table [N,MP], start [N], n_valid [N], pool) -> (logits_fn,
    hidden [N,1,h], pool); emit(slots, rows, tok, lp, mask) -> slots; preempt(params, slots, pool, ring, cnt) ->
    the same, the preemption round (all from loop.make_rounds); truncate: the sampler's (`sample`)."""
    S, B, sizes = ecfg.page_size, ecfg.max_slots, ecfg.round_sizes

    def rows_round(n_rows, params, slots: Slots, pool: Pool):
        plan = plan_round(slots, n_rows)
        ids = slots.tokens[plan.slot, plan.pos][:, None]
        pt = jnp.where(plan.valid[:, None], slots.page_table[plan.slot], 0)
        ragged = (slots.page_table, plan.row_start, plan.take, slots.seq_len)  # the Pallas back-end's blocks
        logits_fn, hidden, pool = forward(params, ids, plan.pos[:, None], pt, plan.pos, plan.valid.astype(jnp.int32),
                                          pool, ragged=ragged)
        # LM head on each slot's last row only, and only for the first min(n_rows, B) ranked slots: every slot
        # with take > 0 is among them (each takes >= 1 row), so a small round samples a small batch
        sel = plan.order[:min(n_rows, B)]
        last = jnp.clip(plan.row_start[sel] + plan.take[sel] - 1, 0, n_rows - 1)
        logits = logits_fn(hidden[last, 0])  # [min(n_rows, B), V]
        target = (slots.prompt_len + slots.n_gen)[sel]  # index of the token sampled this round
        tok, lp = sample(logits, slots.temperature[sel], slots.top_p[sel], slots.top_k[sel], slots.seed[sel],
                         target + slots.pos_offset[sel], slots.processed[sel], truncate)
        done = (plan.take[sel] > 0) & (slots.seq_len[sel] + plan.take[sel] == target)
        slots = slots.replace(seq_len=slots.seq_len + plan.take)
        slots = emit(slots, sel, tok, lp, done)
        return slots, pool, (plan.take, plan.decoding)

    def mixed_round(params, slots: Slots, pool: Pool, ring: Ring, cnt: Counters):
        # one decision: the round's row size, or (the pool short of pages for the decoding sequences) a preemption
        # round without a forward first
        need = round_need(slots).sum()
        which = jnp.where(pages_short(slots, pool, S), len(sizes),
                          jnp.minimum(jnp.searchsorted(jnp.asarray(sizes, jnp.int32), need), len(sizes) - 1))

        def sized(n_rows, params, slots, pool, ring, cnt):
            slots, pool = grant_decode_pages(slots, pool, S)
            slots, pool, (take, decoding) = rows_round(n_rows, params, slots, pool)
            n_prefill = jnp.where(decoding, 0, take).sum()
            n_decode = jnp.where(decoding, take, 0).sum()
            cnt = cnt.replace(prefill_executed=cnt.prefill_executed + jnp.where(n_prefill > 0, n_rows - n_decode, 0),
                              prefill_rounds=cnt.prefill_rounds + (n_prefill > 0),
                              prefill_tokens=cnt.prefill_tokens + n_prefill,
                              decode_tokens=cnt.decode_tokens + n_decode)
            return slots, pool, ring, cnt

        return jax.lax.switch(which, [partial(sized, n) for n in sizes] + [preempt], params, slots, pool, ring, cnt)

    return mixed_round
