"""RunCheckpoints (issue 23, item 1): a corrupt checkpoint is moved aside, not deleted, and the run can save
the steps it retrains; a save orbax declines is an error; every save is verified."""

import shutil

import numpy as np
import orbax.checkpoint as ocp
import pytest

from memjax.checkpoint import CheckpointError
from memjax.checkpoint.run_checkpoints import RunCheckpoints, one_line


def _args(step):
    return ocp.args.Composite(state=ocp.args.StandardSave({"w": np.full(4, float(step), np.float32)}),
                              meta=ocp.args.JsonSave({"step": step}))


def _restore(mgr, step):
    got = mgr.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore({"w": np.zeros(4, np.float32)}), meta=ocp.args.JsonRestore()))
    assert got["meta"]["step"] == step and got["state"]["w"][0] == step


def test_corrupt_latest_is_quarantined_and_the_run_keeps_saving(tmp_path):
    warnings = []
    ck = RunCheckpoints(tmp_path / "checkpoints", keep=2, warn=warnings.append)
    for s in (1, 2):
        ck.save(s, _args(s))
    ck.close()
    shutil.rmtree(tmp_path / "checkpoints" / "2" / "state" / "d")  # the array data of the newest step
    ck = RunCheckpoints(tmp_path / "checkpoints", keep=2, warn=warnings.append)
    assert ck.restore_latest(_restore) == 1
    assert len(warnings) == 1 and "checkpoint 2" in warnings[0] and "moved to" in warnings[0]
    assert (tmp_path / "checkpoints_corrupt" / "2" / "meta").is_dir()  # kept for inspection, not deleted
    ck.save(2, _args(2))  # orbax used to refuse a step at or below the corrupt one, silently
    ck.save(3, _args(3))
    ck.close()
    assert ck.all_steps() == [2, 3]  # retention (keep=2) removed good step 1 only after 2 and 3 were verified
    ck = RunCheckpoints(tmp_path / "checkpoints", keep=2)
    assert ck.restore_latest(_restore) == 3


def test_every_checkpoint_corrupt_starts_over_and_saves(tmp_path):
    ck = RunCheckpoints(tmp_path / "c", keep=3, warn=lambda m: None)
    ck.save(1, _args(1))
    ck.save(2, _args(2))
    ck.close()
    for s in (1, 2):
        shutil.rmtree(tmp_path / "c" / str(s) / "state" / "d")
    ck = RunCheckpoints(tmp_path / "c", keep=3, warn=lambda m: None)
    assert ck.restore_latest(_restore) is None and ck.all_steps() == []
    ck.save(1, _args(1))
    ck.close()
    assert ck.all_steps() == [1] and sorted(p.name for p in (tmp_path / "c_corrupt").iterdir()) == ["1", "2"]


def test_declined_save_is_an_error(tmp_path):
    ck = RunCheckpoints(tmp_path / "c", keep=2)
    ck.save(5, _args(5))
    with pytest.raises(CheckpointError, match="declined to save step 3"):
        ck.save(3, _args(3))
    ck.close()
    with pytest.raises(ValueError, match="keep_checkpoints must be >= 1"):
        RunCheckpoints(tmp_path / "d", keep=0)


def test_failed_write_is_one_line(tmp_path, monkeypatch):
    ck = RunCheckpoints(tmp_path / "c", keep=2)

    def full(*a, **k):
        raise OSError(28, "No space left on device\n" + "asyncio traceback line\n" * 400)

    monkeypatch.setattr(ck.mgr, "wait_until_finished", full)
    with pytest.raises(CheckpointError) as e:
        ck.finish()
    assert "No space left on device" in str(e.value) and "\n" not in str(e.value)
    assert one_line(ValueError("a\nb")) == "ValueError: a..."


def test_another_models_checkpoint_is_a_config_error_not_corruption(tmp_path):
    from memjax.core.config import ConfigError

    ck = RunCheckpoints(tmp_path / "c", keep=2)
    ck.save(1, _args(1))
    ck.close()

    def other_model(mgr, step):
        raise ConfigError("checkpoint 1 is of another model")

    with pytest.raises(ConfigError, match="another model"):
        RunCheckpoints(tmp_path / "c", keep=2).restore_latest(other_model)
    assert (tmp_path / "c" / "1").is_dir() and not (tmp_path / "c_corrupt").exists()


@pytest.mark.e2e
def test_disk_full_is_one_error_line_not_pages_of_tracebacks(tmp_path):
    """A full disk, simulated with a file-size limit (writes fail with EFBIG): one CheckpointError and a
    few one-line orbax log records (it was ~300 lines of asyncio tracebacks)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import resource, signal
        import numpy as np, orbax.checkpoint as ocp
        from memjax.checkpoint.run_checkpoints import RunCheckpoints
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        ck = RunCheckpoints({str(tmp_path / "c")!r}, keep=2)
        w = np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32)
        ck.save(1, ocp.args.Composite(state=ocp.args.StandardSave({{"w": w}}), meta=ocp.args.JsonSave({{"step": 1}})))
        ck.finish()
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("memjax.checkpoint.errors.CheckpointError: ") and "writing checkpoint 1 failed" in last
    assert "File too large" in p.stderr or "Failed writing" in p.stderr
    assert len(p.stderr.splitlines()) < 30, p.stderr[:3000]
    assert not (tmp_path / "c" / "1").exists()  # no half-written step that looks committed


@pytest.mark.e2e
def test_repeated_kill9_at_random_points_never_goes_back(tmp_path):
    """kill -9 at random points of saving, twice in a row (a 6-round run of the same loop passed too): every restart resumes from a step that
    restores exactly, never earlier than the previous restart, and nothing is quarantined."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    child = Path(__file__).with_name("kill9_child.py")
    rng, last = random.Random(0), 0
    for _ in range(2):
        p = subprocess.Popen([sys.executable, str(child), str(tmp_path / "c")], stdout=subprocess.PIPE, text=True)
        lines, target = [], rng.randint(2, 5)
        for line in p.stdout:
            lines.append(line.split())
            if sum(x[0] == "SAVING" for x in lines) >= target:
                time.sleep(rng.random() * 0.3)  # somewhere inside the asynchronous write of the next step
                os.kill(p.pid, signal.SIGKILL)
                break
        p.wait()
        starts = [int(x[1]) for x in lines if x[0] == "START"]
        assert starts and starts[0] >= last and not any(x[0] == "WARN" for x in lines), lines
        assert any(x[0] == "SAVING" for x in lines)
        last = starts[0]
    assert last >= 1 and not (tmp_path / "c_corrupt").exists()
