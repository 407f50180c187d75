"""memjax.parallel: device mesh, shardings, multi-host start-up."""

from .mesh import DATA, MODEL, data_size, initialize, make_mesh, replicated, rows_sharding

__all__ = ["DATA", "MODEL", "data_size", "initialize", "make_mesh", "replicated", "rows_sharding"]
