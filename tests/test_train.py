"""`python -m memjax.train`: the loop runs, checkpoints, and resumes bit-identically.

A random-weight model earns no reward, so advantages are zero; a small entropy bonus keeps the gradients
(and so the parameters) moving, which is what the resume check needs to be meaningful."""

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from memjax import train
from memjax.config import ConfigError, apply_overrides

DATA = Path(__file__).parent / "fixtures" / "data" / "hotpotqa_dev_excerpt.json"
SETS = [f"data.path={DATA}", "data.num_docs=10", "data.prompts_per_step=2", "memagent.group_size=2",
        "memagent.chunk_tokens=720", "memagent.max_query_tokens=48", "memagent.max_memory_tokens=8", "memagent.max_final_tokens=4",
        "engine.window=1024", "loss.entropy_coef=0.01", "optim.lr=1e-3", "optim.warmup_steps=0",
        "update.micro_rows=8", "update.pad_tokens=128", "checkpoint_every=1"]


def _cfg(out, steps):
    return apply_overrides(train.TrainConfig(), SETS + [f"out_dir={out}", f"steps={steps}"])


def _params(run):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(run.model, nnx.Param))]


def test_resume_is_bit_identical(tmp_path):
    full = train.Run(_cfg(tmp_path / "a", 2))
    hist = full.run()
    assert len(hist) == 2 and hist[0]["grad_norm"] > 0
    assert hist[0]["logp_mismatch_mean"] < 1e-5  # engine vs trainer log-probs, same weights

    first = train.Run(_cfg(tmp_path / "b", 1))
    first.run()
    p1 = _params(first)
    resumed = train.Run(_cfg(tmp_path / "b", 2))  # finds the step-1 checkpoint
    assert resumed.step == 1
    assert all(np.array_equal(a, b) for a, b in zip(p1, _params(resumed)))
    resumed.run()
    for a, b in zip(_params(full), _params(resumed)):
        assert np.array_equal(a, b)
    lines = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    again = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert lines[1]["score"] == again[1]["score"] and lines[1]["grad_norm"] == again[1]["grad_norm"]


def test_errors(tmp_path, capsys):
    assert train.main(["--set", f"out_dir={tmp_path}"]) == 2
    assert "data.path is not set" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="must be one of"):
        apply_overrides(train.TrainConfig(), ["loss.agg=mean"])
