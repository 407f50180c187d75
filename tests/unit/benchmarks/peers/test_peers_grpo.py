"""benchmarks.peers.grpo: memjax's GRPO step (engine rollout + trainer update) at tiny shapes, always; bad arguments
and a missing peer environment give one-line errors; with a peer environment made by scripts/make_peer_venv.sh (not
made in CI), a --quick run against the peer's own GRPO trainer gives timed steps and ratios."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

pytestmark = pytest.mark.peers

ROOT = Path(__file__).resolve().parents[4]
TUNIX = ROOT / ".venv-peers" / "tunix" / "bin" / "python"
TRL = ROOT / ".venv-peers" / "trl" / "bin" / "python"


def _run(*args, timeout=900):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "benchmarks.peers.grpo", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_reward():
    from benchmarks.peers.grpo import reward

    assert reward([2, 3, 4, 5]) == 0.5 and reward([1, 3]) == 0.0 and reward([]) == 0.0 and reward([0]) == 1.0


def test_memjax_step_updates_the_policy_and_the_engine():
    from benchmarks.peers.grpo import GRPOSettings, MemjaxGRPO, make_model, make_prompts

    s = GRPOSettings(prompts=2, group=2, prompt_len=8, new=8, lr=1e-3)
    model = make_model(10.0, 512)
    before = jax.tree.map(np.asarray, nnx.state(model, nnx.Param))
    step = MemjaxGRPO(model, make_prompts(s, 512), s)
    rewards = []
    for _ in range(4):  # until a group's rewards differ (a flat batch has zero advantages: no gradient)
        st = step.step()
        assert st["completion_tokens"] == 2 * 2 * 8 and st["optimizer_steps"] == 1
        assert st["rollout_s"] > 0 and st["update_s"] > 0 and st["total_s"] >= st["rollout_s"] + st["update_s"] - 1e-6
        rewards.append(st["reward_mean"])
        if st["grad_norm"] > 0:
            break
    assert st["grad_norm"] > 0, rewards
    after = jax.tree.map(np.asarray, nnx.state(model, nnx.Param))
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    # the engine samples from the updated weights: its copy equals the trainer's
    eng = jax.tree.leaves(step.engine._params)
    assert all(np.array_equal(np.asarray(e, np.float32), a) for e, a in zip(eng, jax.tree.leaves(after)))


@pytest.mark.e2e
def test_bad_arguments_and_missing_environment(tmp_path):
    for args in (["--peer", "nope"], ["--peer", "tunix", "--group", "1"], ["--peer", "trl", "--repeats", "0"]):
        p = _run(*args)
        assert p.returncode == 2 and "error" in p.stderr, (args, p.stderr[-500:])
    p = _run("--peer", "trl", "--python", str(tmp_path / "none" / "python"))
    assert p.returncode == 1 and "scripts/make_peer_venv.sh trl" in p.stderr


@pytest.mark.slow(seconds=100)  # each peer: ~100 s measured on the 2 shared cores at load ~10 (tunix compiles its
# sampler and train step, TRL starts torch); skipped without the peer's environment
@pytest.mark.parametrize("peer,python", [
    pytest.param("tunix", TUNIX, marks=pytest.mark.skipif(
        not TUNIX.exists(), reason="no tunix environment: scripts/make_peer_venv.sh tunix makes it (not made in CI: "
                                   "it installs a second jax from PyPI)")),
    pytest.param("trl", TRL, marks=pytest.mark.skipif(
        not TRL.exists(), reason="no trl environment: scripts/make_peer_venv.sh trl makes it (not made in CI: it "
                                 "installs torch from PyPI)"))])
@pytest.mark.e2e
def test_quick_run_against_peer(tmp_path, peer, python):
    out = tmp_path / "grpo.json"
    p = _run("--peer", peer, "--quick", "--out", str(out))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["settings"]["prompts"] == 2 and res["settings"]["group"] == 2 and res["repeats"] == 1
    for side in (res["memjax"], res["peer_steps"]):
        (st,) = side["steps"]
        assert st["rollout_s"] > 0 and st["update_s"] > 0 and st["completion_tokens"] == 2 * 2 * 8
        assert 0.0 <= st["reward_mean"] <= 1.0
    assert all(v > 0 for v in res["ratio_peer_over_memjax_min"].values())
