"""Data-parallel slot groups (x tensor parallel over heads): one engine over D x T devices.

Owns `DataParallel(devices, tensor=T)`, the device side of an engine with EngineConfig.data_parallel = D and
tensor_parallel = T (D x T > 1), with the interface of memjax/engine/placement.py. A mesh [D, T] ("data",
"tensor") holds the engine state stacked on a leading group axis sharded over "data": group d's slots, its 1/D of
the KV pool (page ids local to the group, page 0 its null page), queue rows and ring live on its devices only;
Pool.k / Pool.v [D, L, KV, P/D, S, Dh] are also split over "tensor" by KV head. `compile(loop)` runs the
single-device loop (memjax/engine/loop.py `make_loop`) per group under `jax.shard_map` over "data", Slots, Pool
and Ring donated; no collective crosses groups, and inside a group XLA partitions the forward over "tensor".
Invariants: D divides max_slots, prefill_slots, num_pages and queue_size (EngineConfig.per_device); T divides the
query and KV heads and the MLP width; tokens, log-probs and seeds equal a 1-device engine's, since sampling depends
only on (seed, position). One host only: every device must be addressable by this process.
docs/engine.md, "Several devices", has the layout and its limitations.
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
        self.key = ("data_parallel", tuple(d.id for d in self.devices), tensor)  # its programs' mesh

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
