"""Every shipped training config plans on 8 simulated CPU devices (tests/plan_configs_child.py: small shapes, the
rest as shipped): no sharding error (micro_rows 1, 2 and 4 round up to one row per device), the rows of every
model a recipe holds (critic_* for PPO, answer_agent_* for Memory-R1's manager stage and Memory-R2's policy copy),
and the critic's per-device bytes against a hand count. Also the one-line refusals of a config that cannot shard."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=75)]  # every shipped config planned in a subprocess (CI: 129 s before -O0)

ROOT = Path(__file__).resolve().parents[2]
GPU_RECIPES = ("memagent/train", "memagent/train_14b", "sumer/train", "memory_r1/train_manager", "memory_r1/train_answer",
               "memory_r2/train")


@pytest.fixture(scope="module")
def plans():
    # The child compiles programs only for their memory analysis and HLO text, never runs them: LLVM's optimisation
    # of the machine code (xla_backend_optimization_level) changes neither (the child's JSON is byte-identical with
    # and without it) and is ~30% of the child's CPU time.
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0",
               JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "plan_configs_child.py"), str(ROOT)], env=env,
                       capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def critic_hand_count(cfg, n: int) -> tuple[int, int]:
    """(params, AdamW state) bytes per device of the critic on an fsdp=n mesh, counted from the model's shapes:
    fp32; embedding and every layer matrix split n ways along the hidden dimension (memjax/parallel/mesh.py rules);
    biases, norms and the value head whole; no LM head; AdamW: two moments like the params + one int32 count."""
    L, h, i, v, q, kv = (cfg.num_layers, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.q_size,
                         cfg.kv_size)
    split = v * h + L * (h * q + 2 * h * kv + q * h + 3 * h * i)
    whole = L * (q + 2 * kv) * cfg.attention_bias + 2 * L * h + h + h + 1  # biases, norms, final norm, head w + b
    params = 4 * (split // n + whole)
    return params, 2 * params + 4


@pytest.mark.timeout(1800)  # ~10 AOT plans on 8 simulated devices: ~2 min of CPU, more on a loaded machine
def test_every_shipped_config_plans(plans):
    shipped = {p.relative_to(ROOT / "configs").with_suffix("").as_posix() for p in (ROOT / "configs").rglob("*.py")}
    assert set(GPU_RECIPES) <= set(plans) <= shipped
    for name, r in plans.items():
        assert "error" not in r, (name, r)
        assert r["micro_rows_effective"] % 8 == 0 and r["rows_per_device"] >= 1, name
        assert r["micro_rows_effective"] >= r["micro_rows"], name
        b = r["bytes"]
        gae = name in ("memory_r1/train_manager", "memory_r1/train_answer", "memagent/tiny_ppo")
        assert (b["critic_params"] > 0 and b["critic_temporaries"] > 0) == gae, name
        held = name in ("memory_r1/train_manager", "memory_r2/train")
        assert (b["answer_agent_weights"] > 0 and b["answer_agent_kv"] > 0) == held, name
        assert b["answer_agent_weights"] in (0, b["rollout_weights"]), name  # a bf16 copy of the policy
        assert b["judge_weights"] == b["judge_kv"] == 0, name  # judges are rules or remote endpoints
    for name in GPU_RECIPES:
        assert plans[name]["fits"], (name, plans[name].get("reason"))
    assert plans["memory_r2/train"]["micro_rows"] == 1 and plans["memory_r2/train"]["rounding_padding"] == 7 / 8
    assert plans["sumer/train"]["holds"]["judge"] == "remote"
    m = plans["memory_r1/train_manager"]  # the answer agent's pool is in the rollout phase only (engine_sleep)
    resident = sum(m["bytes"][k] for k in ("params", "optimizer", "critic_params", "critic_optimizer",
                                           "answer_agent_weights"))
    temps = max(m["bytes"]["train_temporaries"], m["bytes"]["critic_temporaries"])
    assert m["phases"]["update"] == resident + temps
    assert m["phases"]["rollout"] == resident + m["bytes"]["rollout_weights"] + m["bytes"]["answer_agent_kv"] \
        + m["bytes"]["kv_cache"]


def test_critic_bytes_match_the_hand_count(plans):
    from tests.plan_configs_child import SMALL

    params, opt = critic_hand_count(SMALL, 8)
    b = plans["memory_r1/train_manager"]["bytes"]
    assert b["critic_params"] == params and b["critic_optimizer"] == opt
    policy = plans["memory_r1/train_manager"]["bytes"]["params"]
    assert policy - params == 4 * (SMALL.hidden_size * SMALL.vocab_size // 8) - 4 * (SMALL.hidden_size + 1)  # no head


def test_qwen7b_critic_hand_count():
    """The hand count for Qwen2.5-7B on 8 devices (the figures BUILD.md quotes next to the plan's 3.29 / 6.59 GiB)."""
    from memjax.model import presets

    params, opt = critic_hand_count(presets.get("qwen2.5-7b"), 8)
    assert params == 3_536_490_500 and opt == 2 * params + 4  # 3.29 GiB, 6.59 GiB


def test_configs_that_cannot_shard_get_one_line_errors():
    from memjax.core.config import apply_overrides, load_config_file
    from memjax.run.layout import PlanError, shard_check

    cfg = load_config_file(ROOT / "configs" / "memagent" / "train.py")
    assert shard_check(cfg, 8) == (1, 8, 1)
    bad = apply_overrides(cfg, ["engine.data_parallel=-1", "engine.max_slots=252"])
    with pytest.raises(PlanError, match=r"engine on 8 device groups: .*max_slots=252.*--set engine.max_slots=256") as e:
        shard_check(bad, 8)
    assert "\n" not in str(e.value)
    with pytest.raises(PlanError, match=r"mesh=\(data 3, fsdp -1, tensor 1\) does not fit 8 devices; e.g."):
        shard_check(apply_overrides(cfg, ["mesh.data=3"]), 8)
    with pytest.raises(PlanError, match=r"engine.tensor_parallel=3 must divide .*values that work here: \[1, 2, 4\]"):
        shard_check(apply_overrides(cfg, ["engine.tensor_parallel=3"]), 8)
