"""Data-parallel slot groups (x tensor parallel over heads): one engine over D x T devices.

Owns: `DataParallel(devices, tensor=T)`, the device side of an engine with EngineConfig.data_parallel = D
and tensor_parallel = T, D x T > 1:
- a mesh [D, T] over the devices, axes ("data", "tensor"): consecutive runs of T devices form one group;
- the engine state (Slots, Pool, Ring; the per-call Queue and Counters) stacked on a leading device-group
  axis of size D and sharded on "data": group d's slots, its 1/D of the KV pool (pages 0..P/D-1 of its
  own, page 0 its null page: page ids are local to a group), its queue rows and its ring live on group d's
  device(s) only. Pool.k / Pool.v are [D, L, KV, P/D, S, Dh], also sharded on "tensor" over the KV heads: every
  device's addressable shard is [1, L, KV/T, P/D, S, Dh]. Everything else is replicated over "tensor".
- `compile(loop)`: `jax.shard_map` of the unjitted single-device loop (memjax/engine/loop.py `make_loop`,
  compiled for `EngineConfig.per_device(D)`) over "data", jitted with Slots, Pool and Ring donated.
  Each device runs its own admit / prefill / decode rounds on its own requests, with its own while-loop
  trip count (no collective crosses groups; the call returns when the last group stops). The map is manual
  over "data" only: inside a group, XLA partitions the forward over "tensor" from the shardings (Megatron
  style: q/k/v/gate/up columns and o/down rows split by memjax.parallel's rules, one all-reduce after o and
  one after down per layer; attention reads only the device's KV heads; the LM head, norms and the
  scheduler are replicated, so every tensor shard samples the same tokens). `params` places the
  weights (from any layout, e.g. the trainer's FSDP shards); the counters come back per group ([D] each).
- `release_row`: drop one retained sequence's page references in its own group's pool.
The host (memjax/engine/engine.py) assigns each request to a group, so tokens, log-probs and seeds are
those of a 1-device engine given the same requests: sampling depends only on (seed, position).
Invariants: D divides max_slots, prefill_slots, num_pages and queue_size (EngineConfig.per_device); T divides
the model's query and KV heads and the MLP width (checked by the Engine).
Limitations: idle_return (chained turns) is per group, and the call returns when every group has stopped;
one host only (the host reads every group's ring, so every device must be addressable by this process).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ..model.config import ModelConfig
from ..parallel.mesh import _RULES, TENSOR
from .config import EngineConfig
from .loop import LOOP_COMPILER_OPTIONS
from .state import init_pool, init_ring, init_slots, release_row

DATA = "data"


def _stack(tree, d: int):
    return jax.tree.map(lambda a: jnp.broadcast_to(a, (d, *a.shape)), tree)


def _param_name(path) -> str:
    name = str(getattr(path[-1], "key", getattr(path[-1], "name", path[-1])))
    if name == "value" and len(path) > 1:  # nnx Variable wrapper
        name = str(getattr(path[-2], "key", path[-2]))
    return name


class DataParallel:
    """The data-parallel placement (module docstring; the interface is memjax/engine/placement.py's)."""

    def __init__(self, devices, local: EngineConfig, tensor: int = 1):
        self.devices, self.local = list(devices), local
        if any(d.process_index != jax.process_index() for d in self.devices):
            raise ValueError("EngineConfig.data_parallel: the engine's devices must all belong to this process "
                             "(a data-parallel engine spans one host)")
        self.tensor = tensor
        self.size = len(self.devices) // tensor
        self.mesh = Mesh(np.asarray(self.devices).reshape(self.size, tensor), (DATA, TENSOR))
        self.sharded = NamedSharding(self.mesh, P(DATA))  # leading axis = device group
        self.kv_sharded = NamedSharding(self.mesh, P(DATA, None, TENSOR))  # [D, L, KV, P, S, Dh]: KV heads split
        self._release = None
        self.max_idle = local.max_slots  # a group reaches at most its own slots

    # -- state ------------------------------------------------------------------------------------------
    def slots_ring(self):
        """(Slots, Ring) with a leading [D] axis, each group's part created on its own device(s)."""
        d, local = self.size, self.local
        return jax.jit(lambda: (_stack(init_slots(local), d), _stack(init_ring(local), d)),
                       out_shardings=self.sharded)()

    def pool(self, mcfg: ModelConfig, pages_per_group: int):
        """An empty Pool per group, [D]-stacked, K/V also split over "tensor" by KV heads."""
        local = self.local
        pool = jax.eval_shape(lambda: init_pool(mcfg, local, pages_per_group))
        sh = jax.tree.map(lambda _: self.sharded, pool).replace(k=self.kv_sharded, v=self.kv_sharded)
        return jax.jit(lambda: _stack(init_pool(mcfg, local, pages_per_group), self.size), out_shardings=sh)()

    def put(self, tree):
        """Host arrays with a leading [D] axis -> sharded on "data" (row d on device d)."""
        return jax.device_put(tree, self.sharded)

    queue = put  # the per-call queue: [D, Q / D] host arrays

    def fetch(self, tree):
        """Device values -> host numpy, [D]-leading as they are."""
        return jax.device_get(tree)

    def zero_counts(self):
        return self.put(np.zeros(self.size, np.int32))

    def params(self, params):
        """Weights on the engine's mesh (from any layout, e.g. the trainer's FSDP shards): replicated over
        "data"; over "tensor" split by memjax.parallel's rules (the fsdp axis dropped)."""
        def spec(path, a):
            rule = _RULES.get(_param_name(path), ())
            if len(rule) != a.ndim:
                rule = (None,) * a.ndim
            axes = [TENSOR if r == TENSOR and self.tensor > 1 and n % self.tensor == 0 else None
                    for r, n in zip(rule, a.shape)]
            return NamedSharding(self.mesh, P(*axes))

        return jax.device_put(params, jax.tree_util.tree_map_with_path(spec, params))

    # -- programs ---------------------------------------------------------------------------------------
    def compile(self, loop):
        """loop(params, slots, pool, queue, ring, max_rounds, idle_return) of one group -> the engine's
        run over all groups: same signature on [D]-stacked state, Slots / Pool / Ring donated."""
        def group(params, slots, pool, queue, ring, max_rounds, idle_return):
            one = lambda t: jax.tree.map(lambda a: a[0], t)
            out = loop(params, one(slots), one(pool), one(queue), one(ring), max_rounds, idle_return)
            return jax.tree.map(lambda a: a[None], out)

        dp = P(DATA)
        fn = jax.shard_map(group, mesh=self.mesh, in_specs=(P(), dp, dp, dp, dp, P(), P()), out_specs=dp,
                           axis_names={DATA}, check_vma=False)
        return jax.jit(fn, donate_argnums=(1, 2, 4), compiler_options=LOOP_COMPILER_OPTIONS)

    def release_row(self, pool, group: int, pages: np.ndarray, n_pages: int):
        """Drop one reference to pages[:n_pages] (int32 [MP]) in group `group`'s pool (donated)."""
        if self._release is None:
            def one(pool, pages, n):
                p = release_row(jax.tree.map(lambda a: a[0], pool), pages[0], n[0])
                return jax.tree.map(lambda a: a[None], p)

            dp = P(DATA)
            self._release = jax.jit(jax.shard_map(one, mesh=self.mesh, in_specs=(dp, dp, dp), out_specs=dp,
                                                  axis_names={DATA}, check_vma=False), donate_argnums=0)
        rows = np.zeros((self.size, len(pages)), np.int32)
        rows[group] = pages
        n = np.zeros(self.size, np.int32)
        n[group] = n_pages
        return self._release(pool, *self.put((rows, n)))
