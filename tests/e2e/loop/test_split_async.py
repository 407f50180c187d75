"""TrainConfig.schedule="split_async" on 4 host devices (a child process): 2 devices roll out while the trainer updates
on the other 2. With max_staleness=1 the batch of step k + 1 is generated during step k's update with the weights
before it (its tokens one version stale when trained); a run stopped by SIGTERM after a checkpoint resumes bit for
bit equal to the uninterrupted run (the generated batches ahead are saved with the checkpoint); max_staleness=0
generates each batch after the update before it; SUMER's tool loop, which keeps KV across turns, runs under it
(a batch is never paused), and so do the Memory-R1 manager and Memory-R2 (LoGo); the combinations
it cannot run are one line; `--check` of the tiny task and of every shipped GPU recipe on 8 host devices prints
each async schedule's line or the one line that refuses it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.core.config import ConfigError, apply_overrides, load_config_file

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=200)]  # the child: 157 s wall beside another module (2 cores)

ROOT = Path(__file__).resolve().parents[3]
SMALL = ["prompts_per_step=2", "agent.heldout_size=4", "agent.eval_samples=1", "eval_every=0", "agent.group_size=4",
         "update.micro_rows=32", "filter_flat_groups=false", "schedule=split_async", "rollout_split=2"]

CHILD = r"""
import hashlib, json, os, signal, sys
import jax, numpy as np
from flax import nnx
from memjax.core.cli import Stopped
from memjax.core.config import apply_overrides, load_config_file
from memjax.loop.run import Run

ROOT, OUT, SMALL = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
KEYS = ("step", "reward", "loss", "grad_norm", "trained_samples", "rollout_generated_tokens",
        "rollout_staleness_token_mean", "rollout_async_admitted_version")

class StopAfter(Run):
    stop_at = 0
    def next_step(self):
        m = super().next_step()
        if self.state.step == self.stop_at:
            os.kill(os.getpid(), signal.SIGTERM)  # the run's own handler: checkpoint at this step, then Stopped
        return m

def run(config, name, *sets, stop_at=0):
    cfg = apply_overrides(load_config_file(f"{ROOT}/configs/{config}"), [*SMALL, f"out_dir={OUT}/{name}", *sets])
    r = StopAfter(cfg)
    r.stop_at = stop_at
    try:
        hist = r.run()
    except Stopped as e:
        return {"stopped": e.code, "line": str(e)}
    leaves = jax.tree.leaves(nnx.state(r.parts.model, nnx.Param))
    digest = hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in leaves)).hexdigest()
    return {"weights": digest, "history": [{k: h.get(k) for k in KEYS} for h in hist],
            "trainer_devices": sorted(d.id for d in r.parts.mesh.devices.flat),
            "engine_devices": sorted({d.id for x in jax.tree.leaves(r.parts.engine._params) for d in x.devices()})}

res = {"whole": run("tiny.py", "whole", "steps=3", "checkpoint_every=2"),
       "cut": run("tiny.py", "cut", "steps=3", "checkpoint_every=2", stop_at=2)}
res["resumed"] = run("tiny.py", "cut", "steps=3", "checkpoint_every=2")
res["zero"] = run("tiny.py", "zero", "steps=2", "max_staleness=0", "checkpoint_every=10")
res["sumer"] = run("sumer/tiny.py", "sumer", "steps=1", "checkpoint_every=10", "agent.group_size=2")
res["r1_manager"] = run("memory_r1/tiny.py", "r1m", "steps=2", "checkpoint_every=10")
res["r2"] = run("memory_r2/tiny.py", "r2", "steps=2", "checkpoint_every=10")
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    out = tmp_path_factory.mktemp("split")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(out), json.dumps(SMALL)], check=False,
                       env=env, capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.split("RESULT", 1)[1])


def test_the_engine_and_the_trainer_hold_disjoint_devices(res):
    assert res["whole"]["engine_devices"] == [0, 1] and res["whole"]["trainer_devices"] == [2, 3]


def test_the_next_batch_is_generated_during_the_update_one_version_stale(res):
    h = res["whole"]["history"]
    assert [x["rollout_async_admitted_version"] for x in h] == [0, 0, 1]
    assert [x["rollout_staleness_token_mean"] for x in h] == [0.0, 1.0, 1.0]


def test_a_run_stopped_by_sigterm_resumes_bit_for_bit(res):
    assert res["cut"]["stopped"] == 143 and "at step 2" in res["cut"]["line"]
    assert res["resumed"]["history"] == res["whole"]["history"]
    assert res["resumed"]["weights"] == res["whole"]["weights"]


def test_staleness_zero_generates_after_each_update(res):
    h = res["zero"]["history"]
    assert [x["rollout_staleness_token_mean"] for x in h] == [0.0, 0.0]
    assert [x["rollout_async_admitted_version"] for x in h] == [0, 1]


def test_a_workflow_that_keeps_kv_across_turns_runs_under_it(res):
    h = res["sumer"]["history"]
    assert len(h) == 1 and h[0]["rollout_generated_tokens"] > 0 and h[0]["rollout_staleness_token_mean"] == 0.0


@pytest.mark.parametrize("run", ["r1_manager", "r2"])
def test_memory_r1_and_memory_r2_train_their_second_batch_one_version_stale(res, run):
    h = res[run]["history"]
    assert [x["step"] for x in h] == [1, 2] and all(x["trained_samples"] > 0 for x in h)
    assert any(x["grad_norm"] > 0 for x in h)  # an update moved the weights (a flat batch has none)
    assert [x["rollout_async_admitted_version"] for x in h] == [0, 0]
    assert [x["rollout_staleness_token_mean"] for x in h] == [0.0, 1.0]
    assert res[run]["engine_devices"] == [0, 1] and res[run]["trainer_devices"] == [2, 3]


@pytest.mark.parametrize("sets, line", [
    (["schedule=split_async"], "needs rollout_split >= 1"),
    (["rollout_split=2"], "splits the devices for schedule=split_async"),
    (["schedule=split_async", "rollout_split=1", "dynamic_sampling=true", "filter_flat_groups=false"],
     "use filter_flat_groups"),
])
def test_what_it_cannot_run_is_one_line(sets, line):
    with pytest.raises(ConfigError, match=line) as e:
        apply_overrides(load_config_file(ROOT / "configs" / "tiny.py"), sets)
    assert "\n" not in str(e.value)


def test_a_split_leaving_no_trainer_device_is_one_line_at_check():
    """`--check` on this (one-device) process: rollout_split=1 takes its only device."""
    p = subprocess.run([sys.executable, "-m", "memjax.train", str(ROOT / "configs" / "tiny.py"), "--check", "--set",
                        "schedule=split_async", "--set", "rollout_split=1"],
                       check=False, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "rollout_split=1 leaves no device for the trainer" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


CHECKS = r"""
import contextlib, io, json, sys
from memjax.cli.train import main

out = {}
for name, argv in json.loads(sys.argv[1]).items():
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        rc = main(argv)
    out[name] = {"rc": rc, "out": o.getvalue(), "err": e.getvalue()}
print("RESULT" + json.dumps(out))
"""
FIX = ROOT / "tests" / "fixtures" / "data"
LOCOMO = f"agent.data_path={FIX / 'locomo_fixture.json'}"
# the shipped GPU recipes (their data: the fixtures; Memory-R2 trains on conv-43 / conv-47, which the 2-conversation
# fixture lacks: the fixture's conversations copied under LoCoMo's ten ids) -> what --check says under each schedule
RECIPES = {
    "memory_r1/train_manager.py": ([LOCOMO], None, None),
    "memory_r1/train_answer.py": ([LOCOMO], None, None),
    "sumer/train.py": ([LOCOMO], "sumer keeps KV across turns (its tool loop continues each episode's retained KV",
                       None),
    "memory_r2/train.py": (["agent.locomo_path={r2}"], "memory_r2 keeps KV across turns (agent.continue_chats=true",
                           "the memory_r2 curriculum has stages [0, 1, 2]: use schedule=sync"),
    "memagent/train.py": ([f"agent.data.path={FIX / 'hotpotqa_dev_excerpt.json'}", "agent.data.num_docs=20"],
                          "dynamic_sampling refills from several: use filter_flat_groups or schedule=sync",
                          "dynamic_sampling refills from several: use filter_flat_groups or schedule=sync"),
}
SCHEDULES = {"colocated_async": ["schedule=colocated_async"],
             "split_async": ["schedule=split_async", "rollout_split=4"]}


def test_check_prints_the_split_or_one_refusal_on_8_devices(tmp_path):
    """`--check` on 8 host devices, one child process: the tiny task's split, and every shipped GPU recipe under each
    async schedule: its schedule line, or the one line that refuses it (nothing compiled, nothing written); Memory-R1's
    frozen answer agent on the rollout devices (all 8, or the split's 4)."""
    two = json.loads((FIX / "locomo_fixture.json").read_text())
    ids = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48", "conv-49", "conv-50")
    r2 = tmp_path / "locomo_r2.json"
    r2.write_text(json.dumps([dict(two[i % 2], sample_id=sid) for i, sid in enumerate(ids)]))
    runs = {"tiny": [str(ROOT / "configs" / "tiny.py"), "--check", "--set", "schedule=split_async", "--set",
                     "rollout_split=4"]}
    for cfg, (sets, _, _) in RECIPES.items():
        for sched, ssets in SCHEDULES.items():
            runs[f"{cfg} {sched}"] = [str(ROOT / "configs" / cfg), "--check"] + [
                a for x in [*sets, *ssets, f"out_dir={tmp_path / 'out'}"] for a in ("--set", x.format(r2=r2))]
    p = subprocess.run([sys.executable, "-c", CHECKS, json.dumps(runs)], check=False, cwd=ROOT,
                       env=dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8"),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.split("RESULT", 1)[1])
    tiny = res["tiny"]
    assert tiny["rc"] == 0, tiny
    assert "schedule split_async (max_staleness 1), rollout on devices 0..3, training on the other 4" in tiny["out"]
    assert "mesh: data 1 x fsdp 4 x tensor 1 on 4 cpu device(s)" in tiny["out"]
    assert "rollout: 4 of 4 device(s)" in tiny["out"], tiny["out"]
    lines = {"colocated_async": "schedule colocated_async (max_staleness 1)\n",
             "split_async": "schedule split_async (max_staleness 1), rollout on devices 0..3, training on the other 4"}
    for cfg, (_, colocated, split) in RECIPES.items():
        for sched, refusal in (("colocated_async", colocated), ("split_async", split)):
            r = res[f"{cfg} {sched}"]
            if refusal is None:
                assert r["rc"] == 0 and lines[sched] in r["out"] and "check: ok" in r["out"], (cfg, sched, r)
            else:
                assert r["rc"] == 2 and refusal in r["err"], (cfg, sched, r)
                assert len(r["err"].strip().splitlines()) == 1, r["err"]
    for sched, n in (("colocated_async", 8), ("split_async", 4)):  # the frozen answer agent: the rollout devices only
        assert (f"frozen: answer_agent: frozen copy on each of the policy engine's {n} devices (data_parallel {n}), "
                "4 GiB KV per device (frozen_devices='engine')") in res[f"memory_r1/train_manager.py {sched}"]["out"]
    assert not (tmp_path / "out").exists()
