"""FsdpLayerSharding.table / row_map (memjax/parallel/fsdp.py) on 8 simulated CPU devices, data 2 x fsdp 4 as 2
hosts x 4: token_logprobs' loss and gradients (through shard_map with check_vma=False, tied and untied LM head)
equal the unsharded computation, and no activation is all-gathered between hosts any more."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=70)]  # four jitted gradients on 8 simulated devices (2 cores)


@pytest.mark.timeout(1200)
def test_row_map_gradients_and_traffic():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.dirname(here))), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, os.path.join(here, "fsdp_rows_check.py")], env=env, capture_output=True,
                       text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.split("RESULT", 1)[1])
    for name, r in res.items():
        assert r["loss_err"] < 1e-5 and r["grad_err"] < 1e-5 * max(1.0, r["grad_scale"]), (name, r)
    for tied in (True, False):
        fix, without = res[f"tied={tied},row_map"], res[f"tied={tied},without"]
        # without: token ids / embeddings / hidden states gathered over the whole mesh, across hosts too
        assert without["by_op"]["all-gather"]["inter"] > 0, without["by_op"]
        assert fix["by_op"].get("all-gather", {}).get("inter", 0) == 0, fix["by_op"]
        assert fix["inter"] < without["inter"], (fix["inter"], without["inter"])
