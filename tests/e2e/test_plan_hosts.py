"""python -m memjax.plan --hosts H (issue 31): the tiny config planned on 2 hosts x 4 simulated devices and on 1
host x 4, as the CLI is documented; the global hybrid mesh (data across hosts), the traffic keys, bytes between
hosts only with several hosts and then the weights' least (the gradient shard's all-reduce), the compiled
figures against the weights' least bytes, and the table's line."""

import json
import os
import subprocess
import sys

import pytest

from memjax.run.plan import table

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=60)]  # two AOT plans of the tiny config (about 20 s each, 2 cores)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _plan(*args):
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("XLA_FLAGS", None)  # the plan starts its own child on devices x hosts simulated devices
    p = subprocess.run([sys.executable, "-m", "memjax.plan", "configs/tiny.py", "--hbm-gib", "8",
                        "--min-kv-gib", "0.01", "--json", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


@pytest.mark.timeout(1800)
def test_plan_hosts_traffic():
    two = _plan("--devices", "4", "--hosts", "2")
    one = _plan("--devices", "4")
    assert two["hosts"] == 2 and one["hosts"] == 1
    assert two["mesh"] == {"data": 2, "fsdp": 4, "tensor": 1} and one["mesh"] == {"data": 1, "fsdp": 4, "tensor": 1}
    for r in (one, two):
        tr = r["traffic"]
        assert set(tr) >= {"update", "logprobs", "analytic_update", "model"}
        for prog in ("update", "logprobs"):
            assert set(tr[prog]) >= {"by_op", "max_inter", "max_intra", "mean_inter", "mean_intra", "ops",
                                     "unknown_trip_counts"}
            # the micro-batch loop is counted micro_batches times: no loop with collectives left unknown
            assert tr[prog]["unknown_trip_counts"] == [], tr[prog]["unknown_trip_counts"]
        an = tr["analytic_update"]
        assert set(an) == {"inter", "intra_floor", "intra_zero3"}
        assert an["intra_zero3"] > an["intra_floor"] > 0
        # the compiled update moves at least the weights' least bytes (gather + reduce-scatter inside a host)
        assert tr["update"]["max_intra"] >= an["intra_floor"], (tr["update"], an)
    assert one["traffic"]["update"]["max_inter"] == 0 and one["traffic"]["analytic_update"]["inter"] == 0
    t2 = two["traffic"]
    assert t2["analytic_update"]["inter"] > 0
    # between hosts: the gradient shard all-reduced over data once per update (the micro-batch loop runs per data
    # replica: memjax/rl/update_programs.py), a few metric scalars besides, and no activation (log-prob program: 0)
    least = t2["analytic_update"]["inter"]
    assert least <= t2["update"]["max_inter"] <= least + 4096, (t2["update"], least)
    assert t2["logprobs"]["max_inter"] == 0, t2["logprobs"]
    line = [x for x in table(two).splitlines() if x.startswith("sent per device per update")]
    assert len(line) == 1 and "between hosts" in line[0] and "ZeRO-3 reference" in line[0], line
    assert "2 hosts x 4" in table(two).splitlines()[0]
