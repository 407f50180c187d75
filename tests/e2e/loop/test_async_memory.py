"""Memory-R2 (LoGo-GRPO: local branches re-roll sessions from their anchor's snapshot) and Memory-R1 (the manager and
the answer agent) under colocated_async on 4 host devices, in a child process with one compilation cache (the sync
and max_staleness=0 runs repeat the first run's programs and compile nothing): each tiny task trains 2 steps, the
second on a batch generated one version stale, with every token's version in its batch; Memory-R2's local branches
train in their anchor's batch, never older than their anchor; with max_staleness=0 Memory-R2 is the sync run bit for
bit. (Each further system costs a compilation, about 25 CPU-seconds; the same systems under split_async:
tests/e2e/loop/test_split_async.py.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=85)]  # the child: 81 s wall beside another module (2 cores)

ROOT = Path(__file__).resolve().parents[3]
CHILD = r"""
import hashlib, json, sys
import jax, numpy as np
from flax import nnx
from memjax.core.config import apply_overrides, load_config_file
from memjax.loop.run import Run

ROOT, OUT = sys.argv[1], sys.argv[2]
SMALL = ["steps=2", "prompts_per_step=2", "agent.heldout_size=4", "eval_every=0", "agent.group_size=4",
         "checkpoint_every=10", "update.micro_rows=32", f"compile_cache={OUT}/xla"]
KEYS = ("step", "reward", "loss", "grad_norm", "trained_samples", "rollout_staleness_token_mean",
        "rollout_staleness_token_max", "rollout_async_admitted_version")

class Seen(Run):
    # each trained batch's rows as credit assignment receives them: trajectory, LoGo local group, token versions
    def __init__(self, cfg):
        super().__init__(cfg)
        self.seen, assign = [], self.parts.credit.assign
        def spy(batch, own=None):
            v, lg = batch.version, batch.local_group
            self.seen.append({"sample": batch.sample.tolist(),
                              "local": [-1] * batch.num_rows if lg is None else lg.tolist(),
                              "versions": None if v is None else [sorted({int(x) for x in r if x >= 0}) for r in v]})
            return assign(batch, own=own)
        self.parts.credit.assign = spy

def run(config, name, *sets):
    cfg = apply_overrides(load_config_file(f"{ROOT}/configs/{config}"), [*SMALL, f"out_dir={OUT}/{name}", *sets])
    r = Seen(cfg)
    hist = r.run()
    leaves = jax.tree.leaves(nnx.state(r.parts.model, nnx.Param))
    digest = hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in leaves)).hexdigest()
    return {"weights": digest, "history": [{k: h.get(k) for k in KEYS} for h in hist], "batches": r.seen}

res = {"r2_colocated": run("memory_r2/tiny.py", "r2c", "schedule=colocated_async"),
       "r2_sync": run("memory_r2/tiny.py", "r2s"),
       "r2_zero": run("memory_r2/tiny.py", "r2z", "schedule=colocated_async", "max_staleness=0"),
       "r1_manager": run("memory_r1/tiny.py", "r1m", "schedule=colocated_async"),
       "r1_answer": run("memory_r1/tiny_answer.py", "r1a", "schedule=colocated_async")}
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    out = tmp_path_factory.mktemp("async_r2")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(out)], check=False, env=env, capture_output=True,
                       text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.split("RESULT", 1)[1])


@pytest.mark.parametrize("run", ["r2_colocated", "r1_manager", "r1_answer"])
def test_it_trains_the_second_batch_one_version_stale(res, run):
    h = res[run]["history"]
    assert [x["step"] for x in h] == [1, 2] and all(x["trained_samples"] > 0 for x in h)
    assert any(x["grad_norm"] > 0 for x in h)  # an update moved the weights (a flat batch has none)
    assert [x["rollout_async_admitted_version"] for x in h] == [0, 0]  # batch 2 generated before update 1
    assert [x["rollout_staleness_token_mean"] for x in h] == [0.0, 1.0]
    assert all(x["rollout_staleness_token_max"] <= 1 for x in h)  # max_staleness=1 bounds every token
    for x, batch in zip(h, res[run]["batches"]):
        tokens = {v for row in batch["versions"] for v in row}  # the batch carries each token's version
        assert tokens == {x["rollout_async_admitted_version"]}


def test_logo_local_branches_train_with_their_anchor(res):
    for batch in res["r2_colocated"]["batches"]:
        local = [i for i, g in enumerate(batch["local"]) if g >= 0]
        anchors = {batch["sample"][i] for i, g in enumerate(batch["local"]) if g < 0}
        assert local, "the tiny task re-rolls sessions locally (logo=True)"
        for i in local:  # a branch is a chain of its anchor's trajectory: same batch, no older version
            s = batch["sample"][i]
            assert s in anchors
            first = min(v for j, row in enumerate(batch["versions"]) if batch["sample"][j] == s for v in row)
            assert min(batch["versions"][i]) >= first


def test_staleness_zero_is_the_sync_schedule(res):
    zero, sync = res["r2_zero"], res["r2_sync"]
    assert zero["weights"] == sync["weights"]
    keep = ("step", "reward", "loss", "grad_norm", "trained_samples")
    assert [{k: x[k] for k in keep} for x in zero["history"]] == [{k: x[k] for k in keep} for x in sync["history"]]
    assert [x["rollout_staleness_token_mean"] for x in zero["history"]] == [0.0, 0.0]
    assert [x["rollout_async_admitted_version"] for x in zero["history"]] == [0, 1]

