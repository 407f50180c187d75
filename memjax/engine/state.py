"""Device-resident engine state: sequence slots, the paged KV pool, the request queue, the output ring.

Owns: the pytrees the generation loop carries, their construction, and the page pool operations.
Shapes (B slots, W window, C prefill chunk, MP pages per sequence, P pages, Q queue rows, R ring rows):
  Slots.tokens int32 [B, W + C] (prompt then generated ids; C columns of slack so a prefill chunk slice
  never clamps), Slots.logprobs f32 [B, W + C], Slots.page_table int32 [B, MP] (0 = null page).
  Pool.k / Pool.v [L, KV, P, S, D] in `kv_dtype(mcfg, ecfg)` (the model's compute dtype, or float8_e4m3fn
  holding x / EngineConfig.kv.k_scale / v_scale); page 0 is the null page (never allocated,
  refcount pinned at 0; padding writes land there and are never read as valid). Pool.free_stack[:n_free]
  holds the free page ids; refcount[p] = number of slots whose page table holds p.
The loop donates Slots and Pool; Queue is an input; Ring collects finished/preempted rows for the host.
Retained rows (continuations) keep their page references after release; the host owns them until
`Engine.release` drops them (refcount - 1 each), so the pool's free pages exclude them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from ..model.config import ModelConfig
from .config import EngineConfig


@struct.dataclass
class Slots:
    active: jax.Array  # bool [B]
    req: jax.Array  # int32 [B] request id
    group: jax.Array  # int32 [B] prefix-sharing group (same prompt), -1 none
    order: jax.Array  # int32 [B] admission counter (LIFO preemption victim = max)
    prompt_len: jax.Array  # int32 [B]
    seq_len: jax.Array  # int32 [B] tokens whose K/V are cached
    n_gen: jax.Array  # int32 [B] generated tokens (the newest is not cached yet)
    finish: jax.Array  # int32 [B] -1 running, else FINISH_* code
    tokens: jax.Array  # int32 [B, W + C]
    logprobs: jax.Array  # f32 [B, W + C] (at generated positions)
    page_table: jax.Array  # int32 [B, MP]
    n_pages: jax.Array  # int32 [B]
    temperature: jax.Array  # f32 [B]
    top_p: jax.Array  # f32 [B]
    top_k: jax.Array  # int32 [B]
    max_new: jax.Array  # int32 [B]
    seed: jax.Array  # int32 [B]
    pos_offset: jax.Array  # int32 [B] PRNG position offset (tokens dropped by left truncation)
    stop: jax.Array  # int32 [B, NS] (-1 = none)
    processed: jax.Array  # bool [B] log-probs under the truncated distribution (SamplingParams.logprobs)
    retain: jax.Array  # bool [B] on finish keep the page references (moved to the ring) for a continuation


@struct.dataclass
class Pool:
    k: jax.Array
    v: jax.Array
    refcount: jax.Array  # int32 [P]
    free_stack: jax.Array  # int32 [P]
    n_free: jax.Array  # int32 []


@struct.dataclass
class Queue:
    valid: jax.Array  # bool [Q]
    admitted: jax.Array  # bool [Q] (output)
    req: jax.Array  # int32 [Q]
    tokens: jax.Array  # int32 [Q, W + C]
    prompt_len: jax.Array  # int32 [Q]
    group: jax.Array  # int32 [Q] prefix-sharing group (identical prompts), -1 none
    shared_pages: jax.Array  # int32 [Q] full prompt pages shareable within the group
    temperature: jax.Array
    top_p: jax.Array
    top_k: jax.Array
    max_new: jax.Array
    seed: jax.Array
    pos_offset: jax.Array
    stop: jax.Array  # int32 [Q, NS]
    processed: jax.Array  # bool [Q]
    retain: jax.Array  # bool [Q]
    prefix_table: jax.Array  # int32 [Q, MP] a retained parent's pages (continuations; else 0)
    n_prefix: jax.Array  # int32 [Q] full parent pages the row maps instead of prefilling them


@struct.dataclass
class Ring:
    req: jax.Array  # int32 [R]
    reason: jax.Array  # int32 [R]
    prompt_len: jax.Array  # int32 [R]
    n_gen: jax.Array  # int32 [R]
    tokens: jax.Array  # int32 [R, W + C]
    logprobs: jax.Array  # f32 [R, W + C]
    seq_len: jax.Array  # int32 [R] tokens cached in the row's pages
    n_pages: jax.Array  # int32 [R]
    page_table: jax.Array  # int32 [R, MP] (meaningful where retained)
    retained: jax.Array  # bool [R] the row's page references were kept (Slots.retain, not preempted)
    count: jax.Array  # int32 []


@struct.dataclass
class Counters:
    rounds: jax.Array
    prefill_rounds: jax.Array
    preemptions: jax.Array
    prefill_tokens: jax.Array
    decode_tokens: jax.Array
    shared_pages: jax.Array
    prefill_executed: jax.Array  # token rows the prefill forwards ran (padding included; >= prefill_tokens)


def kv_dtype(mcfg: ModelConfig, ecfg: EngineConfig) -> jnp.dtype:
    """The pool's dtype: EngineConfig.kv.kv_dtype, "compute" meaning the model's compute dtype."""
    return mcfg.jnp_dtype if ecfg.kv.kv_dtype == "compute" else jnp.dtype(ecfg.kv.kv_dtype)


def kv_bytes_per_page(mcfg: ModelConfig, ecfg: EngineConfig) -> int:
    return 2 * mcfg.num_layers * mcfg.num_kv_heads * ecfg.page_size * mcfg.head_dim * kv_dtype(mcfg, ecfg).itemsize


def init_slots(ecfg: EngineConfig) -> Slots:
    b, wc, mp = ecfg.max_slots, ecfg.window + ecfg.prefill_chunk, ecfg.pages_per_seq
    zi = lambda *s: jnp.zeros(s, jnp.int32)
    return Slots(active=jnp.zeros(b, bool), req=zi(b) - 1, group=zi(b) - 1, order=zi(b), prompt_len=zi(b), seq_len=zi(b),
                 n_gen=zi(b), finish=zi(b) - 1, tokens=zi(b, wc), logprobs=jnp.zeros((b, wc), jnp.float32),
                 page_table=zi(b, mp), n_pages=zi(b), temperature=jnp.ones(b, jnp.float32),
                 top_p=jnp.ones(b, jnp.float32), top_k=zi(b), max_new=zi(b), seed=zi(b), pos_offset=zi(b),
                 stop=zi(b, ecfg.max_stop_ids) - 1, processed=jnp.zeros(b, bool), retain=jnp.zeros(b, bool))


def init_pool(mcfg: ModelConfig, ecfg: EngineConfig, num_pages: int) -> Pool:
    shape = (mcfg.num_layers, mcfg.num_kv_heads, num_pages, ecfg.page_size, mcfg.head_dim)
    ids = jnp.arange(num_pages, dtype=jnp.int32)
    dt = kv_dtype(mcfg, ecfg)
    return Pool(k=jnp.zeros(shape, dt), v=jnp.zeros(shape, dt),
                refcount=jnp.zeros(num_pages, jnp.int32),
                free_stack=jnp.where(ids < num_pages - 1, ids + 1, 0),  # pages 1..P-1; page 0 is null
                n_free=jnp.int32(num_pages - 1))


def init_ring(ecfg: EngineConfig) -> Ring:
    r, wc = 2 * ecfg.max_slots, ecfg.window + ecfg.prefill_chunk
    zi = lambda *s: jnp.zeros(s, jnp.int32)
    return Ring(req=zi(r) - 1, reason=zi(r), prompt_len=zi(r), n_gen=zi(r), tokens=zi(r, wc),
                logprobs=jnp.zeros((r, wc), jnp.float32), seq_len=zi(r), n_pages=zi(r),
                page_table=zi(r, ecfg.pages_per_seq), retained=jnp.zeros(r, bool), count=jnp.int32(0))


def init_counters() -> Counters:
    z = jnp.int32(0)
    return Counters(rounds=z, prefill_rounds=z, preemptions=z, prefill_tokens=z, decode_tokens=z, shared_pages=z,
                    prefill_executed=z)


def release_pages(pool: Pool, page_table: jax.Array, n_pages: jax.Array, mask: jax.Array) -> Pool:
    """Drop one reference to every page held by the masked slots; pages reaching 0 return to the stack."""
    mp = page_table.shape[1]
    held = mask[:, None] & (jnp.arange(mp)[None] < n_pages[:, None]) & (page_table > 0)
    dec = jnp.zeros_like(pool.refcount).at[page_table.reshape(-1)].add(held.reshape(-1).astype(jnp.int32))
    rc = pool.refcount - dec
    freed = (dec > 0) & (rc == 0)
    pos = pool.n_free + jnp.cumsum(freed) - 1
    stack = pool.free_stack.at[jnp.where(freed, pos, pool.free_stack.shape[0])].set(
        jnp.arange(rc.shape[0], dtype=jnp.int32), mode="drop")
    return pool.replace(refcount=rc, free_stack=stack, n_free=pool.n_free + freed.sum(dtype=jnp.int32))


def pop_pages(pool: Pool, want: jax.Array) -> tuple[Pool, jax.Array]:
    """want int32 [n] pages per requester (caller guarantees sum <= n_free). Returns the pool and, per
    requester, the stack offset of its first page (its pages are free_stack[n_free-1-off-i], i < want)."""
    excl = jnp.cumsum(want) - want
    return pool.replace(n_free=pool.n_free - want.sum(dtype=jnp.int32)), excl


def stack_page(pool_before: Pool, off: jax.Array) -> jax.Array:
    """Page id at stack offset `off` counted from the top of pool_before's stack."""
    return pool_before.free_stack[jnp.clip(pool_before.n_free - 1 - off, 0, pool_before.free_stack.shape[0] - 1)]


def release_row(pool: Pool, pages: jax.Array, n_pages: jax.Array) -> Pool:
    """Drop one reference to each of pages[:n_pages] (int32 [MP], one retained sequence)."""
    return release_pages(pool, pages[None], n_pages[None], jnp.ones(1, bool))
