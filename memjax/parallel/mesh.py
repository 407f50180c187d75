"""The device mesh and the shardings of training data and parameters.

Owns: `make_mesh(data=-1, model=1)` over the visible devices (multi-host: call `initialize()` first),
and the PartitionSpecs used by the trainer: RolloutBatch token arrays [N, T] and per-row metadata are
sharded over the `data` axis (rows = conversations); parameters and optimizer state are replicated
(pure data parallelism; XLA inserts the gradient all-reduce). Row counts given to the trainer are
padded to a multiple of the data-axis size.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA, MODEL = "data", "model"


def initialize() -> None:
    """Multi-host start-up: `jax.distributed.initialize()` when launched under a cluster launcher
    (JAX_COORDINATOR_ADDRESS / SLURM / Open MPI environment), a no-op on one host."""
    if jax.process_count() > 1:
        return
    if any(k in os.environ for k in ("JAX_COORDINATOR_ADDRESS", "SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE")):
        jax.distributed.initialize()


def make_mesh(data: int = -1, model: int = 1) -> Mesh:
    devices = jax.devices()
    n = len(devices)
    if data == -1:
        if n % model:
            raise ValueError(f"make_mesh: {n} devices not divisible by model={model}")
        data = n // model
    if data * model != n:
        raise ValueError(f"make_mesh: data={data} x model={model} != {n} devices")
    return Mesh(np.asarray(devices).reshape(data, model), (DATA, MODEL))


def rows_sharding(mesh: Mesh) -> NamedSharding:
    """For [N, ...] arrays whose leading axis is conversations."""
    return NamedSharding(mesh, P(DATA))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def data_size(mesh: Mesh) -> int:
    return mesh.shape[DATA]
