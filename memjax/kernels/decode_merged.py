"""Decode attention with the split-K merge inside the kernel (EngineConfig.kernels.fuse_split_combine).

Owns `decode_merged(q_rows, k_pages, v_pages, layer, page_table, q_pos, kv_len, sem, *, num_heads, num_splits,
interpret) -> (out [b, 1, H, D] in q_rows' dtype, sem)` and `merge_semaphores(k_pages, b)`. Inputs are those of
`memjax.kernels.paged_attention.decode_from_rows` (q_rows [b, KV, R, D] from rope_kv.py, q_pos [b, 1]), and the
result equals it up to fp32 summation order. Grid (b, KV, n): each program stores its split's (m, l, acc), then
bumps its (layer, sequence, kv head) counter with an acquire-release atomic; the program that reads n - 1 merges
every split as `combine_splits` does and writes the G real rows. Nobody waits, so no schedule can deadlock.
Invariants: sem is int32 [L, b, KV], zero when a forward starts (one memset per round), aliased in place through
every layer, one row per layer; the partial buffers are kernel scratch. The memory order holds only on a real GPU
(interpret mode runs programs in order), so only the GPU tier checks it. Triton needs D a power of two >= 16 and
R >= 16. docs/engine.md, "Kernel design", has the merge protocol.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu  # the Triton primitives: atomics, barrier, volatile loads

from .paged_attention import _on_gpu, attend_pages, check_decode_rows, row_positions

__all__ = ["decode_merged", "merge_semaphores"]

_F32 = jnp.float32


def merge_semaphores(k_pages: jax.Array, batch: int) -> jax.Array:
    """The zero counters one forward's decode layers use: int32 [L, batch, KV] for a pool [L, KV, P, S, D]."""
    return jnp.zeros((k_pages.shape[0], batch, k_pages.shape[1]), jnp.int32)


@dataclasses.dataclass(frozen=True)
class _Cfg:
    groups: int      # G real rows of the R-row query block
    page: int        # S
    max_pages: int   # MP
    splits: int
    scale: float
    interpret: bool


def _store_rows(o_ref, i, h, res, groups: int):
    """Rows g < G of res [R, D] (fp32) into o_ref[i, h*G + g] (the Triton lowering cannot slice a register block,
    so each row is picked by a masked sum)."""
    row = lax.broadcasted_iota(jnp.int32, res.shape, 0)
    for g in range(groups):
        o_ref[i, h * groups + g, :] = jnp.sum(jnp.where(row == g, res, 0.0), axis=0).astype(o_ref.dtype)


def _kernel(layer_ref, kvl_ref, pt_ref, qpos_ref, q_ref, k_ref, v_ref, _sem_in, o_ref, m_ref, l_ref, acc_ref,
            sem_ref, *, cfg: _Cfg):
    i, h, sp = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    layer = layer_ref[0]
    m, l, acc = attend_pages(q_ref[...], qpos_ref[...], kvl_ref[i], layer, i, h, sp, pt_ref, k_ref, v_ref,
                             page=cfg.page, max_pages=cfg.max_pages, splits=cfg.splits, scale=cfg.scale)
    if cfg.splits == 1:
        _store_rows(o_ref, i, h, acc / jnp.where(l > 0, l, 1.0)[:, None], cfg.groups)
        return
    m_ref[i, h, sp, :], l_ref[i, h, sp, :], acc_ref[i, h, sp, :, :] = m, l, acc
    if not cfg.interpret:
        plgpu.debug_barrier()  # every thread's partial stores before the release below
    arrived = plgpu.atomic_add(sem_ref, (layer, i, h), jnp.ones((), jnp.int32))

    @pl.when(arrived == cfg.splits - 1)
    def _merge():
        def load(ref, *idx):
            view = ref.at[idx]
            return view[...] if cfg.interpret else plgpu.load(view, volatile=True)

        ms = [load(m_ref, i, h, s) for s in range(cfg.splits)]
        m_all = functools.reduce(jnp.maximum, ms)
        l_all = jnp.zeros_like(m_all)
        acc_all = jnp.zeros(acc.shape, _F32)
        for s, m_s in enumerate(ms):
            w = jnp.exp(m_s - m_all)
            l_all = l_all + w * load(l_ref, i, h, s)
            acc_all = acc_all + w[:, None] * load(acc_ref, i, h, s)
        _store_rows(o_ref, i, h, acc_all / jnp.where(l_all > 0, l_all, 1.0)[:, None], cfg.groups)


def decode_merged(q_rows: jax.Array, k_pages: jax.Array, v_pages: jax.Array, layer, page_table: jax.Array,
                  q_pos: jax.Array, kv_len: jax.Array, sem: jax.Array, *, num_heads: int, num_splits: int = 1,
                  interpret: bool | None = None, debug: bool = False):
    """Decode attention from rope_kv's row layout with the splits merged in the kernel -> (out [b, 1, H, D], sem):
    see the module docstring. debug: Pallas prints the kernel's jaxpr and, lowered for a GPU, its Triton IR."""
    b, kvh, rows, d = q_rows.shape
    g = check_decode_rows("decode_merged", q_rows, k_pages, v_pages, q_pos, num_heads)
    if sem.shape != (k_pages.shape[0], b, kvh) or sem.dtype != jnp.int32:
        raise ValueError(f"decode_merged: sem must be int32 [L={k_pages.shape[0]}, b={b}, KV={kvh}] "
                         f"(merge_semaphores), got {sem.dtype}{sem.shape}")
    if not (isinstance(num_splits, int) and num_splits >= 1):
        raise ValueError(f"decode_merged: num_splits must be an int >= 1, got {num_splits!r}")
    if interpret is None:
        interpret = not _on_gpu()
    n = num_splits
    cfg = _Cfg(groups=g, page=k_pages.shape[3], max_pages=page_table.shape[1], splits=n,
               scale=1.0 / float(d) ** 0.5, interpret=bool(interpret))
    qpos_rows = row_positions(q_pos, g, rows)
    sq = pl.Squeezed()
    whole = lambda a: pl.BlockSpec(a.shape, lambda *_: (0,) * len(a.shape))  # noqa: E731
    args = (jnp.reshape(jnp.asarray(layer, jnp.int32), (1,)), kv_len.astype(jnp.int32),
            page_table.astype(jnp.int32), qpos_rows, q_rows, k_pages, v_pages, sem)
    in_specs = [whole(a) for a in args[:3]] + [
        pl.BlockSpec((sq, rows), lambda i, h, sp: (i, 0)),
        pl.BlockSpec((sq, sq, rows, d), lambda i, h, sp: (i, h, 0, 0)),
        whole(k_pages), whole(v_pages), whole(sem)]
    out_shape = [jax.ShapeDtypeStruct((b, num_heads, d), q_rows.dtype),
                 jax.ShapeDtypeStruct((b, kvh, n, rows), _F32), jax.ShapeDtypeStruct((b, kvh, n, rows), _F32),
                 jax.ShapeDtypeStruct((b, kvh, n, rows, d), _F32), jax.ShapeDtypeStruct(sem.shape, sem.dtype)]
    out, *_, sem = pl.pallas_call(
        functools.partial(_kernel, cfg=cfg), grid=(b, kvh, n), in_specs=in_specs,
        out_specs=[whole(o) for o in out_shape], out_shape=out_shape, input_output_aliases={len(args) - 1: 4},
        interpret=cfg.interpret, name="decode_merged", debug=debug,
    )(*args)
    return out.reshape(b, 1, num_heads, d), sem
