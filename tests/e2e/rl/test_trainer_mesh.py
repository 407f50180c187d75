"""The Trainer on 8 simulated CPU devices (MeshConfig): ZeRO-3 in the compiled mini-batch update, each device
its own rows, parameters + optimizer state 1/8 per device, and results equal to one device (fp32)."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(2400)  # compiles three trainers on 8 simulated devices: minutes on a loaded 2-core machine
def test_trainer_zero3_on_8_devices():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.dirname(here))), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, os.path.join(here, "mesh_check.py")], env=env, capture_output=True,
                       text=True, timeout=2400)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.split("RESULT", 1)[1])
    for name, r in res.items():  # fsdp=8, data=2 x fsdp=2 x tensor=2 and data=2 x fsdp=4 against one device
        assert r["loss_err"] < 1e-6 and r["gnorm_rel_err"] < 1e-5 and r["param_err"] < 1e-6, (name, r)
    f = res["fsdp8"]
    assert abs(f["param_opt_frac"] - 1 / 8) / (1 / 8) < 0.05, f["param_opt_frac"]
    assert f["data_spec"] == "P(None, ('data', 'fsdp'))"
    # the scanned layer loops carry the residual stream of ONE row per device (8 rows / 8 devices)
    layer = [lp for lp in f["loops"] if "f32[1,64,128]" in lp["head"]]
    assert len(layer) == 2, [lp["head"][:200] for lp in f["loops"]]
    fwd, bwd = layer
    assert not any("f32[8,64,128]" in lp["head"] for lp in f["loops"])
    # forward: the 7 fsdp-sharded weights of a layer (q, k, v, o, gate, up, down) gathered once each, no
    # all-reduce at all (no activation is reduced)
    assert fwd["all-gather"] == 7 and fwd["all-reduce"] == 0 and fwd["reduce-scatter"] == 0, fwd
    # backward: gathered again (not kept for all layers) and the layer's gradients reduced in ONE combined
    # collective of weight-shaped operands (XLA:CPU emits all-reduce + slice; GPU turns it into reduce-scatter)
    assert bwd["all-gather"] == 7 and bwd["all-reduce"] + bwd["reduce-scatter"] == 1, bwd
    assert all("[1,64," not in s for s in bwd["all_reduce_shapes"]), bwd["all_reduce_shapes"]
    # data 2 x fsdp 4 as 2 hosts x 4: each data replica accumulates its own gradients and the replicas' sums are
    # all-reduced over data once per update -- the ring sends each device's gradient shard (its parameter bytes,
    # f32) to the other host once, plus a few metric scalars; nothing else crosses hosts
    d = res["dp2_fsdp4"]
    inter, shard = d["traffic"]["max_inter"], d["param_bytes_per_device"]
    assert shard <= inter <= shard + 4096, (inter, shard, d["traffic"]["by_op"])
    assert set(d["traffic"]["by_op"]) <= {"all-gather", "all-reduce", "reduce-scatter"}, d["traffic"]["by_op"]
