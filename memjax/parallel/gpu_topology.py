"""Compile-only XLA:GPU nodes: the target configs of an H100 SXM (80 GB) and an H200 (141 GB), and the devices of
a node of them (`node_devices(kind, hosts, per_host)`) from jax's CUDA PJRT plugin without a GPU.

`jax.experimental.topologies.get_topology_desc("topo", "cuda", target_config=..., topology="1xHxD")` gives H hosts
(processes) of D devices each; programs jitted with shardings over them compile through XLA:GPU's whole pipeline
(SPMD partitioning, collectives, fusion, buffer assignment) on the CPU, so their memory analysis, collectives and
cost analysis are the GPU's. Needs the plugin (make venv: .venv/cuda-aot on PYTHONPATH, JAX_PLATFORMS=cpu).
H200 figures: 132 SMs at 1.98 GHz boost, 4.8 TB/s HBM3e, 141 GB (143,771 MiB) of memory, 60 MiB L2 (NVIDIA's H200
datasheet); the H100 target is the one the engine's deviceless checks have used.
"""

from __future__ import annotations

H100_TARGET = """
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 3352320000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.755
  device_memory_size: 84942979072
  shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 minor: 0 }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 8 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""

H200_TARGET = (H100_TARGET.replace("memory_bandwidth: 3352320000000", "memory_bandwidth: 4800000000000")
               .replace("device_memory_size: 84942979072", "device_memory_size: 150754820096")
               .replace("l2_cache_size: 52428800", "l2_cache_size: 62914560")
               .replace("clock_rate_ghz: 1.755", "clock_rate_ghz: 1.98")
               .replace('"NVIDIA H100 80GB HBM3"', '"NVIDIA H200"'))
TARGETS = {"h100": H100_TARGET, "h200": H200_TARGET}
HBM_GIB = {"h100": 80, "h200": 141}


def node_devices(kind: str, hosts: int = 1, per_host: int = 8) -> list:
    """hosts x per_host compile-only devices of `kind` ("h100" | "h200"), host-major (device i on host
    i // per_host)."""
    from jax.experimental import topologies

    if kind not in TARGETS:
        raise ValueError(f"GPU kind must be one of {sorted(TARGETS)}, got {kind!r}")
    devs = topologies.get_topology_desc("topo", "cuda", target_config=TARGETS[kind],
                                        topology=f"1x{hosts}x{per_host}").devices
    return sorted(devs, key=lambda d: (d.process_index, d.id))
