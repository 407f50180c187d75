"""The frozen engines of Memory-R2 (the policy_copy answer agent) and Memory-R1 (the frozen helper model) on 4
simulated CPU devices: with frozen_devices="engine" (the default) each spans the devices the loop hands it
(System.place_frozen), a full copy on every device with the configured per-device slots and KV pool, and answers
greedily exactly what the one-device layout (frozen_devices="one") answers. One subprocess runs every check."""

import json
import os
import subprocess
import sys

import pytest

# four tiny engines in one subprocess, two layouts' programs compiled (57 CPU-s)
pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=60)]

SCRIPT = r"""
import json, time
T0 = time.time()
from pathlib import Path
import jax
import numpy as np
from memjax.core.tokenizer import Tokenizer
from memjax.engine import EngineConfig, SamplingParams
from memjax.model import init_model, presets
from memjax.systems import MemoryR1ManagerSection, MemoryR2Section, build
from memjax.systems.base import frozen_copy

devs = jax.devices()
assert len(devs) == 4
tok = Tokenizer.from_dir(Path("memjax/assets/qwen2.5-tokenizer"))
policy = init_model(presets.get("tiny", param_dtype="float32", dtype="bfloat16"), seed=3)
r = np.random.default_rng(0)
prompts = [r.integers(0, 500, int(k)).tolist() for k in r.integers(3, 40, 12)]
sp = SamplingParams(temperature=0.0, max_tokens=8)
# the frozen engine Memory-R1 builds for max_prompt_tokens=128, max_response_tokens=64 (make_frozen_engine): the two
# systems' engines then compile the same programs, once (the session's compilation cache)
ecfg = EngineConfig(max_slots=4, page_size=64, window=192, prefill_slots=4, prefill_chunk=1024, progress=False)


def r2(layout):
    s = build(MemoryR2Section(embedder="hashed", answer_kv_cache_bytes=8 << 20, frozen_devices=layout))
    s.place_frozen(devs)
    s.setup(policy, tok)
    s.engine_config(ecfg)
    return s._answer_agent().engine


def r1(layout):
    s = build(MemoryR1ManagerSection(max_prompt_tokens=128, max_response_tokens=64, frozen_kv_cache_bytes=8 << 20,
                                     frozen_max_slots=4, frozen_devices=layout))
    s.place_frozen(devs)
    return s.make_frozen_engine(frozen_copy(policy))


out = {}
for name, make in (("r2", r2), ("r1", r1)):
    for layout in ("engine", "one"):
        e = make(layout)
        held = {d.id for a in jax.tree.leaves(e._params) for d in a.devices()}
        full = all(a.sharding.is_fully_replicated for a in jax.tree.leaves(e._params))
        toks = [o.token_ids for o in e.generate(prompts, sp)]
        out[f"{name}_{layout}"] = {"groups": e.data_parallel, "slots": e.config.max_slots, "pages": e.num_pages,
                                   "devices": sorted(held), "replicated": full, "tokens": toks}
        e.sleep()
out["seconds"] = time.time() - T0
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def result():
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=root, capture_output=True, text=True,
                       timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("system,slots", [("r2", 4), ("r1", 4)])
def test_the_frozen_engine_spans_the_devices_with_a_full_copy_and_the_per_device_pool(result, system, slots):
    dp, one = result[f"{system}_engine"], result[f"{system}_one"]
    assert dp["groups"] == 4 and dp["devices"] == [0, 1, 2, 3] and dp["replicated"]
    assert one["groups"] == 1 and one["devices"] == [0]
    assert dp["slots"] == 4 * one["slots"] == 4 * slots  # the per-device slots on each device
    assert dp["pages"] == 4 * one["pages"]  # the per-device pool on each device


@pytest.mark.parametrize("system", ["r2", "r1"])
def test_data_parallel_answers_equal_the_one_device_layout(result, system):
    dp, one = result[f"{system}_engine"]["tokens"], result[f"{system}_one"]["tokens"]
    assert len(dp) == 12 and all(len(t) == 8 for t in dp)
    assert dp == one
