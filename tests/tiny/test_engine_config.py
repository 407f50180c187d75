"""The tiny tasks' engine (memjax/tiny/model.py): its compiled loop holds one forward per round size, and it has no
small row buckets below max_slots (each is another full forward to compile in every process that builds a tiny
engine; at these shapes they saved no rollout time: the docstring's measurement). That small buckets sample the same
tokens is tests/engine/test_mixed.py's check."""

from memjax.tiny.model import engine_config


def test_the_tiny_engine_compiles_no_small_round_buckets():
    cfg = engine_config()
    assert cfg.small_rounds == 0
    assert cfg.round_sizes == (cfg.max_slots, cfg.round_tokens) == (64, 64 + 16 * 48)
    assert min(engine_config(max_slots=8).round_sizes) == 8
