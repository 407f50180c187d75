"""Data-parallel slot groups: one engine over D devices, each running its own generation loop.

Owns: `DataParallel(devices)`, the device side of an engine with EngineConfig.data_parallel = D > 1:
- a 1-D mesh over the D devices, axis "data";
- the engine state (Slots, Pool, Ring; the per-call Queue and Counters) stacked on a leading device-group
  axis of size D and sharded on "data": group d's slots, its 1/D of the KV pool (pages 0..P/D-1 of its
  own, page 0 its null page: page ids are local to a group), its queue rows and its ring live on device d
  only. Pool.k / Pool.v are [D, L, KV, P/D, S, Dh]; every device's addressable shard is [1, L, KV, P/D, S, Dh].
- `run(loop)`: `jax.shard_map` of the unjitted single-device loop (memjax/engine/loop.py `make_loop`,
  compiled for `EngineConfig.per_device(D)`) over "data", jitted with Slots, Pool and Ring donated.
  Each device runs its own admit / prefill / decode rounds on its own requests, with its own while-loop
  trip count (the body has no collectives; the call returns when the last group stops). Weights are
  replicated (`replicate`); the counters come back per group ([D] each).
- `release_row`: drop one retained sequence's page references in its own group's pool.
The host (memjax/engine/engine.py) assigns each request to a group, so tokens, log-probs and seeds are
those of a 1-device engine given the same requests: sampling depends only on (seed, position).
Invariants: D divides max_slots, prefill_slots, num_pages and queue_size (EngineConfig.per_device).
Limitations: idle_return (chained turns) is per group, and the call returns when every group has stopped;
one host only (the host reads every group's ring, so every device must be addressable by this process).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ..model.config import ModelConfig
from .config import EngineConfig
from .state import init_pool, init_ring, init_slots, release_row

DATA = "data"


def _stack(tree, d: int):
    return jax.tree.map(lambda a: jnp.broadcast_to(a, (d, *a.shape)), tree)


class DataParallel:
    def __init__(self, devices):
        self.devices = list(devices)
        if any(d.process_index != jax.process_index() for d in self.devices):
            raise ValueError("EngineConfig.data_parallel: the engine's devices must all belong to this process "
                             "(a data-parallel engine spans one host)")
        self.size = len(self.devices)
        self.mesh = Mesh(np.asarray(self.devices), (DATA,))
        self.sharded = NamedSharding(self.mesh, P(DATA))  # leading axis = device group
        self.replicated = NamedSharding(self.mesh, P())
        self._release = None

    # -- state ------------------------------------------------------------------------------------------
    def init_state(self, mcfg: ModelConfig, local: EngineConfig, pages_per_group: int):
        """(Slots, Pool, Ring) with a leading [D] axis, each group's part created on its own device."""
        d = self.size
        make = jax.jit(lambda: (_stack(init_slots(local), d), _stack(init_pool(mcfg, local, pages_per_group), d),
                                _stack(init_ring(local), d)), out_shardings=self.sharded)
        return make()

    def put(self, tree):
        """Host arrays with a leading [D] axis -> sharded on "data" (row d on device d)."""
        return jax.device_put(tree, self.sharded)

    def replicate(self, params):
        """Weights on every device of the engine (from any layout, e.g. the trainer's FSDP shards)."""
        return jax.device_put(params, self.replicated)

    # -- programs ---------------------------------------------------------------------------------------
    def run(self, loop):
        """loop(params, slots, pool, queue, ring, max_rounds, idle_return) of one group -> the engine's
        run over all groups: same signature on [D]-stacked state, Slots / Pool / Ring donated."""
        def group(params, slots, pool, queue, ring, max_rounds, idle_return):
            one = lambda t: jax.tree.map(lambda a: a[0], t)
            out = loop(params, one(slots), one(pool), one(queue), one(ring), max_rounds, idle_return)
            return jax.tree.map(lambda a: a[None], out)

        dp = P(DATA)
        fn = jax.shard_map(group, mesh=self.mesh, in_specs=(P(), dp, dp, dp, dp, P(), P()), out_specs=dp,
                           check_vma=False)
        return jax.jit(fn, donate_argnums=(1, 2, 4))

    def release_row(self, pool, group: int, pages: np.ndarray, n_pages: int):
        """Drop one reference to pages[:n_pages] (int32 [MP]) in group `group`'s pool (donated)."""
        if self._release is None:
            def one(pool, pages, n):
                p = release_row(jax.tree.map(lambda a: a[0], pool), pages[0], n[0])
                return jax.tree.map(lambda a: a[None], p)

            dp = P(DATA)
            self._release = jax.jit(jax.shard_map(one, mesh=self.mesh, in_specs=(dp, dp, dp), out_specs=dp,
                                                  check_vma=False), donate_argnums=0)
        rows = np.zeros((self.size, len(pages)), np.int32)
        rows[group] = pages
        n = np.zeros(self.size, np.int32)
        n[group] = n_pages
        return self._release(pool, *self.put((rows, n)))
