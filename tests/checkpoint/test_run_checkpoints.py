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
