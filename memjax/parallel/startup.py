"""Start-up checks of a multi-process run: every mistake is one line naming the cause and the fix, within seconds.

Owns, around `jax.distributed.initialize` (memjax.parallel.initialize calls them in this order): `check_env()`
(every launch-environment check that needs no jax; memjax.core.cli.run_cli runs it before jax is imported),
`jax_env()` (inconsistent JAX variables raise `StartupError`), `slurm_batch_tasks()` (sbatch without srun is
refused, naming the `srun` to run, unless MEMJAX_SINGLE_PROCESS=1), `launch_rank()`, `probe(...)` (process 0 must
bind the coordinator port, every other process reach it), `deadline(seconds, what)` (a watchdog around joining: one
line and os._exit(EXIT_STARTUP) before jax's own timeout can abort with a C++ trace) and `exchange(name, value)`
(a JSON value of every process through the coordinator's key-value store).
Invariants: every wait uses MEMJAX_INIT_TIMEOUT_S seconds (default 30); nothing here starts the XLA backend and
nothing at module level imports jax; with one process only check_env's variable checks run.
docs/multihost.md, "Start-up, stopping and faults", lists the checks and their messages.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from contextlib import contextmanager

INIT_TIMEOUT_ENV = "MEMJAX_INIT_TIMEOUT_S"
DEFAULT_INIT_TIMEOUT_S = 30
HEARTBEAT_ENV = "MEMJAX_HEARTBEAT_S"
DEFAULT_HEARTBEAT_S = 30  # jax's is 100; 10 s let a healthy process starved of CPU (2 busy cores) be declared lost
EXIT_STARTUP = 2  # the CLI's exit code for bad input: every start-up refusal exits with it
SINGLE_ENV = "MEMJAX_SINGLE_PROCESS"  # =1: run one process even inside a SLURM allocation of several tasks


class StartupError(ValueError):
    """A multi-process run cannot start; the message is one line with the cause and the fix."""


def init_timeout() -> int:
    v = os.environ.get(INIT_TIMEOUT_ENV, "")
    if not v:
        return DEFAULT_INIT_TIMEOUT_S
    if not v.isdigit() or int(v) < 1:
        raise StartupError(f"{INIT_TIMEOUT_ENV}={v!r} must be a whole number of seconds >= 1")
    return int(v)


def int_env(name: str) -> int | None:
    v = os.environ.get(name)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise StartupError(f"{name}={v!r} must be an integer") from None


def split_address(name: str, address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise StartupError(f"{name}={address!r} is not host:port (e.g. 10.0.0.1:12355, the host of process 0 "
                           "and a free port)")
    return host.strip("[]"), int(port)


def jax_env() -> tuple[str, int, int] | None:
    """(address, num_processes, process_id) from the JAX variables, None when they are not used; checked."""
    addr = os.environ.get("JAX_COORDINATOR_ADDRESS")
    n, pid = int_env("JAX_NUM_PROCESSES"), int_env("JAX_PROCESS_ID")
    if addr is None:
        if (n is not None and n > 1) or (pid is not None and pid > 0):
            raise StartupError(f"JAX_NUM_PROCESSES={n} JAX_PROCESS_ID={pid} but JAX_COORDINATOR_ADDRESS is not set; "
                               "set it to host:port of process 0 on every process (or start them with "
                               "python -m memjax.launch)")
        return None
    split_address("JAX_COORDINATOR_ADDRESS", addr)
    if n is None or pid is None:
        if n is None and pid is None:
            return None  # only the address: jax finds the rest (SLURM, Open MPI)
        missing = "JAX_NUM_PROCESSES" if n is None else "JAX_PROCESS_ID"
        raise StartupError(f"JAX_COORDINATOR_ADDRESS is set but {missing} is not; set JAX_NUM_PROCESSES and "
                           "JAX_PROCESS_ID on every process")
    if n < 1:
        raise StartupError(f"JAX_NUM_PROCESSES={n} must be >= 1")
    if not 0 <= pid < n:
        raise StartupError(f"JAX_PROCESS_ID={pid} is outside 0..{n - 1} (JAX_NUM_PROCESSES={n}); number the "
                           "processes 0, 1, ... once each")
    return addr, n, pid


def launched_as_many() -> bool:
    """The environment says this is one of several processes (the JAX variables, an srun step, mpirun)."""
    env = os.environ
    if "JAX_COORDINATOR_ADDRESS" in env:
        return True
    for var in ("SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE"):  # an srun step / mpirun (not a bare sbatch script)
        n = int_env(var)
        if n is not None and n > 1:
            return True
    return False


def slurm_batch_tasks() -> int | None:
    """The task count of a SLURM allocation of several tasks when this process is its batch script (no srun step,
    no JAX variables, MEMJAX_SINGLE_PROCESS unset); None otherwise."""
    env = os.environ
    if ("SLURM_JOB_ID" not in env or "SLURM_STEP_NUM_TASKS" in env or "JAX_COORDINATOR_ADDRESS" in env
            or env.get(SINGLE_ENV) == "1"):
        return None
    n = int_env("SLURM_NTASKS") or int_env("SLURM_NPROCS")
    return n if n is not None and n > 1 else None


def launch_rank() -> tuple[int, int] | None:
    """(process index, process count) as the launch environment states it: the JAX variables, an srun step
    (SLURM_PROCID / SLURM_STEP_NUM_TASKS) or mpirun (OMPI_COMM_WORLD_RANK / _SIZE); None when it states none."""
    for rank, size in (("JAX_PROCESS_ID", "JAX_NUM_PROCESSES"), ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS"),
                       ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        r, n = int_env(rank), int_env(size)
        if r is not None and n is not None:
            return r, n
    return None


def check_env() -> tuple[str, int, int] | None:
    """jax_env()'s result after every launch-environment check that needs no jax, in initialize's order (a
    StartupError names the variable): the JAX variables, a SLURM batch script of several tasks, then, when
    launched as several processes, the heartbeat and the start-up timeout."""
    env = jax_env()  # checked even when it is not multi-process (JAX_NUM_PROCESSES without an address)
    tasks = slurm_batch_tasks()
    if tasks:
        raise StartupError(f"SLURM_NTASKS={tasks} but this is the allocation's batch script, not an srun step: start "
                           "the command with srun (srun python -m memjax.train CONFIG ..., one task per host), or "
                           f"set {SINGLE_ENV}=1 to run a single process here")
    if launched_as_many():
        int_env(HEARTBEAT_ENV)
        init_timeout()
    return env


def probe(address: str, bind: str | None, process_id: int, timeout: float) -> None:
    """Process 0: the coordinator port is free to bind. Others: it accepts connections within `timeout`."""
    host, port = split_address("JAX_COORDINATOR_ADDRESS", address)
    if process_id == 0:
        bhost = split_address("JAX_COORDINATOR_BIND_ADDRESS", bind)[0] if bind else ""
        family = socket.AF_INET6 if ":" in bhost else socket.AF_INET
        with socket.socket(family) as s:
            try:
                s.bind((bhost if bhost not in ("::", "0.0.0.0") else "", port))
            except OSError as e:
                raise StartupError(f"process 0 cannot listen on port {port} for the coordinator ({e.strerror}): "
                                   "another run, or a second process started with JAX_PROCESS_ID=0, holds it; "
                                   "use a free port in JAX_COORDINATOR_ADDRESS (or check the process ids)") from None
        return
    end = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=2):
                return
        except OSError as e:
            if time.monotonic() >= end:
                raise StartupError(f"process {process_id} cannot reach the coordinator at {address} within "
                                   f"{timeout:.0f} s ({e.strerror or e}): start process 0 (JAX_PROCESS_ID=0) or fix "
                                   f"JAX_COORDINATOR_ADDRESS; the wait is {INIT_TIMEOUT_ENV}") from None
            time.sleep(0.2)


@contextmanager
def deadline(seconds: float, what: str):
    """Run the block; if it is still running after `seconds`, print `what` (one line) and exit EXIT_STARTUP."""
    done = threading.Event()

    def fire():
        if not done.wait(seconds):
            print(what, file=sys.stderr, flush=True)
            os._exit(EXIT_STARTUP)

    t = threading.Thread(target=fire, daemon=True, name="memjax-startup-deadline")
    t.start()
    try:
        yield
    finally:
        done.set()


def exchange(name: str, value, timeout_s: float | None = None) -> list:
    """Every process's JSON-able `value` under `name`, in process order (all processes must call it)."""
    import jax
    from jax._src import distributed

    client = distributed.global_state.client
    me, n = jax.process_index(), jax.process_count()
    client.key_value_set(f"memjax/startup/{name}/{me}", json.dumps(value, sort_keys=True, default=str))
    ms = int(1000 * (timeout_s or init_timeout()))
    return [json.loads(client.blocking_key_value_get(f"memjax/startup/{name}/{p}", ms)) for p in range(n)]


def same_devices() -> None:
    """Every process holds the same number of local devices (the mesh is made of equal per-process blocks)."""
    import jax

    counts = exchange("local devices", jax.local_device_count())
    if len(set(counts)) > 1:
        me = jax.process_index()
        listed = ", ".join(f"process {p}: {c}" for p, c in enumerate(counts))
        raise StartupError(f"processes hold different numbers of devices ({listed}; this is process {me}); give "
                           "each the same (memjax.launch --devices-per-proc, XLA_FLAGS "
                           "--xla_force_host_platform_device_count, CUDA_VISIBLE_DEVICES)")
