"""memjax.parallel: device mesh, shardings, multi-host start-up."""

from .mesh import (DATA, FSDP, MODEL, TENSOR, data_size, initialize, make_mesh, param_shardings, param_spec,
                   replicated, rows_sharding)

__all__ = ["DATA", "FSDP", "MODEL", "TENSOR", "data_size", "initialize", "make_mesh", "param_shardings",
           "param_spec", "replicated", "rows_sharding"]
