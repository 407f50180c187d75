"""Documented `python -m MODULE ARGS` commands, each in its own process, without paying for jax's import every time.

`ForkedCLI` owns a multiprocessing forkserver that has imported the third-party libraries every memjax CLI imports
(`PRELOAD`: jax, flax, optax, numpy, rich, yaml; about 0.7 CPU-s of a command's 1.1 when it starts cold). `run_all`
forks that server once per command and runs the command there as `python -m` does: runpy with run_name "__main__"
and the command's sys.argv, the working directory first on sys.path, the command's environment, fds 1 and 2 sent to
one file (so the command's own children write there too), atexit handlers and non-daemon threads finished before the
exit code is returned. memjax itself is imported by each command, as in a fresh interpreter. Every command gets the
environment the server started with (the preloaded libraries read JAX_* variables when imported); `run_all` refuses
anything but `python -m ...`. The server never starts a JAX backend: each command starts its own.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import runpy
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

PRELOAD = ["jax", "flax.nnx", "optax", "numpy", "rich.console", "yaml"]


def _command(module: str, args: list[str], env: dict, cwd: str, out: str) -> None:
    """The forked child: `python -m module args` with env and cwd, its fds 1 and 2 on `out`."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # what the interpreter prints for an uncaught exception, and its exit code
        traceback.print_exc()
        code = 1
    threading._shutdown()  # the interpreter's own exit: wait for non-daemon threads, then run atexit
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


class ForkedCLI:
    """Start with the environment the commands will share (JAX_*, XLA_FLAGS); call `run_all` from one thread
    (multiprocessing's Process objects poll their children from `start` too: two threads reading one child's exit
    code race for it)."""

    def __init__(self, env: dict, cwd: Path):
        self.env, self.cwd = dict(env), str(cwd)
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)
        saved = dict(os.environ)
        try:  # the server (and so the preloaded libraries) starts with the commands' environment
            os.environ.clear()
            os.environ.update(self.env)
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def run_all(self, argvs: list[list[str]], *, jobs: int = 4, timeout: float = 600) -> list[tuple[int, str, float]]:
        """[(exit code, stdout + stderr, seconds)] of each `python -m MODULE ARGS` (argv[0] any python), `jobs` at a
        time; a command still running after `timeout` seconds is killed (exit code -9)."""
        for argv in argvs:
            if len(argv) < 3 or argv[1] != "-m" or not Path(argv[0]).name.startswith("python"):
                raise ValueError(f"ForkedCLI runs `python -m MODULE ...` commands only, not {argv}")
        with tempfile.TemporaryDirectory(prefix="forked-cli-") as outs:  # the commands' output files, removed after
            return self._run_all(argvs, jobs, timeout, outs)

    def _run_all(self, argvs: list[list[str]], jobs: int, timeout: float, outs: str) -> list[tuple[int, str, float]]:
        results: list = [None] * len(argvs)
        todo, running = list(range(len(argvs)))[::-1], {}
        while todo or running:
            while todo and len(running) < jobs:
                i = todo.pop()
                out = os.path.join(outs, f"{i}.out")
                p = self._ctx.Process(target=_command, args=(argvs[i][2], argvs[i][3:], self.env, self.cwd, out))
                p.start()
                running[p.sentinel] = (i, p, out, time.monotonic())
            multiprocessing.connection.wait(list(running), timeout=1.0)
            for sentinel, (i, p, out, t0) in list(running.items()):
                if p.is_alive() and time.monotonic() - t0 < timeout:
                    continue
                if p.is_alive():
                    p.kill()
                p.join()
                del running[sentinel]
                text = Path(out).read_text(errors="replace") if os.path.exists(out) else ""
                results[i] = (p.exitcode, text, time.monotonic() - t0)
        return results
