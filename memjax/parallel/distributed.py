"""Multi-process start-up and the few process-aware helpers every stage uses (jax.distributed).

Owns `initialize()` (`jax.distributed.initialize()` when the process is one of several -- the JAX variables that
`python -m memjax.launch` sets, an srun step of several tasks or an Open MPI job of several ranks -- after the
start-up checks of memjax/parallel/startup.py; for a training run it sends the native logs to out_dir/logs),
`is_primary()` (process 0, the one that writes), `agree(name, text)` / `code_digest()` (processes with different
configs or code refuse at start, one `DistributedMismatch` line), `on_mesh(tree, mesh)`, `to_host(x)` and
`process_local(tree)`.
Invariants: `initialize` runs before anything touches the XLA backend and is a no-op for one process or when
already initialized; the coordination heartbeat is MEMJAX_HEARTBEAT_S (default 30 s), so a dead process ends the
others within about that time instead of a hang in a collective; on CPU, cross-process collectives use gloo.
Nothing here runs a collective unless every process calls it in the same order; with one process every helper is a
cheap no-op. docs/multihost.md, "Start-up, stopping and faults".
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import jax
import numpy as np

from . import logtee, startup
from .startup import DEFAULT_HEARTBEAT_S, HEARTBEAT_ENV

_KV_TIMEOUT_MS = 120_000


class DistributedMismatch(ValueError):
    """Processes of one run disagree (config, code); the message is one line."""


def _initialized() -> bool:
    from jax._src import distributed

    return distributed.global_state.client is not None


def initialize(out_dir: str | None = None) -> bool:
    """Join the multi-process runtime when launched as several processes; True when running multi-process.
    Every start-up mistake is one line (memjax.parallel.startup.StartupError, or the deadline's exit) within
    MEMJAX_INIT_TIMEOUT_S seconds. With `out_dir`, the native (C++) log goes to out_dir/logs/process_<i>.log
    and a lost peer is one console line (memjax.parallel.logtee).
    Raises RuntimeError (one line) when the backend was already started, i.e. initialize came too late."""
    if _initialized():
        return True
    env = startup.check_env()  # checked even when it is not multi-process (JAX_NUM_PROCESSES without an address)
    if not startup.launched_as_many():
        return False
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise RuntimeError("memjax.parallel.initialize: the JAX backend was started before jax.distributed; "
                           "call initialize() before any jax.devices()/computation")
    heartbeat = startup.int_env(HEARTBEAT_ENV) or DEFAULT_HEARTBEAT_S
    timeout = startup.init_timeout()
    kw, where = {}, os.environ.get("JAX_COORDINATOR_ADDRESS", "the coordinator")
    if env is not None:  # the documented JAX variables (jax itself reads only the address)
        address, n, pid = env
        kw = {"num_processes": n, "process_id": pid}
        startup.probe(address, os.environ.get("JAX_COORDINATOR_BIND_ADDRESS"), pid, timeout)
    rank = startup.launch_rank()  # the JAX variables, an srun step or mpirun: the native log goes to out_dir/logs
    if out_dir is not None and rank is not None and rank[1] > 1:
        logtee.start(rank[0], rank[1], out_dir, heartbeat)
    what = (f"memjax: not every process joined the coordinator at {where} within {timeout} s "
            f"({startup.INIT_TIMEOUT_ENV}): start as many processes as JAX_NUM_PROCESSES says, each with its own "
            "JAX_PROCESS_ID, and the same JAX_COORDINATOR_ADDRESS")
    with startup.deadline(timeout, what):  # jax's own timeout (an abort with a C++ trace) comes later
        jax.distributed.initialize(heartbeat_timeout_seconds=heartbeat, shutdown_timeout_seconds=max(2 * heartbeat, 10),
                                   initialization_timeout=timeout + 30, **kw)
    startup.same_devices()
    return True


def is_primary() -> bool:
    return jax.process_index() == 0


def code_digest() -> str:
    """sha256 of the memjax package's .py sources (path + content): two checkouts that differ anywhere differ."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def agree(name: str, text: str) -> None:
    """Refuse (DistributedMismatch) unless every process passed the same `text` under `name`."""
    if jax.process_count() == 1:
        return
    from jax._src import distributed

    client = distributed.global_state.client
    mine = hashlib.sha256(text.encode()).hexdigest()[:16]
    me, n = jax.process_index(), jax.process_count()
    client.key_value_set(f"memjax/agree/{name}/{me}", mine)
    got = {p: client.blocking_key_value_get(f"memjax/agree/{name}/{p}", _KV_TIMEOUT_MS) for p in range(n)}
    if len(set(got.values())) > 1:
        differ = [p for p in range(n) if got[p] != got[0]]
        raise DistributedMismatch(f"processes disagree on the {name}: process(es) {differ} differ from process 0 "
                                  f"({', '.join(f'{p}={d}' for p, d in sorted(got.items()))}); start every "
                                  "process with the same config and code")


def process_local(tree):
    """The arrays of `tree` as single-device arrays on this process's first local device; leaves that span
    other processes are all-gathered first (a collective: every process calls this at the same point)."""
    leaves = jax.tree.leaves(tree)
    if all(getattr(a, "is_fully_addressable", True) for a in leaves):
        return tree
    from jax.sharding import NamedSharding, PartitionSpec as P

    spread = [a for a in leaves if not a.is_fully_addressable]
    full = [NamedSharding(a.sharding.mesh, P()) for a in spread]  # multi-process arrays here are NamedSharded
    gathered = iter(jax.jit(lambda xs: xs, out_shardings=full)(spread))
    dev = jax.local_devices()[0]
    return jax.tree.map(lambda a: a if a.is_fully_addressable else
                        jax.device_put(next(gathered).addressable_data(0), dev), tree)


def to_host(x) -> np.ndarray:
    """numpy copy of `x`; an array spanning several processes is all-gathered (every process must call)."""
    if getattr(x, "is_fully_addressable", True) or x.is_fully_replicated:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def on_mesh(tree, mesh):
    """Single-device arrays of `tree` replicated over `mesh` when there are several processes (checkpointing)."""
    if jax.process_count() == 1:
        return tree
    from jax.sharding import NamedSharding, PartitionSpec as P

    rep = NamedSharding(mesh, P())
    local = sorted(rep.addressable_devices, key=lambda d: d.id)

    def replicate(a):  # built from this process's copy on each of its devices: every process holds the same value.
        # (jax.device_put(a, rep) here gave arrays whose shards orbax cannot list with one device per process.)
        host = np.asarray(jax.device_get(a))
        return jax.make_array_from_single_device_arrays(a.shape, rep, [jax.device_put(host, d) for d in local])

    return jax.tree.map(lambda a: replicate(a) if isinstance(a, jax.Array) and len(a.sharding.device_set) == 1
                        and jax.device_count() > 1 else a, tree)
