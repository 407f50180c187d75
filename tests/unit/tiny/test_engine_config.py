"""The tiny tasks' engines (memjax/tiny/model.py, which SUMER's memjax/systems/sumer/tiny/agent.py takes at its
window; the full-context baseline's memjax/systems/memagent/tiny/full_context.py) of fewer than 256 slots have no
small row buckets below max_slots: each bucket is one more full forward in the compiled loop, compiled by every
process that builds a tiny engine, and at these shapes they saved no rollout time (the measurements are in those
docstrings). An engine of 256 slots (MemAgent's tiny default) keeps one, for runs with few trajectories.
That small buckets sample the same tokens is tests/unit/engine/test_mixed.py's check."""

from memjax.model import init_model
from memjax.systems.memagent.tiny import full_context
from memjax.systems.memagent.tiny.system import TinySection
from memjax.systems.memagent.tiny.task import TaskConfig
from memjax.systems.sumer.tiny import agent as sumer
from memjax.tiny.model import engine_config, model_config


def test_the_tiny_engine_compiles_no_small_round_buckets():
    cfg = engine_config()
    assert cfg.kernels.small_rounds == 0
    assert cfg.round_sizes == (cfg.max_slots, cfg.round_tokens) == (64, 64 + 16 * 48)
    assert min(engine_config(max_slots=8).round_sizes) == 8


def test_a_tiny_engine_of_256_slots_keeps_one_small_bucket():
    """MemAgent's tiny engine (256 slots: a step's 256 trajectories at once) keeps max_slots / 4 rows for runs with a
    handful of trajectories (memjax/tiny/model.py engine_config: their rollout took 0.31 s per step at 256-row rounds,
    0.15 s with the bucket)."""
    cfg = engine_config(max_slots=TinySection().max_slots)
    assert cfg.max_slots == 256 and cfg.kernels.small_rounds == 1 and sorted(cfg.round_sizes)[:2] == [64, 256]


def test_sumers_tiny_engine_compiles_no_small_round_buckets():
    cfg = sumer.engine_config()
    assert cfg.kernels.small_rounds == 0 and min(cfg.round_sizes) == cfg.max_slots == 64


def test_the_full_context_engine_compiles_no_small_round_buckets():
    cfg = full_context.make_engine(init_model(model_config(), 0), TaskConfig(num_chunks=6), max_slots=8).config
    assert cfg.kernels.small_rounds == 0 and min(cfg.round_sizes) == cfg.max_slots == 8
