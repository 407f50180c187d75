"""ZeRO-3 style FSDP inside the scanned layer loop: gather one layer's weights, keep rows sharded.

Owns `layer_sharding(mesh)` -> `FsdpLayerSharding`, the `LayerSharding` that `Qwen2.forward(..., sharding=...)`
applies inside its scanned block (memjax/model/qwen2.py): `params` (each layer's slice constrained to its spec
with "fsdp" dropped, so it is all-gathered right before use and its gradient reduce-scattered), `activations` (the
residual stream's rows over ("data", "fsdp"), hidden replicated, so no activation is all-reduced in the loop),
`head` and `table` (the LM head and embedding gathered once per step, so token lookups stay local), `row_map`
(the fused log-prob run per device on its own rows under `jax.shard_map`) and `local()` (the same for code inside
`jax.shard_map(..., axis_names={"data"})`, the trainer's per-replica micro-batch loop).
Invariants: parameters, gradients and optimizer state stay 1/fsdp per device and only one layer is ever whole at
a time; `row_map` applies only when the tensor axis is 1 and the rows divide over data x fsdp; with fsdp and tensor
axes of 1 every constraint is a no-op layout statement. `FsdpLayerSharding`'s docstring says what XLA does without
each constraint.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from .mesh import DATA, FSDP, TENSOR, _RULES


def _drop_fsdp(axes) -> tuple:
    return tuple(None if a == FSDP else a for a in axes)


@dataclass(frozen=True)
class FsdpLayerSharding:
    """The FSDP `LayerSharding` of a mesh, and what each constraint prevents.

    - `params(p)`: each layer parameter (its per-layer slice) constrained to its memjax/parallel/mesh.py spec with the
      "fsdp" axis dropped (tensor sharding kept): stored sharded over fsdp, the slice is all-gathered right before the
      layer uses it, and the transpose of that all-gather in the backward pass reduce-scatters the layer's gradient.
    - `activations(x)`: the residual stream [B, T, h] constrained to rows over ("data", "fsdp"), hidden replicated;
      without it XLA splits the matmuls along the fsdp-sharded hidden dimension and all-reduces activations in every
      layer.
    - `head(w)`: the LM head / tied embedding [h, V] with fsdp dropped (gathered once per step, vocabulary kept on
      "tensor"), for the trainer's fused log-prob.
    - `table(e)`: the embedding table [V, h] gathered the same way before the token lookup; without it XLA all-gathers
      every token id and embedding of the micro-batch over the whole mesh, between hosts too.
    - `row_map(fn, n_rows)`: `fn(hidden, w, targets, mask)` (a custom VJP / Pallas call the partitioner cannot split)
      run per device on its own rows under `jax.shard_map`, w replicated; without it XLA gathers the whole
      micro-batch's hidden states onto every device.
    - `local()`: rows over fsdp only; `row_map` then nests a `jax.shard_map` over "fsdp" (each device its own rows,
      as above) on a GPU mesh. Without it XLA:GPU all-gathers the micro-batch's hidden states inside the fsdp group
      once per vocabulary chunk of the log-prob loop: 3.7 TB sent per device per update of the 7B recipe on 4 hosts
      x 8 H100 (deviceless compile). On a CPU mesh it returns `fn` unchanged (XLA gathers the rows, inside a host),
      because the nested shard_map aborts XLA:CPU's compiler with bf16 compute ("Invalid binary instruction opcode
      copy", jax 0.11).
    Qwen2.forward casts a layer's slice to the compute dtype before `params`, so the gather moves bf16 and the
    gradient leaves the layer as a reduce-scatter; casting after it (the f32 master slice gathered) made XLA:GPU
    all-reduce each whole bf16 weight gradient and slice it, twice the bytes of the reduce-scatter.
    """
    mesh: Mesh
    data_manual: bool = False  # inside a shard_map over the data axis (local()): rows over fsdp only

    @property
    def _rows(self) -> tuple:
        return (FSDP,) if self.data_manual else (DATA, FSDP)

    def local(self) -> "FsdpLayerSharding":
        return dataclasses.replace(self, data_manual=True)

    def _spec(self, axes: tuple, shape: tuple[int, ...]) -> NamedSharding:
        axes = tuple(a if a is not None and self.mesh.shape[a] > 1 and d % self.mesh.shape[a] == 0 else None
                     for a, d in zip(axes, shape))
        return NamedSharding(self.mesh, P(*axes))

    def params(self, p: dict[str, jax.Array]) -> dict[str, jax.Array]:
        out = {}
        for name, a in p.items():
            rule = _RULES.get(name, (None,) * (a.ndim + 1))[1:]
            if len(rule) != a.ndim:
                rule = (None,) * a.ndim
            out[name] = jax.lax.with_sharding_constraint(a, self._spec(_drop_fsdp(rule), a.shape))
        return out

    def activations(self, x: jax.Array) -> jax.Array:
        rows = self._rows
        n = math.prod(self.mesh.shape[a] for a in rows)
        spec = P(rows if x.shape[0] % n == 0 else None, *(None,) * (x.ndim - 1))
        return jax.lax.with_sharding_constraint(x, NamedSharding(self.mesh, spec))

    def head(self, w: jax.Array) -> jax.Array:
        return jax.lax.with_sharding_constraint(w, self._spec((None, TENSOR), w.shape))

    def table(self, e: jax.Array) -> jax.Array:
        return jax.lax.with_sharding_constraint(e, self._spec(_drop_fsdp(_RULES["embed"]), e.shape))

    def row_map(self, fn, n_rows: int):
        if self.data_manual:
            n = self.mesh.shape[FSDP]
            if self.mesh.devices.flat[0].platform == "cpu" or self.mesh.shape[TENSOR] > 1 or n == 1 or n_rows % n:
                return fn
            rows = P(FSDP)
            return jax.shard_map(fn, mesh=jax.sharding.get_abstract_mesh(), in_specs=(rows, P(), rows, rows),
                                 out_specs=(rows, rows), axis_names={FSDP}, check_vma=False)
        n = self.mesh.shape[DATA] * self.mesh.shape[FSDP]
        if self.mesh.shape[TENSOR] > 1 or n == 1 or n_rows % n:
            return fn
        rows = P((DATA, FSDP))
        return jax.shard_map(fn, mesh=self.mesh, in_specs=(rows, P(), rows, rows), out_specs=(rows, rows),
                             check_vma=False)


def layer_sharding(mesh: Mesh) -> FsdpLayerSharding:
    return FsdpLayerSharding(mesh)
