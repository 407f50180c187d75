"""Where an engine's state and programs live: `placement(ecfg, devices, model_cfg)` returns one of two placements
with the same interface, so the engine's host code has one path.

- `SingleDevice(ecfg, device)`: D = 1. Weights, slots, ring and pool committed to one device (a re-commit, no copy),
  so every call sees the same argument shardings and the loop compiles once (uncommitted state compiled it twice).
- `DataParallel` (memjax/engine/data_parallel.py): D groups of T = tensor_parallel devices, state stacked on a
  leading [D] axis.
The interface: `size` (D), `local` (one group's EngineConfig), `max_idle` (the idle_return a group can reach), `key`
(what its programs depend on: engines share them), `params(tree)`, `slots_ring()`, `pool(model_cfg, pages_per_group)`,
`queue(host_queue)` ([D, Q/D] host arrays in), `fetch(tree)` (device values out, with a leading [D] axis for either
placement), `zero_counts()`, `compile(loop)` (the one-group loop jitted over every group, Slots / Pool / Ring
donated) and `release_row(pool, group, row, n)`.
Invariants: D x T <= len(devices); T divides the model's query and KV heads and MLP width; the EngineConfig's
totals split into D groups (EngineConfig.per_device).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ..model.config import ModelConfig
from .config import EngineConfig
from .data_parallel import DataParallel
from .loop import LOOP_COMPILER_OPTIONS
from .state import init_pool, init_ring, init_slots, release_row

__all__ = ["SingleDevice", "placement"]


class SingleDevice:
    size = 1
    max_idle = 2**31 - 1  # idle_return is not capped: one group holds every slot

    def __init__(self, ecfg: EngineConfig, device):
        self.local, self.device = ecfg, device
        self.key = ("single", device.id)  # the device its programs' arguments are committed to
        self._put = functools.partial(jax.device_put, device=device)
        self._release = jax.jit(release_row, donate_argnums=0)

    def params(self, tree):
        return self._put(tree)

    def slots_ring(self):
        return self._put((init_slots(self.local), init_ring(self.local)))

    def pool(self, mcfg: ModelConfig, pages_per_group: int):
        return self._put(init_pool(mcfg, self.local, pages_per_group))

    def queue(self, host_queue):
        return jax.tree.map(lambda x: jnp.asarray(x[0]), host_queue)

    def fetch(self, tree):
        return jax.tree.map(lambda x: np.asarray(x)[None], jax.device_get(tree))

    def zero_counts(self):
        return self._put(jnp.int32(0))

    def compile(self, loop):
        return jax.jit(loop, donate_argnums=(1, 2, 4), compiler_options=LOOP_COMPILER_OPTIONS)

    def release_row(self, pool, group: int, row: np.ndarray, n: int):
        return self._release(pool, jnp.asarray(row), jnp.int32(n))


def spanned(ecfg: EngineConfig, devices) -> list:
    """The devices an engine of `ecfg` given `devices` runs on: the first D x T (data_parallel=-1: len(devices) // T
    groups of T); may hold fewer than D x T when `devices` are too few (`placement` refuses that)."""
    devs, t = list(devices), ecfg.tensor_parallel
    d = len(devs) // t if ecfg.data_parallel == -1 else ecfg.data_parallel
    return devs[: max(d, 0) * t]


def placement(ecfg: EngineConfig, devices, mcfg: ModelConfig):
    """The placement of `ecfg` over `devices` (data_parallel=-1: len(devices) // T groups), validated."""
    devs, t = list(devices), ecfg.tensor_parallel
    d = len(devs) // t if ecfg.data_parallel == -1 else ecfg.data_parallel
    if d < 1 or d * t > len(devs):
        raise ValueError(f"EngineConfig data_parallel={ecfg.data_parallel} x tensor_parallel={t} needs more than "
                         f"the {len(devs)} device(s) the engine was given")
    if t > 1 and (mcfg.num_heads % t or mcfg.num_kv_heads % t or mcfg.intermediate_size % t):
        raise ValueError(f"EngineConfig.tensor_parallel={t} must divide the model's heads ({mcfg.num_heads}), KV "
                         f"heads ({mcfg.num_kv_heads}) and MLP width ({mcfg.intermediate_size})")
    local = ecfg.per_device(d)  # the totals must split into d groups (data_parallel=-1 is resolved only here)
    if d * t == 1:
        return SingleDevice(ecfg, devs[0])
    return DataParallel(devs[: d * t], local, tensor=t)
