"""tests/forked_cli.py (the docs-commands test's runner) gives what a fresh `python -m` process gives: the same exit
code and the same last line of output, for a memjax CLI refusing a config key, a standard-library CLI failing and a
module that does not exist (whose message differs only in who prints it: runpy's traceback here); the commands'
output files are removed once `run_all` returns; a command started alone takes signals and ends as a fresh process,
in its own session; a server imports with the environment it was started with."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.forked_cli import ForkedCLI

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_forked_commands_exit_and_print_as_fresh_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where run_all puts its output files
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
    cmds = [[sys.executable, "-m", "memjax.train", "configs/tiny.py", "--set", "bogus=1"],
            [sys.executable, "-m", "json.tool", "/nonexistent/file.json"],
            [sys.executable, "-m", "no_such_module_here"]]
    with ForkedCLI(env, REPO) as cli:
        forked = cli.run_all(cmds, jobs=2)
    assert not list(tmp_path.glob("forked-cli-*"))
    for argv, (rc, out, _) in zip(cmds, forked):
        p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert rc == p.returncode != 0, (argv, rc, p.returncode)
        last = (p.stdout + p.stderr).strip().splitlines()[-1]
        if "no_such_module_here" in argv:
            assert "No module named no_such_module_here" in last and "No module named no_such_module_here" in out
        else:
            assert out.strip().splitlines()[-1] == last, (argv, out[-300:], last)


def test_a_forked_command_is_signalled_and_exits_as_a_fresh_process(tmp_path):
    """start() gives Popen's surface: a command in its own session, sent SIGINT while it sleeps in Python, ends as
    the interpreter ends on an unhandled Ctrl-C (killed by SIGINT, traceback printed), as a fresh process does."""
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
    # Ctrl-C as the interpreter sets it up when its parent does not ignore SIGINT: a shell's `&` job without job
    # control ignores it, and children inherit that (a fresh process would then sleep through the signal too)
    (tmp_path / "sleeper.py").write_text("import signal, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)"
                                         "\nprint('ready', flush=True)\ntime.sleep(60)\n")
    argv = [sys.executable, "-m", "sleeper"]
    with ForkedCLI(env, tmp_path) as cli:
        forked = cli.start(argv, tmp_path / "forked.txt", new_session=True)
        fresh = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        assert fresh.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 120
        while "ready" not in (tmp_path / "forked.txt").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.getsid(forked.pid) == forked.pid  # its own session, so killpg reaches its children too
        for p in (forked, fresh):
            p.send_signal(signal.SIGINT)
        assert forked.wait(60) == fresh.wait(60) == -signal.SIGINT
        assert "KeyboardInterrupt" in (tmp_path / "forked.txt").read_text()


def test_the_server_imports_with_the_environment_it_was_started_with(tmp_path):
    """A second ForkedCLI with other import-time variables gets a server started with them (the preloaded jax read
    JAX_ENABLE_X64 at import); a command may change only what is read at run time, anything else is refused."""
    (tmp_path / "x64.py").write_text("import os, jax\nprint(jax.config.jax_enable_x64, os.environ['JAX_PROCESS_ID'])\n")
    argv = [sys.executable, "-m", "x64"]
    seen = []
    for x64 in ("0", "1"):
        env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu", JAX_ENABLE_X64=x64, JAX_PROCESS_ID="0")
        with ForkedCLI(env, tmp_path) as cli:
            p = cli.start(argv, tmp_path / f"{x64}.txt", env=dict(env, JAX_PROCESS_ID="3"))
            assert p.wait(120) == 0
            seen.append((tmp_path / f"{x64}.txt").read_text().split())
            with pytest.raises(ValueError, match="JAX_ENABLE_X64 differ"):
                cli.start(argv, tmp_path / "refused.txt", env=dict(env, JAX_ENABLE_X64="1" if x64 == "0" else "0"))
    assert seen == [["False", "3"], ["True", "3"]]
