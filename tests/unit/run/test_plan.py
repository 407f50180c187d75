"""python -m memjax.plan on 8 simulated CPU devices: per-device rows follow the sharding (ZeRO-3: params and
optimizer 1/8, bf16 reference half the fp32 params, an unsharded rollout copy), the compiled update's
temporaries are counted, and a config that cannot fit exits 1 with a one-line reason."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from memjax.cli.plan import main as plan_main

CONFIG = textwrap.dedent("""
    from dataclasses import dataclass, field
    from memjax.engine import EngineConfig
    from memjax.checkpoint.source import ModelSource
    from memjax.parallel import MeshConfig
    from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig

    @dataclass(frozen=True)
    class PlanConfig:
        model: ModelSource = ModelSource(preset="tiny")
        engine: EngineConfig = EngineConfig(window=64)
        update: UpdateConfig = UpdateConfig(micro_rows=8, pack=True, row_buckets=(32, 64), attention="blockwise")
        loss: LossConfig = LossConfig(kl_coef=0.1)
        optim: OptimConfig = OptimConfig()
        mesh: MeshConfig = MeshConfig()

    config = PlanConfig()
""")


def _plan(tmp_path, *args):
    cfg = tmp_path / "plan_cfg.py"
    cfg.write_text(CONFIG)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    # the programs are compiled for their memory analysis only, never run: LLVM's optimisation of the machine code
    # (xla_backend_optimization_level) does not change it (the plan's JSON is byte-identical with and without)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0",
               JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    # XLA:CPU only: the rows' arithmetic is the subject here (tests/e2e/parallel/test_gpu_node.py compiles for a GPU)
    return subprocess.run([sys.executable, "-m", "memjax.plan", str(cfg), "--devices", "8", "--backend", "cpu", *args],
                          env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.e2e
@pytest.mark.timeout(1800)  # two AOT compiles on 8 simulated devices: minutes on a loaded 2-core machine
def test_plan_rows_and_refusal(tmp_path):
    p = _plan(tmp_path, "--hbm-gib", "1", "--min-kv-gib", "0.5", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout)
    b = r["bytes"]
    total_params = sum(v for k, v in b.items() if k == "rollout_weights")  # tiny computes in fp32: full copy
    assert r["fits"] and r["mesh"] == {"data": 1, "fsdp": 8, "tensor": 1} and r["row_len"] == 64
    assert abs(b["params"] / (total_params / 8) - 1) < 0.05, b
    assert abs(b["optimizer"] / (2 * b["params"]) - 1) < 0.01, b
    assert abs(b["reference"] / (b["params"] / 2) - 1) < 0.01, b
    assert b["train_temporaries"] > 0 and r["update_program"]["temp"] > 0
    # no engine_sleep field in this config: the phases coexist, the pool fills the device to 90% of it
    assert not r["engine_sleep"]
    assert b["kv_cache"] == int(0.9 * 2**30) - sum(v for k, v in b.items() if k != "kv_cache")
    from memjax.run.plan import table
    assert abs(r["headroom"] - 0.1) < 1e-6 and table(r).endswith("fits, 10.0% of the device left at the peak")
    assert r["total"] == sum(b.values()) == r["phases"]["rollout"] == r["phases"]["update"]
    p = _plan(tmp_path, "--hbm-gib", "0.0001")
    assert p.returncode == 1 and "does not fit" in p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_phases_with_and_without_engine_sleep():
    from memjax.run.plan import budget
    gib = 2**30
    rows = {"params": 1 * gib, "optimizer": 2 * gib, "reference": 0, "train_temporaries": 10 * gib,
            "rollout_weights": 3 * gib}
    kv, ph = budget(rows, 40 * gib, sleep=True, kv_bytes=None)
    assert kv == int(0.9 * 40 * gib) - 6 * gib  # the pool shares the device with params, moments and its weights
    assert ph == {"rollout": 6 * gib + kv, "update": 13 * gib}
    kv, ph = budget(rows, 40 * gib, sleep=False, kv_bytes=None)
    assert kv == int(0.9 * 40 * gib) - 16 * gib and ph["rollout"] == ph["update"] == 16 * gib + kv
    kv, ph = budget(rows, 40 * gib, sleep=True, kv_bytes=None, utilization=0.5)  # engine.kv.memory_utilization
    assert kv == 20 * gib - 6 * gib and ph["rollout"] == 20 * gib
    kv, ph = budget(rows, 40 * gib, sleep=True, kv_bytes=5 * gib)  # engine.kv.kv_cache_gib=5
    assert kv == 5 * gib and ph == {"rollout": 11 * gib, "update": 13 * gib}


def test_engine_groups_split_the_kv_budget():
    from memjax.engine import EngineConfig
    from memjax.run.layout import engine_groups

    assert engine_groups(EngineConfig(), 2, 4) == 1
    assert engine_groups(EngineConfig(max_slots=16, prefill_slots=8, data_parallel=-1), 2, 4) == 8
    assert engine_groups(EngineConfig(max_slots=16, prefill_slots=8, data_parallel=-1, tensor_parallel=2), 2, 2, 2) == 4
    assert engine_groups(EngineConfig(max_slots=16, prefill_slots=4, data_parallel=4), 1, 8) == 4


@pytest.mark.parametrize("args, message", [
    (["--devices", "0", "--hbm-gib", "80"], "argument --devices: must be >= 1, got 0"),
    (["--devices", "x", "--hbm-gib", "80"], "argument --devices: expected a whole number"),
    (["--devices", "8", "--hbm-gib", "-5"], "argument --hbm-gib: must be > 0, got -5"),
    (["--devices", "8", "--hbm-gib", "nan"], "argument --hbm-gib: must be > 0, got nan"),
    (["--devices", "8", "--hbm-gib", "80", "--min-kv-gib", "-1"], "argument --min-kv-gib: must be >= 0, got -1"),
    (["--devices", "8", "--hbm-gib", "80", "--micro-batches", "0"], "argument --micro-batches: must be >= 1"),
])
def test_cli_arguments_are_validated_before_anything_starts(args, message, capsys):
    """Bad numbers are argparse errors (exit 2, one line naming the argument), not a backend error later."""
    with pytest.raises(SystemExit) as e:
        plan_main(["configs/tiny.py", *args])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_refuses_a_non_training_config(capsys):
    with pytest.raises(SystemExit) as e:
        plan_main(["configs/memagent/tiny_eval.py", "--devices", "1", "--hbm-gib", "80"])
    assert e.value.code == 2
    assert "a SystemEvalConfig is not a training config (no update, loss, optim, mesh)" in capsys.readouterr().err


def test_check_resolves_without_compiling(capsys):
    assert plan_main(["configs/memagent/train_14b.py", "--devices", "8", "--hbm-gib", "141", "--check"]) == 0
    out = capsys.readouterr().out
    assert "48 layers" in out and "mesh data=1 fsdp=8 tensor=1" in out and "check: ok" in out
    assert plan_main(["configs/memagent/train.py", "--devices", "7", "--hbm-gib", "80", "--set", "mesh.fsdp=2", "--check"]) == 2
    assert "!= 7 devices" in capsys.readouterr().err
