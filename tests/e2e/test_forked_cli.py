"""tests/forked_cli.py (the docs-commands test's runner) gives what a fresh `python -m` process gives: the same exit
code and the same last line of output, for a memjax CLI refusing a config key, a standard-library CLI failing and a
module that does not exist (whose message differs only in who prints it: runpy's traceback here); the commands'
output files are removed once `run_all` returns."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.forked_cli import ForkedCLI
import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_forked_commands_exit_and_print_as_fresh_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where run_all puts its output files
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
    cmds = [[sys.executable, "-m", "memjax.train", "configs/tiny.py", "--set", "bogus=1"],
            [sys.executable, "-m", "json.tool", "/nonexistent/file.json"],
            [sys.executable, "-m", "no_such_module_here"]]
    forked = ForkedCLI(env, REPO).run_all(cmds, jobs=2)
    assert not list(tmp_path.glob("forked-cli-*"))
    for argv, (rc, out, _) in zip(cmds, forked):
        p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert rc == p.returncode != 0, (argv, rc, p.returncode)
        last = (p.stdout + p.stderr).strip().splitlines()[-1]
        if "no_such_module_here" in argv:
            assert "No module named no_such_module_here" in last and "No module named no_such_module_here" in out
        else:
            assert out.strip().splitlines()[-1] == last, (argv, out[-300:], last)
