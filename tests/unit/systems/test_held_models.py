"""Systems declare the frozen models they serve (memjax.plan's answer_agent_* rows) and hand their engines to the
loop, whose pools sleep through the update: Memory-R2's policy_copy answer agent is a compute-dtype copy on its
own engine with `answer_kv_cache_bytes` of KV; Memory-R1's manager stage holds its frozen answer agent."""

from pathlib import Path

import jax
import jax.numpy as jnp
from flax import nnx

from memjax.core.tokenizer import Tokenizer
from memjax.engine import EngineConfig, KVCacheOptions, SamplingParams
from memjax.engine.state import kv_bytes_per_page
from memjax.model import init_model, presets
from memjax.systems import (
    MemoryR1AnswerSection,
    MemoryR1ManagerSection,
    MemoryR2Section,
    build,
)
from memjax.systems.base import HeldModel

ASSETS = Path(__file__).resolve().parents[3] / "memjax" / "assets" / "qwen2.5-tokenizer"


def test_sections_declare_what_they_hold():
    assert MemoryR2Section().held_models() == (HeldModel("answer_agent", 4 << 30),)
    assert MemoryR2Section(answer_agent="overlap").held_models() == ()
    assert MemoryR1ManagerSection(frozen_kv_cache_bytes=1 << 30).held_models() == (HeldModel("answer_agent", 1 << 30),)
    assert MemoryR1AnswerSection().held_models() == ()  # the fixed manager is freed after building the banks
    assert MemoryR2Section(judge="rule").judge_served() == "rule"


def test_memory_r2_answer_engine_is_a_compute_dtype_copy_with_its_own_pool():
    cfg = presets.get("tiny", param_dtype="float32", dtype="bfloat16")
    policy = init_model(cfg, seed=0)
    s = build(MemoryR2Section(embedder="hashed", answer_kv_cache_bytes=8 << 20))
    s.setup(policy, Tokenizer.from_dir(ASSETS))
    ecfg = EngineConfig(max_slots=4, page_size=16, window=256, prefill_slots=2, prefill_chunk=64, progress=False,
                        kv=KVCacheOptions(kv_cache_gib=1.0))
    s.engine_config(ecfg)
    engine = s._answer_agent().engine
    assert s.frozen_engines() == [engine] and s._frozen is None
    assert engine.num_pages == (8 << 20) // kv_bytes_per_page(cfg, engine.config)
    assert all(a.dtype == jnp.bfloat16 for a in jax.tree.leaves(engine._params))
    assert engine.sleep(weights=False) > 0 and engine.asleep
    out = engine.generate([[1, 2, 3]], SamplingParams(temperature=0.0, max_tokens=2))  # wakes with the same weights
    assert len(out[0].token_ids) == 2
    assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(nnx.state(policy, nnx.Param)))
