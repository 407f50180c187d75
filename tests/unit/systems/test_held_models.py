"""Systems declare the frozen models they serve (memjax.plan's answer_agent_* rows) and hand their engines to the
loop, whose pools sleep through the update: Memory-R2's policy_copy answer agent is a compute-dtype copy on its
own engine with `answer_kv_cache_bytes` of KV; Memory-R1's manager stage holds its frozen answer agent; both on the
policy engine's devices unless frozen_devices="one" (a bad value is a one-line error); where the plan says they live;
EngineConfig.over_groups inverts per_device."""

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from memjax.core.tokenizer import Tokenizer
from memjax.engine import EngineConfig, KVCacheOptions, SamplingParams
from memjax.engine.state import kv_bytes_per_page
from memjax.model import init_model, presets
from memjax.parallel.placement import held_devices, held_where
from memjax.systems import (
    MemoryR1AnswerSection,
    MemoryR1ManagerSection,
    MemoryR2Section,
    build,
)
from memjax.systems.base import HeldModel

ASSETS = Path(__file__).resolve().parents[3] / "memjax" / "assets" / "qwen2.5-tokenizer"


def test_sections_declare_what_they_hold():
    assert MemoryR2Section().held_models() == (HeldModel("answer_agent", 4 << 30, "engine"),)
    assert MemoryR2Section(frozen_devices="one").held_models() == (HeldModel("answer_agent", 4 << 30, "one"),)
    assert MemoryR2Section(answer_agent="overlap").held_models() == ()
    assert MemoryR1ManagerSection(frozen_kv_cache_bytes=1 << 30).held_models() == (
        HeldModel("answer_agent", 1 << 30, "engine"),)
    assert MemoryR1ManagerSection(frozen_devices="one").held_models()[0].devices == "one"
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


def test_frozen_devices_is_validated_in_one_line():
    for section in (MemoryR2Section, MemoryR1ManagerSection, MemoryR1AnswerSection):
        with pytest.raises(ValueError, match=r"frozen_devices must be one of \('engine', 'one'\), got 'all'"):
            section(frozen_devices="all")


def test_the_plan_says_where_the_frozen_copies_live():
    h = HeldModel("answer_agent", 4 << 30, "engine")
    assert held_devices(h, 8) == 8 and held_devices(HeldModel("answer_agent", 4 << 30, "one"), 8) == 1
    assert held_where(h, 8) == ("frozen copy on each of the policy engine's 8 devices (data_parallel 8), 4 GiB KV per "
                                "device (frozen_devices='engine')")
    assert held_where(h, 1).startswith("frozen copy on one device, 4 GiB KV")


def test_over_groups_is_per_device_inverse():
    one = EngineConfig(max_slots=4, page_size=16, window=256, prefill_slots=2, prefill_chunk=64, queue_size=8,
                       token_budget=64, kv=KVCacheOptions(kv_cache_bytes=8 << 20))
    many = one.over_groups(4)
    assert (many.data_parallel, many.max_slots, many.prefill_slots, many.kv.kv_cache_bytes) == (4, 16, 8, 32 << 20)
    assert many.per_device(4) == one and one.over_groups(1) == one
    with pytest.raises(ValueError, match="one-group config"):
        many.over_groups(2)
