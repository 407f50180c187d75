"""Run by tests/e2e/parallel/test_on_mesh.py as 2 processes x 1 CPU device (memjax.launch): the trainer's checkpoint
state (a param replicated over the global mesh plus single-device leaves such as AdamW's step count) goes through
`on_mesh` and orbax's multi-process save and restore, as memjax/cli/train.py does. With one device per process the
save once failed ("When making an array from single-device arrays the input arrays must have one shard each").
Process 0 writes OUT/on_mesh.json: the restored values and the shardings' device counts."""

import json
import sys
from pathlib import Path

from memjax.parallel import initialize

initialize()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from memjax.parallel import on_mesh  # noqa: E402

out = Path(sys.argv[1])
mesh = Mesh(np.array(jax.devices()), ("data",))
rep = NamedSharding(mesh, P())
w = jax.make_array_from_process_local_data(rep, np.arange(6, dtype=np.float32).reshape(2, 3))
state = {"w": w, "count": jnp.asarray(7, jnp.int32), "mu": jnp.full((3,), 0.5, jnp.float32)}
saved = on_mesh(state, mesh)
mgr = ocp.CheckpointManager(out / "ckpt", options=ocp.CheckpointManagerOptions(max_to_keep=1))
mgr.save(1, args=ocp.args.Composite(state=ocp.args.StandardSave(saved)))
mgr.wait_until_finished()
abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), saved)
got = mgr.restore(1, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))["state"]
mgr.close()
if jax.process_index() == 0:
    (out / "on_mesh.json").write_text(json.dumps({
        "processes": jax.process_count(), "local_devices": jax.local_device_count(),
        "devices": {k: len(v.sharding.device_set) for k, v in saved.items()},
        "values": {k: np.asarray(v.addressable_shards[0].data).tolist() for k, v in got.items()}}))
