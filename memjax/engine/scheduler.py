"""On-device scheduling: admit queued requests into free slots, release finished slots, preempt.

Owns the pure functions the generation loop calls each round, all vectorised over slots / queue.
Invariants:
- Admission takes ready rows in queue order while the pool keeps one free page per running sequence, and stops
  at the first row that does not fit (no overtaking).
- Prefix sharing and continuations map full pages strictly before the last prompt token (refcount + 1); nobody
  ever writes into a shared page. A group row waits only for earlier or running members, so waits cannot cycle.
- Release copies a slot's row into the ring, drops its page references (a finished `retain` slot hands them to
  the host) and resets its scalars, so a free slot never widens max(kv_len) or looks like a sharing source.
- `order` (LIFO preemption rank) restarts every device call (`rebase_order`), so it stays bounded.
- Each branch decision is a host round trip on XLA:GPU: `release_and_admit` ends a round with one, and the
  preemption loop runs only when `pages_short` said so, in a round of its own.
docs/engine.md, "The loop", describes admission, sharing and preemption.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .config import FINISH_PREEMPTED
from .state import Pool, Queue, Ring, Slots, pop_pages, release_pages, stack_page


class Admission(NamedTuple):
    """Which queue rows a round admits ([Q] each): take (admitted), rank (index among the ready rows, = the
    free slot it gets), need (fresh pages), n_shared (pages mapped from a group leader or a parent), cont
    (continuation rows), leader_slot (the slot whose pages a sharing row maps)."""
    take: jax.Array
    rank: jax.Array
    need: jax.Array
    n_shared: jax.Array
    cont: jax.Array
    leader_slot: jax.Array

    def counts(self) -> jax.Array:
        """int32 [2]: rows admitted, pages shared instead of prefilled."""
        shared = jnp.where(self.take, self.n_shared, 0).sum(dtype=jnp.int32)
        return jnp.stack([self.take.sum(dtype=jnp.int32), shared])


def admission(slots: Slots, pool: Pool, queue: Queue, page_size: int) -> Admission:
    """The admission decision for the current slots and pool (no state changes)."""
    waiting = queue.valid & ~queue.admitted
    # group status per queue row: [Q, B] against running slots, [Q, Q] against waiting rows
    grouped = (queue.group >= 0) & (queue.shared_pages > 0)
    member = slots.active[None] & (slots.group[None] == queue.group[:, None]) & grouped[:, None]
    filled = slots.seq_len[None] >= queue.shared_pages[:, None] * page_size
    source = member & filled
    leader_ready = source.any(1)
    leader_busy = (member & ~filled).any(1)
    # queue rows are in submission order within a group (requeued rows are ungrouped), so "earlier" is
    # the row index, never the request id (ids wrap around in a long run)
    row = jnp.arange(queue.valid.shape[0])
    earlier_queued = (waiting[None] & (queue.group[None] == queue.group[:, None])
                      & (row[None] < row[:, None])).any(1) & grouped
    ready = waiting & (leader_ready | (~leader_busy & ~earlier_queued))
    share = ready & leader_ready
    leader_slot = jnp.argmax(source, axis=1)
    # continuations (group -1, so never `share`) map their retained parent's full pages instead
    cont = queue.n_prefix > 0
    n_shared = jnp.where(share, queue.shared_pages, 0) + jnp.where(ready & cont, queue.n_prefix, 0)

    total_pages = (queue.prompt_len + page_size - 1) // page_size
    need = jnp.where(ready, total_pages - n_shared, 0)
    rank = jnp.cumsum(ready) - 1
    n_free_slots = (~slots.active).sum()
    n_active = slots.active.sum()
    cum_need = jnp.cumsum(need)
    fits = ready & (rank < n_free_slots) & (cum_need + n_active + rank + 1 <= pool.n_free)
    take = fits & (jnp.cumsum(ready & ~fits) == 0)  # stop at the first ready row that does not fit
    return Admission(take, rank, need, n_shared, cont, leader_slot)


def admit_rows(slots: Slots, pool: Pool, queue: Queue, order_base: jax.Array, plan: Admission, page_size: int
               ) -> tuple[Slots, Pool, Queue]:
    """Admit plan.take's rows (no branch: with none taken every write is dropped and the state is unchanged)."""
    b, mp = slots.page_table.shape
    take, rank, need, n_shared, cont, leader_slot = plan
    free_ids = jnp.nonzero(~slots.active, size=b, fill_value=b)[0]
    dest = jnp.where(take, free_ids[jnp.clip(rank, 0, b - 1)], b)  # b = dropped
    want = jnp.where(take, need, 0)
    new_pool, off = pop_pages(pool, want)
    j = jnp.arange(mp)[None]
    lead_rows = jnp.where(cont[:, None], queue.prefix_table, slots.page_table[leader_slot])  # [Q, MP]
    fresh = stack_page(pool, off[:, None] + (j - n_shared[:, None]))
    own = (j >= n_shared[:, None]) & (j < (n_shared + want)[:, None])
    rows = jnp.where(j < n_shared[:, None], lead_rows, jnp.where(own, fresh, 0))
    shared_ref = take[:, None] & (j < n_shared[:, None])
    inc = jnp.zeros_like(pool.refcount).at[rows.reshape(-1)].add(
        ((shared_ref | (own & take[:, None])) & (rows > 0)).reshape(-1).astype(jnp.int32))
    new_pool = new_pool.replace(refcount=new_pool.refcount + inc)
    set_ = lambda a, v: a.at[dest].set(v, mode="drop")
    slots = slots.replace(
        active=set_(slots.active, True), req=set_(slots.req, queue.req), group=set_(slots.group, queue.group),
        order=set_(slots.order, order_base + rank), prompt_len=set_(slots.prompt_len, queue.prompt_len),
        seq_len=set_(slots.seq_len, n_shared * page_size), n_gen=set_(slots.n_gen, 0),
        finish=set_(slots.finish, -1), tokens=set_(slots.tokens, queue.tokens),
        logprobs=set_(slots.logprobs, jnp.zeros_like(queue.tokens, jnp.float32)),
        page_table=set_(slots.page_table, rows), n_pages=set_(slots.n_pages, n_shared + want),
        temperature=set_(slots.temperature, queue.temperature), top_p=set_(slots.top_p, queue.top_p),
        top_k=set_(slots.top_k, queue.top_k), max_new=set_(slots.max_new, queue.max_new),
        seed=set_(slots.seed, queue.seed), pos_offset=set_(slots.pos_offset, queue.pos_offset),
        stop=set_(slots.stop, queue.stop), processed=set_(slots.processed, queue.processed),
        retain=set_(slots.retain, queue.retain))
    return slots, new_pool, queue.replace(admitted=queue.admitted | take)


def admit(slots: Slots, pool: Pool, queue: Queue, order_base: jax.Array, page_size: int
          ) -> tuple[Slots, Pool, Queue, jax.Array]:
    """Admit what fits (one branch decision: nothing is written when no row is taken). Returns the counts too."""
    plan = admission(slots, pool, queue, page_size)
    slots, pool, queue = jax.lax.cond(plan.take.any(), lambda a: admit_rows(*a, order_base, plan, page_size),
                                      lambda a: a, (slots, pool, queue))
    return slots, pool, queue, plan.counts()


def release_and_admit(slots: Slots, pool: Pool, queue: Queue, ring: Ring, order_base: jax.Array, page_size: int
                      ) -> tuple[Slots, Pool, Queue, Ring, jax.Array]:
    """The end of a round: release the finished sequences into the ring, then admit what fits for the next
    round, under one branch decision (a round where nothing finished and nothing can be admitted changes
    nothing). Equal to releasing the finished slots and then `admit`: with nothing finished the admission
    decision taken before the release is the one taken after it."""
    done = slots.active & (slots.finish >= 0)

    def book(a):
        slots, pool, queue, ring = a
        slots, pool, ring = release(slots, pool, ring, done, slots.finish)
        plan = admission(slots, pool, queue, page_size)
        slots, pool, queue = admit_rows(slots, pool, queue, order_base, plan, page_size)
        return (slots, pool, queue, ring), plan.counts()

    pred = done.any() | admission(slots, pool, queue, page_size).take.any()
    (slots, pool, queue, ring), counts = jax.lax.cond(pred, book, lambda a: (a, jnp.zeros(2, jnp.int32)),
                                                      (slots, pool, queue, ring))
    return slots, pool, queue, ring, counts


def rebase_order(slots: Slots) -> Slots:
    """Running slots' admission order -> -B..-1 (relative order kept); free slots -> 0."""
    b = slots.active.shape[0]
    key = jnp.where(slots.active, slots.order, jnp.iinfo(jnp.int32).max)
    rank = jnp.argsort(jnp.argsort(key, stable=True), stable=True).astype(jnp.int32)
    return slots.replace(order=jnp.where(slots.active, rank - b, 0))


def release(slots: Slots, pool: Pool, ring: Ring, mask: jax.Array, reason: jax.Array) -> tuple[Slots, Pool, Ring]:
    """Move masked slots to the ring with `reason` [B] and free their pages."""
    r = ring.req.shape[0]
    rank = jnp.cumsum(mask) - 1
    dest = jnp.where(mask, ring.count + rank, r)
    set_ = lambda a, v: a.at[dest].set(v, mode="drop")
    keep = mask & slots.retain & (reason != FINISH_PREEMPTED)  # references move to the ring (the host)
    ring = ring.replace(req=set_(ring.req, slots.req), reason=set_(ring.reason, reason),
                        prompt_len=set_(ring.prompt_len, slots.prompt_len), n_gen=set_(ring.n_gen, slots.n_gen),
                        tokens=set_(ring.tokens, slots.tokens), logprobs=set_(ring.logprobs, slots.logprobs),
                        seq_len=set_(ring.seq_len, slots.seq_len), n_pages=set_(ring.n_pages, slots.n_pages),
                        page_table=set_(ring.page_table, slots.page_table), retained=set_(ring.retained, keep),
                        count=ring.count + mask.sum(dtype=jnp.int32))
    pool = release_pages(pool, slots.page_table, slots.n_pages, mask & ~keep)
    clear = lambda a, v: jnp.where(mask, v, a)  # a released slot is reset to init_slots' values
    slots = slots.replace(active=slots.active & ~mask, n_pages=clear(slots.n_pages, 0),
                          page_table=jnp.where(mask[:, None], 0, slots.page_table), req=clear(slots.req, -1),
                          group=clear(slots.group, -1), order=clear(slots.order, 0),
                          prompt_len=clear(slots.prompt_len, 0), seq_len=clear(slots.seq_len, 0),
                          n_gen=clear(slots.n_gen, 0), finish=clear(slots.finish, -1), retain=clear(slots.retain, False))
    return slots, pool, ring


def needs_page(slots: Slots, page_size: int) -> jax.Array:
    """bool [B]: running sequences whose next token starts a page they do not have yet."""
    return slots.active & (slots.finish < 0) & (slots.seq_len // page_size >= slots.n_pages)


def pages_short(slots: Slots, pool: Pool, page_size: int) -> jax.Array:
    """bool []: more running sequences need a page than the pool has free."""
    return needs_page(slots, page_size).sum() > pool.n_free


def preempt_while_short(slots: Slots, pool: Pool, ring: Ring, page_size: int
                        ) -> tuple[Slots, Pool, Ring, jax.Array]:
    """Preempt the most recently admitted sequences (LIFO) into the ring while the pool is short. Returns the
    preemption count too. A loop without a trip count: the generation loop runs it only in a round of its own,
    when `pages_short` said so, so that the common round has no such loop (each iteration's predicate is a host
    round trip on XLA:GPU)."""
    def preempt_one(c):
        s, p, rg, n = c
        victim = jnp.argmax(jnp.where(s.active, s.order, jnp.iinfo(jnp.int32).min))  # orders may be < 0
        mask = jnp.arange(s.active.shape[0]) == victim
        s, p, rg = release(s, p, rg, mask, jnp.full_like(s.finish, FINISH_PREEMPTED))
        return s, p, rg, n + 1

    return jax.lax.while_loop(lambda c: pages_short(c[0], c[1], page_size), preempt_one,
                              (slots, pool, ring, jnp.int32(0)))


def grant_decode_pages(slots: Slots, pool: Pool, page_size: int) -> tuple[Slots, Pool]:
    """Give every running sequence whose next token starts a new page that page (the caller made sure the pool
    is not short: `pages_short` false, or `preempt_while_short` ran)."""
    need = needs_page(slots, page_size)
    want = need.astype(jnp.int32)
    new_pool, off = pop_pages(pool, want)
    page = stack_page(pool, off)
    b = slots.active.shape[0]
    col = jnp.where(need, slots.n_pages, slots.page_table.shape[1])
    pt = slots.page_table.at[jnp.arange(b), col].set(page, mode="drop")
    rc = new_pool.refcount.at[jnp.where(need, page, 0)].add(need.astype(jnp.int32))
    rc = rc.at[0].set(0)
    return slots.replace(page_table=pt, n_pages=slots.n_pages + want), new_pool.replace(refcount=rc)
