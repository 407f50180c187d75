"""StageBest (issue 22, item 5): per-stage best selection on a scripted metric, the stored weights of each best,
and the store kept in line with the train-state checkpoints (prune after supersession, reconcile on resume)."""

import math

import numpy as np
import pytest

from memjax.checkpoint import CheckpointError
from memjax.checkpoint.stage_best import StageBest
from memjax.core.config import ConfigError


def _w(step):
    return {"layer": {"w": np.full(3, float(step), np.float32)}}


def _feed(best, script, stage_of, ends):
    """Evaluate after every step of `script` (step -> metric value); returns the steps that became a best."""
    won = []
    for step, v in script.items():
        if best.consider(stage_of(step), step, {"step": step, "score": v}, lambda s=step: _w(s),
                         stage_end=step in ends):
            won.append(step)
    return won


def test_best_per_stage_ties_nan_and_mode(tmp_path):
    # stage 0 = steps 1-4, stage 1 = steps 5-7, stage 2 = steps 8-9 (all NaN)
    script = {1: 0.2, 2: 0.7, 3: 0.7, 4: 0.5, 5: math.nan, 6: 0.1, 7: 0.3, 8: math.nan, 9: math.nan}
    stage_of = lambda s: 0 if s <= 4 else 1 if s <= 7 else 2  # noqa: E731
    best = StageBest(tmp_path / "b", "score", "max")
    assert _feed(best, script, stage_of, ends={4, 7, 9}) == [1, 2, 6, 7, 9]
    assert best.entries == {0: {"step": 2, "value": 0.7}, 1: {"step": 7, "value": 0.3},  # tie 2/3: earlier
                            2: {"step": 9, "value": None}}  # no finite value: the stage-end weights
    like = _w(0)
    for stage, step in ((0, 2), (1, 7), (2, 9)):
        np.testing.assert_array_equal(best.restore(stage, like)["layer"]["w"], _w(step)["layer"]["w"])
    best.close()

    low = StageBest(tmp_path / "m", "score", "min")
    assert _feed(low, {1: 0.5, 2: 0.7, 3: 0.1}, lambda s: 0, ends={3}) == [1, 3]
    low.close()


def test_missing_or_non_numeric_metric_is_one_config_error(tmp_path):
    best = StageBest(tmp_path / "b", "f1/all")
    with pytest.raises(ConfigError, match=r"select_metric='f1/all'.*has: accuracy"):
        best.value({"step": 1, "accuracy": 0.5})
    with pytest.raises(ConfigError, match="not a number"):
        best.value({"f1/all": "high"})
    best.close()


def test_superseded_bests_are_pruned_only_when_no_retained_checkpoint_records_them(tmp_path):
    best = StageBest(tmp_path / "b", "score")
    _feed(best, {1: 0.1, 2: 0.2, 3: 0.3}, lambda s: 0, ends=set())
    best.flush()
    assert best.store.all_steps() == [1, 2, 3]
    best.prune(oldest_checkpoint=2)  # a checkpoint at 2 records best 2: step 1 is unreferenced, 2 is not yet
    assert best.store.all_steps() == [2, 3]
    best.prune(oldest_checkpoint=3)
    assert best.store.all_steps() == [3]
    best.close()


def test_load_on_resume_reconciles_the_store(tmp_path):
    best = StageBest(tmp_path / "b", "score")
    _feed(best, {1: 0.1, 2: 0.4, 3: 0.2, 4: 0.9, 5: 0.3, 6: 0.8}, lambda s: 0 if s <= 3 else 1, ends={3})
    assert best.entries == {0: {"step": 2, "value": 0.4}, 1: {"step": 4, "value": 0.9}}
    best.close()
    # the train-state checkpoint at step 3 recorded stage 0's best = step 2; 4 was written after it
    at3 = {"metric": "score", "mode": "max", "stages": {"0": {"step": 2, "value": 0.4}}}
    best = StageBest(tmp_path / "b", "score")
    best.load(at3, 3)
    assert best.store.all_steps() == [1, 2]  # 4 deleted (the replay writes it again); 1 superseded by 2
    best.prune(oldest_checkpoint=3)
    assert best.store.all_steps() == [2]
    assert _feed(best, {4: 0.9}, lambda s: 1, ends=set()) == [4]  # the replay can save step 4 again
    best.flush()
    best.close()

    fresh = StageBest(tmp_path / "b", "score")
    fresh.load(None, 0)  # a new run in this out_dir: nothing recorded, nothing kept
    assert fresh.store.all_steps() == [] and fresh.entries == {}
    fresh.close()

    gone = StageBest(tmp_path / "c", "score")
    with pytest.raises(CheckpointError, match=r"best checkpoints \[2\].*missing"):
        gone.load(at3, 3)
    gone.close()
    other = StageBest(tmp_path / "d", "accuracy")
    with pytest.raises(ConfigError, match="chose their bests by 'score'"):
        other.load(at3, 3)
    other.close()
