"""TrainConfig.schedule="colocated_async" on the tiny memory task, in-process: with max_staleness=0 it is the sync
schedule bit for bit (weights and metrics); with max_staleness=1 the next generation batch runs during the step
(its tokens are one version stale when trained) and a run stopped after a checkpoint resumes bit for bit equal to
the uninterrupted run (the paused batches are saved with the checkpoint); the combinations it cannot run are one
line."""

from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from memjax.core.config import ConfigError, apply_overrides, load_config_file
from memjax.loop.run import Run

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=120)]

ROOT = Path(__file__).resolve().parents[3]
# groups of 4, 2 prompts a step, micro-batches of 32 rows, no held-out evaluation between: ~10 CPU-s a run warm
SMALL = ["prompts_per_step=2", "agent.heldout_size=4", "agent.eval_samples=1", "eval_every=0", "agent.group_size=4",
         "update.micro_rows=32", "filter_flat_groups=false"]
SAME = ("step", "reward", "loss", "grad_norm", "trained_samples", "rollout_generated_tokens")


def _run(out: Path, *sets: str):
    cfg = apply_overrides(load_config_file(ROOT / "configs" / "tiny.py"), [*SMALL, f"out_dir={out}", *sets])
    run = Run(cfg)
    history = run.run()
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(run.parts.model, nnx.Param))], history


def _same(a, b):
    (pa, ha), (pb, hb) = a, b
    assert [{k: h.get(k) for k in SAME} for h in ha] == [{k: h.get(k) for k in SAME} for h in hb]
    for x, y in zip(pa, pb):
        np.testing.assert_array_equal(x, y)


def test_staleness_zero_is_the_sync_schedule(tmp_path):
    sync = _run(tmp_path / "sync", "steps=2", "checkpoint_every=10")
    zero = _run(tmp_path / "zero", "steps=2", "checkpoint_every=10", "schedule=colocated_async", "max_staleness=0")
    _same(sync, zero)
    assert all(h["rollout_async_batches_ahead"] == 0 and h["rollout_staleness_token_mean"] == 0 for h in zero[1])


def test_a_batch_runs_ahead_and_a_resume_is_bit_for_bit(tmp_path):
    one = ("schedule=colocated_async", "max_staleness=1", "checkpoint_every=2")
    whole = _run(tmp_path / "whole", "steps=3", *one)
    h = whole[1]
    assert [x["rollout_async_batches_ahead"] for x in h] == [1, 1, 1]
    # batch 2 ran (to its end: the tiny task's trajectories are as long as batch 1's) under the first weights
    assert h[1]["rollout_staleness_token_mean"] == 1.0 and h[1]["rollout_async_admitted_version"] == 0
    assert h[0]["rollout_staleness_token_mean"] == 0.0
    _run(tmp_path / "cut", "steps=2", *one)  # stops after step 2's checkpoint, batch 3 admitted and waiting
    resumed = _run(tmp_path / "cut", "steps=3", *one)
    _same(whole, resumed)


@pytest.mark.parametrize("sets, line", [
    (["schedule=colocated_async", "dynamic_sampling=true", "filter_flat_groups=false"], "use filter_flat_groups"),
    (["schedule=overlapped"], "schedule must be one of"),
    (["schedule=colocated_async", "max_staleness=-1"], "max_staleness must be in 0..16"),
])
def test_what_it_cannot_run_is_one_line(sets, line):
    with pytest.raises(ConfigError, match=line) as e:
        apply_overrides(load_config_file(ROOT / "configs" / "tiny.py"), sets)
    assert "\n" not in str(e.value)


def test_a_workflow_that_keeps_kv_across_turns_is_refused_at_start(tmp_path):
    """SUMER's tool loop continues retained KV (Request.parent): refused before any model loads, in one line."""
    cfg = apply_overrides(load_config_file(ROOT / "configs" / "sumer" / "tiny.py"),
                          ["steps=1", "prompts_per_step=2", "schedule=colocated_async", f"out_dir={tmp_path / 's'}"])
    with pytest.raises(ConfigError, match="tiny_sumer keeps KV across turns") as e:
        Run(cfg)
    assert "\n" not in str(e.value) and not (tmp_path / "s").exists()
