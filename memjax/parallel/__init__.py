"""memjax.parallel: device mesh, shardings, multi-host start-up."""

from .fsdp import FsdpLayerSharding, layer_sharding
from .distributed import DistributedMismatch, agree, code_digest, initialize, is_primary, on_mesh, process_local, to_host
from .mesh import (DATA, FSDP, MODEL, TENSOR, MeshConfig, data_size, make_mesh, micro_rows_for, param_shardings,
                   param_spec, replicated, rollout_devices, rows_sharding)

__all__ = ["DistributedMismatch", "agree", "code_digest", "is_primary", "on_mesh", "process_local", "to_host", "DATA",
           "FSDP", "FsdpLayerSharding", "layer_sharding", "MODEL", "MeshConfig", "TENSOR", "data_size", "initialize",
           "make_mesh", "micro_rows_for", "param_shardings", "param_spec", "replicated", "rollout_devices",
           "rows_sharding"]
