"""`python -m memjax.launch --nproc N [--devices-per-proc K] [--port P] -- <module> <args>`: N local processes.

Owns the one-node launcher of a multi-process run (and of the CPU multi-process tests): it starts
`python -m <module> <args>` N times with the coordinator variables memjax.parallel.initialize reads
(JAX_COORDINATOR_ADDRESS=127.0.0.1:P, JAX_NUM_PROCESSES, JAX_PROCESS_ID) and, with --devices-per-proc K, K forced
host devices (CPU) or K consecutive visible GPUs each; process i's output lines are prefixed "[i] ".
Invariants: the exit status is 0 only when every process exits 0; when one fails the others are killed at once
(SIGTERM, SIGKILL after --grace) and one line names it; a SIGTERM or Ctrl-C to the launcher is a stop request
(every process reaches the same step, commits a checkpoint and exits 143; still running after --stop-timeout:
killed), and the launcher exits 143 (130 on Ctrl-C); the coordinator binds only to 127.0.0.1 (one node). On
clusters use the JAX variables or SLURM / Open MPI instead (docs/multihost.md).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux; the IANA range elsewhere)."""
    try:
        lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
        return lo, hi
    except (OSError, ValueError):
        return 49152, 65535


def free_port() -> int:
    """A port that binds on 127.0.0.1 now, drawn at random from [10000, start of the ephemeral range).

    Not the kernel's own pick (bind to port 0): that comes from the ephemeral range, which outgoing connections
    draw from too, so between this probe and the coordinator's bind another process's gRPC client could take it
    (the rare coordinator clashes of parallel test workers). Below that range only another explicit bind can, and
    draws from an OS-seeded generator make two launchers' picks independent."""
    lo = min(_ephemeral_range()[0], 65536)
    rng = random.SystemRandom()
    for _ in range(64 if lo > 11000 else 0):
        port = rng.randrange(10000, lo)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # no room below the ephemeral range: the kernel's pick
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(base: dict, i: int, n: int, port: int, devices_per_proc: int | None) -> dict:
    env = dict(base)
    env.update(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_COORDINATOR_BIND_ADDRESS=f"127.0.0.1:{port}",
               JAX_NUM_PROCESSES=str(n), JAX_PROCESS_ID=str(i), PYTHONUNBUFFERED="1")
    if devices_per_proc:
        if env.get("JAX_PLATFORMS", "").startswith("cpu") or not _has_gpu():
            flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
            env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices_per_proc}"])
        else:
            first = i * devices_per_proc
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in range(first, first + devices_per_proc))
    return env


def _has_gpu() -> bool:
    return os.path.exists("/dev/nvidia0")


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


def _forward(i: int, stream, out) -> None:
    for line in iter(stream.readline, b""):
        out.write(f"[{i}] " + line.decode(errors="replace"))
        out.flush()


def launch(nproc: int, command: list[str], devices_per_proc: int | None = None, port: int | None = None,
           grace: float = 5.0, out=None, stop_timeout: float = 120.0) -> int:
    """Run `python -m command...` as nproc processes; returns 0 or the first failure's status (>= 1)."""
    out = out or sys.stdout
    port = port or free_port()
    procs = [subprocess.Popen([sys.executable, "-m", *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env=child_env(os.environ, i, nproc, port, devices_per_proc), start_new_session=True,
                              preexec_fn=_die_with_parent) for i in range(nproc)]
    threads = [threading.Thread(target=_forward, args=(i, p.stdout, out), daemon=True) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    failed = None
    old_term = None
    if threading.current_thread() is threading.main_thread():  # SIGTERM to the launcher stops its processes too
        old_term = signal.signal(signal.SIGTERM, _terminated)
    try:
        while any(p.poll() is None for p in procs):
            for i, p in enumerate(procs):
                if failed is None and p.poll() not in (None, 0):
                    failed = (i, p.returncode)
            if failed is not None:
                break
            time.sleep(0.1)
        for i, p in enumerate(procs):  # the last one to exit may have failed too
            if failed is None and p.poll() not in (None, 0):
                failed = (i, p.returncode)
    except KeyboardInterrupt:
        failed = failed or (-1, 130)
    except _Terminated:
        failed = failed or (-2, 143)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    if failed is not None:  # a stop request (the launcher's, or a process's own 143/130) lets them commit
        _stop(procs, stop_timeout if failed[1] in (130, 143) else grace)
    for t in threads:
        t.join(timeout=2)
    if failed is None:
        return 0
    i, rc = failed
    if i < 0:  # the launcher's own stop request: what its processes did with it is the status
        codes = [p.returncode for p in procs]
        why = "was interrupted" if i == -1 else "was terminated (SIGTERM)"
        if all(c == 0 for c in codes):
            print(f"memjax.launch: the launcher {why}; its processes had finished (exit 0 each)", file=sys.stderr,
                  flush=True)
            return 0
        print(f"memjax.launch: the launcher {why}; its processes " +
              ", ".join(f"{k} {_describe(c)}" for k, c in enumerate(codes)), file=sys.stderr, flush=True)
        first = next(c for c in codes if c != 0)
        return first if first > 0 else 128 - first
    print(f"memjax.launch: process {i} of {nproc} {_describe(rc)}; stopped the other processes", file=sys.stderr,
          flush=True)
    return rc if rc > 0 else 1


def _die_with_parent() -> None:
    """In a child before exec (Linux): SIGTERM when the launcher dies, even by SIGKILL, so that no process of a
    killed launch lives on; a SIGTERM is a stop request (a checkpoint or the finished batches are kept)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _Terminated(Exception):
    pass


def _terminated(signum, frame):
    raise _Terminated


def _stop(procs, grace: float) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.launch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, required=True, help="processes to start on this machine")
    ap.add_argument("--devices-per-proc", type=int, default=None,
                    help="devices each process sees (CPU: forced host devices; GPU: consecutive CUDA devices)")
    ap.add_argument("--port", type=int, default=None, help="coordinator port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL of the others "
                    "when one failed")
    ap.add_argument("--stop-timeout", type=float, default=120.0, help="on SIGTERM / Ctrl-C (or a process exiting "
                    "143 / 130): seconds the processes get to reach a step boundary and commit a checkpoint")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- <module> <args>")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.nproc < 1:
        ap.error(f"--nproc must be >= 1, got {args.nproc}")
    if args.devices_per_proc is not None and args.devices_per_proc < 1:
        ap.error(f"--devices-per-proc must be >= 1, got {args.devices_per_proc}")
    if not cmd:
        ap.error("give the module to run after --, e.g. -- memjax.train configs/tiny.py")
    import importlib.util

    try:
        found = importlib.util.find_spec(cmd[0]) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        ap.error(f"no module named {cmd[0]!r}: after -- comes a module that python -m runs and its arguments, e.g. "
                 "-- memjax.train configs/tiny.py")
    return launch(args.nproc, cmd, args.devices_per_proc, args.port, args.grace, stop_timeout=args.stop_timeout)


if __name__ == "__main__":
    sys.exit(main())
