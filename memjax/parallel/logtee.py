"""The native log of one process of a multi-process run goes to a file; the console gets one line when it dies.

Owns `start(process, count, out_dir, heartbeat)`: file descriptors 1 and 2 of this process (where XLA, gloo and the
coordination service write their C++ logs) become a pipe to a small helper process (this file run as a script,
no jax, no memjax imports), and Python's `sys.stdout` / `sys.stderr` stay on the console. The helper appends
every line to `<out_dir>/logs/process_<i>.log` (created at the first line) and, when the stream ends after the
coordination service's fatal report ("Terminating process because the JAX distributed service detected fatal errors"),
prints one line: `memjax: process 1 of 2 stopped (killed by a signal or lost); process 0 stops; resume from
<out_dir>/checkpoints/N` (N the newest step directory then, or "no checkpoint yet"), and where the full log is; a
live process that the coordinator declared lost (its heartbeat unheard for MEMJAX_HEARTBEAT_S) says that instead.
MEMJAX_NATIVE_LOGS=1 also copies every native line to the console (collective-library chatter included).
Invariants: the helper ignores SIGINT/SIGTERM (it ends when the process it serves has closed the pipe, so no
line is lost); it is only started with several processes; a log file it cannot write falls back to the console.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

FATAL = "Terminating process because the JAX distributed service detected fatal errors"
VERBOSE_ENV = "MEMJAX_NATIVE_LOGS"


def start(process: int, count: int, out_dir: str, heartbeat: int) -> str:
    """Send fds 1 and 2 through the helper (Python's sys.stdout / sys.stderr stay on the console); returns the
    log file's path. (gloo writes its connection lines to stdout, XLA and the coordination service to stderr.)"""
    log = os.path.join(os.path.abspath(out_dir), "logs", f"process_{process}.log")
    sys.stdout.flush()
    sys.stderr.flush()
    console_out, console_err = os.dup(1), os.dup(2)
    r, w = os.pipe()
    subprocess.Popen([sys.executable, "-S", os.path.abspath(__file__), str(process), str(count),
                      os.path.abspath(out_dir), log, os.environ.get(VERBOSE_ENV, "0"), str(heartbeat)],
                     stdin=r, stdout=console_err, stderr=console_err, close_fds=True, start_new_session=True)
    os.close(r)
    os.dup2(w, 1)
    os.dup2(w, 2)
    os.close(w)
    sys.stdout = open(console_out, "w", buffering=1, errors="replace", closefd=True)
    sys.stderr = open(console_err, "w", buffering=1, errors="replace", closefd=True)
    return log


def newest_checkpoint(out_dir: str) -> str:
    d = os.path.join(out_dir, "checkpoints")
    try:
        steps = sorted(int(n) for n in os.listdir(d) if n.isdigit())
    except OSError:
        steps = []
    return os.path.join(d, str(steps[-1])) if steps else "no checkpoint yet (start again from the beginning)"


def verdict(lines: list[str], process: int, count: int, heartbeat: int) -> str | None:
    """The one console line for the native log's last lines, or None when they hold no fatal report. A process
    that reads its own number among the unhealthy tasks is alive: its heartbeat (`heartbeat` s) went unheard."""
    text = "\n".join(lines)
    if FATAL not in text:
        return None
    if "RegisterTask" in text:  # refused while joining: nothing ran, nothing to resume
        return (f"process {process} of {count} could not join the coordinator (another process already joined as "
                f"process {process}?): give every process its own JAX_PROCESS_ID")
    m = re.search(r"tasks are unhealthy[^\n]*:\s*\n\s*([0-9][0-9, ]*)", text)
    if m:
        dead = [int(x) for x in re.findall(r"\d+", m.group(1))]
        if process in dead:
            return (f"this process ({process} of {count}) was declared lost: the coordinator heard no heartbeat "
                    f"from it for {heartbeat} s (a starved or paused process; MEMJAX_HEARTBEAT_S sets the bound)")
        who = ", ".join(str(d) for d in dead)
        return f"process {who} of {count} stopped (killed by a signal or lost); this process ({process}) stops"
    if process != 0 and re.search(r"heartbeat|UNAVAILABLE|Connection refused|Socket closed", text):
        return f"process 0 of {count} (the coordinator) stopped or cannot be reached; this process ({process}) stops"
    fatal = next((ln for ln in lines if FATAL in ln), "")
    return f"this process ({process} of {count}) stops: {fatal.split('] ', 1)[-1][:200]}"


def _serve(process: int, count: int, out_dir: str, log: str, verbose: bool, heartbeat: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    f = None
    tail: list[str] = []
    for raw in sys.stdin.buffer:
        line = raw.decode(errors="replace")
        if f is None:
            try:
                os.makedirs(os.path.dirname(log), exist_ok=True)
                f = open(log, "a", buffering=1)
            except OSError:
                f, verbose = sys.stdout, True
        f.write(line)
        if verbose and f is not sys.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
        tail = (tail + [line.rstrip("\n")])[-80:]
    said = verdict(tail, process, count, heartbeat)
    if said:
        resume = "" if "could not join" in said else f"; resume from {newest_checkpoint(out_dir)}"
        sys.stdout.write(f"memjax: {said}{resume}; native log: {log}\n")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """The tee child (started by `start` with the process's native stderr on its stdin; no memjax import: -S)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m memjax.parallel.logtee",
                                 description="copy a process's native log to a file; at its end print one memjax line")
    ap.add_argument("process", type=int)
    ap.add_argument("count", type=int)
    ap.add_argument("out_dir")
    ap.add_argument("log")
    ap.add_argument("verbose", help="1: also copy the native log to the console (MEMJAX_NATIVE_LOGS)")
    ap.add_argument("heartbeat", type=int, help="the coordination heartbeat in seconds (MEMJAX_HEARTBEAT_S)")
    a = ap.parse_args(argv)
    _serve(a.process, a.count, a.out_dir, a.log, a.verbose == "1", a.heartbeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
