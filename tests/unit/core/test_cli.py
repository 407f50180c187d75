"""memjax.core.cli: how a program ends. SIGTERM unwinds through `finally` blocks and exits 143 with one line; bad
input (memjax's ValueError, a malformed JSON file) is one line and exit 2, a library's ValueError a traceback and
exit 1; `--help` into a closed pipe is quiet (141); the garbage collector's thresholds are raised while a program
runs and restored after."""

import json
import os

import pytest

from memjax.core.outdir import JsonlLog


def test_sigterm_unwinds_and_exits_with_one_line(tmp_path, capsys):
    import signal

    from memjax.core.cli import run_cli

    log = JsonlLog(tmp_path / "results.jsonl")

    def body(cfg):
        try:
            log.write({"step": 1})
            os.kill(os.getpid(), signal.SIGTERM)  # e.g. a scheduler ending the job during an evaluation
            log.write({"step": 2})  # never reached
        finally:
            log.write({"closed": True})  # what Run.close / OutDirLock do on the way out

    from memjax.cli.evaluate import EvalConfig

    assert run_cli("python -m memjax.evaluate", "", [], EvalConfig(), body) == 143
    assert capsys.readouterr().err.strip() == "memjax.evaluate: terminated (SIGTERM); finished results and checkpoints are kept"
    assert [json.loads(x) for x in log.path.read_text().splitlines()] == [{"step": 1}, {"closed": True}]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_run_cli_collects_garbage_less_often_and_restores_the_collector():
    """While a CLI runs, the collector's thresholds are raised (cycles are still collected); on return, normal or
    not, they are as before."""
    import gc

    from memjax.cli.evaluate import EvalConfig
    from memjax.core.cli import run_cli
    from memjax.core.config import ConfigError

    before = gc.get_threshold()
    seen = {}

    def body(cfg):
        seen["threshold"] = gc.get_threshold()
        a = []
        a.append(a)  # a cycle: still collected
        del a
        seen["collected"] = gc.collect()

    assert run_cli("python -m memjax.evaluate", "", [], EvalConfig(), body) == 0
    assert seen["threshold"] == (10_000, 50, 100) and seen["collected"] >= 1, seen
    assert gc.get_threshold() == before

    def failing(cfg):
        raise ConfigError("bad")

    assert run_cli("python -m memjax.evaluate", "", [], EvalConfig(), failing) == 2
    assert gc.get_threshold() == before


def test_a_value_error_of_memjax_is_bad_input_and_one_of_a_library_is_a_bug_with_its_traceback(capsys):
    """memjax's own checks raise ValueError on bad input, and so does the standard library's json on a malformed
    file: one line, exit 2. A ValueError raised inside jax or numpy under memjax is a bug: it is not dressed as bad
    input, its traceback is printed and the exit code is 1."""
    import json

    import jax
    import jax.numpy as jnp
    import numpy as np

    from memjax.cli.evaluate import EvalConfig
    from memjax.core.cli import run_cli
    from memjax.data.length import fit_units

    def own(cfg):
        fit_units(str, len, 0, lo=1)

    assert run_cli("python -m memjax.evaluate", "", [], EvalConfig(), own) == 2
    assert capsys.readouterr().err == "memjax.evaluate: error: fit_units: target must be >= 1 token, got 0\n"
    assert run_cli("python -m memjax.evaluate", "", [], EvalConfig(), lambda cfg: json.loads("{")) == 2
    assert capsys.readouterr().err.startswith("memjax.evaluate: error: Expecting property name")
    # memjax installed into site-packages (not editable): its own checks stay bad input
    installed = compile("def check(cfg):\n    raise ValueError('bad field')\n",
                        "/venv/lib/python3.12/site-packages/memjax/fake.py", "exec")
    scope = {"__name__": "memjax.fake"}
    exec(installed, scope)  # noqa: S102  (a module of memjax as an installed copy would hold it)
    assert run_cli("python -m memjax.evaluate", "", [], EvalConfig(), scope["check"]) == 2
    assert capsys.readouterr().err == "memjax.evaluate: error: bad field\n"
    split = jax.jit(lambda x: jnp.split(x, 2))  # jax removes its frames from a jitted function's traceback
    for bug in (lambda cfg: jnp.split(jnp.ones(3), 2), lambda cfg: split(jnp.ones(3)),
                lambda cfg: np.split(np.ones(3), 2)):
        assert run_cli("python -m memjax.evaluate", "", [], EvalConfig(), bug) == 1
        err = capsys.readouterr().err
        assert err.startswith("Traceback (most recent call last):") and "split" in err, err
        assert err.splitlines()[-1] == "memjax.evaluate: internal error: ValueError raised inside a library " \
            "(traceback above)", err


@pytest.mark.e2e
def test_help_into_a_closed_pipe_is_quiet_and_other_broken_pipes_are_one_line(capsys):
    """`python -m memjax.train --help | head -1`: the reader leaves early; exit 141 (as a Unix tool killed by SIGPIPE)
    and nothing on stderr. A broken pipe that is not stdout's (a judge's connection) stays one line, exit 1."""
    import subprocess
    import sys

    from memjax.cli.evaluate import EvalConfig
    from memjax.core.cli import run_cli

    read, write = os.pipe()
    os.close(read)  # the reader has gone before the help is written (`head` after its line; no race)
    p = subprocess.run([sys.executable, "-m", "memjax.train", "--help"], stdout=write, stderr=subprocess.PIPE,
                       text=True, timeout=120)
    os.close(write)
    assert p.returncode == 141 and p.stderr == "", (p.returncode, p.stderr)

    def body(cfg):
        raise BrokenPipeError(32, "Broken pipe")

    assert run_cli("python -m memjax.evaluate", "", [], EvalConfig(), body) == 1
    assert capsys.readouterr().err.strip() == "memjax.evaluate: error: [Errno 32] Broken pipe"
