"""The device mesh and the shardings of training data and parameters.

Owns `make_mesh(data=-1, fsdp=1, tensor=1)` over the visible devices, `MeshConfig` (the config section; one axis
may be -1; the default puts every device on fsdp, ZeRO-3), `param_specs(params)`, `micro_rows_for` and
`rollout_devices(mesh)`. RolloutBatch rows are sharded over ("data", "fsdp"); parameters (memjax.model.qwen2's
stacked layout) shard the hidden dimension over "fsdp" and, Megatron style, q/k/v/gate/up outputs, o/down inputs
and the LM head's vocabulary over "tensor"; optimizer state follows the parameters and XLA inserts the collectives.
Invariants: an axis is dropped from a dimension it does not divide and norms are replicated; row counts are padded
to a multiple of data x fsdp (rows per device is the unit); with several processes and `across_hosts="data"` the
sizes are per host and the data axis is multiplied by the process count (only the gradient reduction crosses
hosts), with "flat" they are over all devices; devices are ordered by (process, id), so a process owns whole
consecutive mesh rows; `rollout_devices` are this process's only. docs/multihost.md, "What each process does".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA, FSDP, TENSOR = "data", "fsdp", "tensor"
MODEL = TENSOR  # back-compat alias

# parameter name (last path element) -> logical axes per dimension (stacked layer axis first)
_RULES: dict[str, tuple] = {
    "embed": (None, FSDP),
    "lm_head": (FSDP, TENSOR),
    "final_norm": (None,),
    "input_norm": (None, None), "post_norm": (None, None),
    "q_w": (None, FSDP, TENSOR), "k_w": (None, FSDP, TENSOR), "v_w": (None, FSDP, TENSOR),
    "q_b": (None, TENSOR), "k_b": (None, TENSOR), "v_b": (None, TENSOR),
    "o_w": (None, TENSOR, FSDP),
    "gate_w": (None, FSDP, TENSOR), "up_w": (None, FSDP, TENSOR), "down_w": (None, TENSOR, FSDP),
}


@dataclass(frozen=True)
class MeshConfig:
    """Mesh axis sizes; exactly one may be -1 (= the devices the others leave). data x fsdp devices get
    different rows; fsdp shards parameters, gradients and optimizer state (ZeRO-3); tensor shards heads and
    MLP columns."""

    data: int = 1
    fsdp: int = -1
    tensor: int = 1
    across_hosts: str = "data"  # "data": sizes per process, data x process count; "flat": over all devices

    def __post_init__(self):
        sizes = (self.data, self.fsdp, self.tensor)
        if any(not isinstance(s, int) or isinstance(s, bool) or s == 0 or s < -1 for s in sizes):
            raise ValueError(f"MeshConfig: axis sizes must be >= 1 or -1, got data={self.data} fsdp={self.fsdp} "
                             f"tensor={self.tensor}")
        if sizes.count(-1) > 1:
            raise ValueError(f"MeshConfig: at most one axis may be -1, got {self}")
        if self.across_hosts not in ("data", "flat"):
            raise ValueError(f"MeshConfig.across_hosts must be 'data' or 'flat', got {self.across_hosts!r}")

    def sizes(self, num_devices: int) -> tuple[int, int, int]:
        """(data, fsdp, tensor) for `num_devices` devices; ValueError when they do not multiply to it."""
        fixed = math.prod(s for s in (self.data, self.fsdp, self.tensor) if s != -1)
        if -1 in (self.data, self.fsdp, self.tensor):
            if num_devices % fixed:
                raise ValueError(f"MeshConfig {self}: {num_devices} devices are not divisible by {fixed}")
            fill = num_devices // fixed
            out = tuple(fill if s == -1 else s for s in (self.data, self.fsdp, self.tensor))
        else:
            out = (self.data, self.fsdp, self.tensor)
        if math.prod(out) != num_devices:
            raise ValueError(f"MeshConfig: data={out[0]} x fsdp={out[1]} x tensor={out[2]} != {num_devices} devices")
        return out  # type: ignore[return-value]

    def global_sizes(self, num_devices: int, processes: int = 1) -> tuple[int, int, int]:
        """(data, fsdp, tensor) over `num_devices` devices in all, split evenly over `processes` processes."""
        if processes == 1 or self.across_hosts == "flat":
            return self.sizes(num_devices)
        d, f, t = self.sizes(num_devices // processes)
        return d * processes, f, t

    def make(self, devices=None) -> Mesh:
        devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id)) if devices is None else list(devices)
        procs = len({d.process_index for d in devices})
        d, f, t = self.global_sizes(len(devices), procs)
        return Mesh(np.asarray(devices).reshape(d, f, t), (DATA, FSDP, TENSOR))


def make_mesh(data: int = -1, fsdp: int = 1, tensor: int = 1) -> Mesh:
    devices = jax.devices()
    n = len(devices)
    if data == -1:
        if n % (fsdp * tensor):
            raise ValueError(f"make_mesh: {n} devices not divisible by fsdp x tensor = {fsdp * tensor}")
        data = n // (fsdp * tensor)
    if data * fsdp * tensor != n:
        raise ValueError(f"make_mesh: data={data} x fsdp={fsdp} x tensor={tensor} != {n} devices")
    return Mesh(np.asarray(devices).reshape(data, fsdp, tensor), (DATA, FSDP, TENSOR))


def rows_sharding(mesh: Mesh) -> NamedSharding:
    """For [N, ...] arrays whose leading axis is conversations."""
    return NamedSharding(mesh, P((DATA, FSDP)))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def rollout_devices(mesh: Mesh) -> list:
    """This process's devices of the mesh in (data, fsdp, tensor) order, tensor fastest: the devices a
    data-parallel rollout engine (EngineConfig.data_parallel = -1) spans; its groups of tensor_parallel = T
    consecutive devices are the trainer's tensor groups when T = the mesh's tensor size (one group per device
    at T = 1). With one process: every device of the mesh."""
    me = jax.process_index()
    return [d for d in np.asarray(mesh.devices).reshape(-1) if d.process_index == me]


def data_size(mesh: Mesh) -> int:
    """Devices that receive different rows (data x fsdp)."""
    return mesh.shape[DATA] * mesh.shape[FSDP]


def micro_rows_for(micro_rows: int, rows_devices: int) -> int:
    """Rows of one micro-batch on `rows_devices` (= data x fsdp) devices: UpdateConfig.micro_rows rounded up to
    a multiple of them, so every device gets ceil(micro_rows / rows_devices) whole rows (the unit is rows per
    device; sequence parallelism is not implemented). micro_rows=1 on 8 devices runs 8 rows per micro-batch,
    one per device: the per-device memory is that of one row, and a mini-batch with fewer rows than that is
    padded with empty rows (the trainer reports it as pad_fraction)."""
    return -(-int(micro_rows) // rows_devices) * rows_devices


def param_spec(name: str, shape: tuple[int, ...], mesh: Mesh) -> P:
    rule = _RULES.get(name, (None,) * len(shape))
    if len(rule) != len(shape):
        rule = (None,) * len(shape)
    axes = [ax if ax is not None and mesh.shape[ax] > 1 and dim % mesh.shape[ax] == 0 else None
            for ax, dim in zip(rule, shape)]
    return P(*axes)


def param_shardings(state, mesh: Mesh):
    """NamedShardings for an nnx State (or any pytree keyed by parameter names) of the decoder."""
    def spec(path, leaf):
        name = str(getattr(path[-1], "key", getattr(path[-1], "name", path[-1])))
        if name == "value" and len(path) > 1:  # nnx Variable wrapper
            name = str(getattr(path[-2], "key", path[-2]))
        return NamedSharding(mesh, param_spec(name, tuple(leaf.shape), mesh))

    return jax.tree_util.tree_map_with_path(spec, state)
