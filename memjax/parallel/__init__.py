"""memjax.parallel: device mesh, shardings, multi-host start-up.

Invariant: importing the package imports none of its modules (the names below resolve on first use, memjax/core/lazy.py),
so startup.py's launch-environment checks run before jax is imported (memjax.core.cli.run_cli)."""

from ..core.lazy import exports, names

__all__ = ["DistributedMismatch", "agree", "code_digest", "is_primary", "on_mesh", "process_local", "to_host", "DATA",
           "FSDP", "FsdpLayerSharding", "layer_sharding", "MODEL", "MeshConfig", "TENSOR", "data_size", "initialize",
           "make_mesh", "micro_rows_for", "param_shardings", "param_spec", "replicated", "rollout_devices",
           "rows_sharding"]
__getattr__, __dir__ = exports(globals(), {
    **names(".fsdp", "FsdpLayerSharding", "layer_sharding"),
    **names(".distributed", "DistributedMismatch", "agree", "code_digest", "initialize", "is_primary", "on_mesh",
            "process_local", "to_host"),
    **names(".mesh", "DATA", "FSDP", "MODEL", "TENSOR", "MeshConfig", "data_size", "make_mesh", "micro_rows_for",
            "param_shardings", "param_spec", "replicated", "rollout_devices", "rows_sharding"),
})
