"""`python -m MODULE ARGS` commands, each in its own process, without paying for jax's import every time.

`ForkedCLI` owns a multiprocessing forkserver that has imported the third-party libraries every memjax CLI imports
(`PRELOAD`: jax, flax, optax, orbax, numpy, rich, yaml; about 3 CPU-s of a tiny training process's 16). `start`
forks that server and runs one command there as `python -m` does: runpy with run_name "__main__" and the command's
sys.argv, the working directory first on sys.path, the command's environment, fds 1 and 2 sent to one file (so the
command's own children write there too), atexit handlers and non-daemon threads finished before the exit code is
returned; `run_all` runs a list of them. memjax itself is imported by each command, as in a fresh interpreter.
A command's environment may differ from the server's only where no preloaded library reads it at import (the
distributed JAX_* variables, XLA_FLAGS, MEMJAX_*, ...); anything else is refused. The server never starts a JAX
backend: each command starts its own. `close` stops the server, which reaps its children, so their CPU time is
the caller's (tests/cpu_time.py). One server per process (multiprocessing's): a new ForkedCLI stops an older one.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import runpy
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

PRELOAD = ["jax", "flax.nnx", "optax", "orbax.checkpoint", "numpy", "rich.console", "yaml"]
# read when a command runs, not when the preloaded libraries import (jax.distributed.initialize reads these)
RUNTIME_JAX = {"JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_LOCAL_DEVICE_IDS"}
# multiprocessing's Process objects poll their children from `start` too: two threads reading one child's exit
# code race for it, so every start and poll of this module goes through one lock
_LOCK = threading.Lock()
_SERVER: dict = {}  # the environment the running server started with


def _read_at_import(key: str) -> bool:
    return (key.startswith(("JAX_", "PYTHON", "LD_")) and key not in RUNTIME_JAX) or key == "TF_CPP_MIN_LOG_LEVEL"


def _check_argv(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "-m" or not Path(argv[0]).name.startswith("python"):
        raise ValueError(f"ForkedCLI runs `python -m MODULE ...` commands only, not {argv}")


def _command(module: str, args: list[str], env: dict, cwd: str, out: str, new_session: bool) -> None:
    """The forked child: `python -m module args` with env and cwd, its fds 1 and 2 on `out`."""
    if new_session:
        os.setsid()  # its own process group, as Popen(start_new_session=True): killpg reaches its children too
    fd = os.open(out, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (the process's own streams)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.path.insert(0, cwd)
    sys.argv = [module, *args]
    code, interrupted = 0, False
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # the interpreter's own end of an unhandled Ctrl-C: killed by SIGINT, below
        traceback.print_exc()
        interrupted = True
    except BaseException:  # what the interpreter prints for an uncaught exception, and its exit code
        traceback.print_exc()
        code = 1
    threading._shutdown()  # the interpreter's own exit: wait for non-daemon threads, then run atexit
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(code)


class Forked:
    """One forked command, with Popen's surface: `pid`, `poll()`, `send_signal()`, `returncode`."""

    def __init__(self, process):
        self._p = process
        self.pid, self.sentinel = process.pid, process.sentinel

    @property
    def returncode(self) -> int | None:
        with _LOCK:
            return self._p.exitcode

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int | None:
        multiprocessing.connection.wait([self.sentinel], timeout)
        return self.returncode


class ForkedCLI:
    """Start with the environment the commands will share (JAX_*, XLA_FLAGS, PYTHONPATH); `close` when done, or
    use it in a `with` block."""

    def __init__(self, env: dict, cwd: Path):
        self.env, self.cwd = dict(env), str(cwd)
        self._ctx = multiprocessing.get_context("forkserver")
        with _LOCK:
            if _SERVER.get("env") != self.env:  # a server started with other variables would import with them
                multiprocessing.forkserver._forkserver._stop()
            self._ctx.set_forkserver_preload(PRELOAD)
            saved = dict(os.environ)
            try:  # the server (and so the preloaded libraries) starts with the commands' environment
                os.environ.clear()
                os.environ.update(self.env)
                multiprocessing.forkserver.ensure_running()
            finally:
                os.environ.clear()
                os.environ.update(saved)
            _SERVER["env"] = self.env

    def start(self, argv: list[str], out: str | Path, *, env: dict | None = None,
              new_session: bool = False) -> Forked:
        """`python -m MODULE ARGS` (argv[0] any python) with `env` (the server's by default), its output in `out`."""
        _check_argv(argv)
        env = self.env if env is None else env
        differ = sorted(k for k in set(env) | set(self.env) if _read_at_import(k) and env.get(k) != self.env.get(k))
        if differ:
            raise ValueError(f"ForkedCLI: {', '.join(differ)} differ from the server's environment, and the "
                             "preloaded libraries read them at import; start another ForkedCLI with them")
        Path(out).write_bytes(b"")  # there, empty, from the start (as Popen's stdout file): a reader may look at once
        p = self._ctx.Process(target=_command, args=(argv[2], argv[3:], env, self.cwd, str(out), new_session))
        with _LOCK:
            p.start()
        return Forked(p)

    def run_all(self, argvs: list[list[str]], *, jobs: int = 4, timeout: float = 600) -> list[tuple[int, str, float]]:
        """[(exit code, stdout + stderr, seconds)] of each `python -m MODULE ARGS`, `jobs` at a time; a command
        still running after `timeout` seconds is killed (exit code -9)."""
        for argv in argvs:  # every command checked before any starts
            _check_argv(argv)
        with tempfile.TemporaryDirectory(prefix="forked-cli-") as outs:  # the commands' output files, removed after
            results: list = [None] * len(argvs)
            todo, running = list(range(len(argvs)))[::-1], {}
            while todo or running:
                while todo and len(running) < jobs:
                    i = todo.pop()
                    out = os.path.join(outs, f"{i}.out")
                    p = self.start(argvs[i], out)
                    running[p.sentinel] = (i, p, out, time.monotonic())
                multiprocessing.connection.wait(list(running), timeout=1.0)
                for sentinel, (i, p, out, t0) in list(running.items()):
                    if p.poll() is None and time.monotonic() - t0 < timeout:
                        continue
                    if p.poll() is None:
                        p.send_signal(signal.SIGKILL)
                        p.wait()
                    del running[sentinel]
                    text = Path(out).read_text(errors="replace") if os.path.exists(out) else ""
                    results[i] = (p.returncode, text, time.monotonic() - t0)
            return results

    def __enter__(self) -> ForkedCLI:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server; it reaps the commands that ended, so their CPU time counts as this process's children's."""
        with _LOCK:
            if _SERVER.get("env") == self.env:
                multiprocessing.forkserver._forkserver._stop()
                _SERVER.clear()
