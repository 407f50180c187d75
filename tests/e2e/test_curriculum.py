"""Curriculum stages in the one training loop (issue 22, item 5; memjax/run/curriculum.py): on a toy two-stage
system with a scripted held-out metric, each stage's best checkpoint is the scripted best, the next stage
starts from exactly its weights (engine included, optimizer reset, KL reference = those weights, learning-rate
schedule restarted), and runs stopped in stage 0 or stage 1 and resumed reach the uninterrupted run's state.

The model is the golden tiny Qwen2 (tests/fixtures/golden); its reward carries no signal worth learning, so an
entropy bonus and a KL term keep the parameters (and so the checks) moving."""

from dataclasses import dataclass

import jax
import numpy as np
import pytest
from conftest import golden_dir
from flax import nnx

from memjax import load_hf
from memjax.agents import Request, Workflow
from memjax.cli.train import Run, TrainConfig
from memjax.core.config import ConfigError
from memjax.engine import EngineConfig, SamplingParams
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.systems import AgentSection, CountingStream, System, register
from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH

pytestmark = pytest.mark.e2e

SP = SamplingParams(temperature=1.0, max_tokens=3)
# held-out score after k training steps; stage 0 = steps 1-3 (best: 2), stage 1 = steps 4-6 (best: 5)
SCRIPT = (0.0, 0.5, 0.9, 0.3, 0.2, 0.8, 0.1)
BATCH = 2


class OneTurn(Workflow):
    def start(self, traj, prompt):
        return [Request(list(prompt), SP, is_final=True)]

    def react(self, traj, request, completion):
        traj.state = completion.token_ids
        return []

    def reward(self, traj):
        return float(bool(traj.state) and traj.state[0] % 2 == 0)


class _Tracked(CountingStream):
    """The toy's stream; with several processes the loop reads its shard, which `evaluate` then reads instead."""

    def __init__(self, system, *args):
        super().__init__(*args)
        self.system = system

    def shard(self, lo, hi):
        self.system.stream = super().shard(lo, hi)
        return self.system.stream


@dataclass(frozen=True)
class StagedSection(AgentSection):
    name: str = "staged_toy"
    group_size: int = 4
    temperature: float = 1.0
    stage_starts: tuple[int, ...] = (0, 3)  # first 0-based step of each stage


@register
class StagedSystem(System):
    """Two stages; `evaluate` returns SCRIPT[steps done], read off the stream position (restored on resume)."""

    name, section = "staged_toy", StagedSection

    def load_model(self, source):
        return load_hf(golden_dir("untied_kv2")), None

    def engine_config(self, default):
        return EngineConfig(max_slots=8, page_size=4, window=64, prefill_slots=4, prefill_chunk=16, progress=False)

    def stage(self, step):
        return sum(step >= s for s in self.cfg.stage_starts) - 1

    def train_data(self, batch_size, seed):
        assert batch_size == BATCH
        self.stream = _Tracked(self, lambda i, n: [[3 + s % 4, 5, 7 + s % 3, 9] for s in range(i, i + n)],
                               batch_size)
        return self.stream

    def workflow(self, engine, tokenizer, *, train=True):
        return OneTurn()

    def evaluate(self, engine, tokenizer):
        return {"score": SCRIPT[self.stream.pos // BATCH]}


def _cfg(out, **kw):
    base = dict(agent=StagedSection(), out_dir=str(out), steps=6, prompts_per_step=BATCH, eval_every=1,
                checkpoint_every=1, select_metric="score",
                loss=LossConfig(entropy_coef=0.01, kl_coef=0.01),
                optim=OptimConfig(lr=1e-2, warmup_steps=2),
                update=UpdateConfig(micro_rows=8, pad_tokens=16, ref_dtype="float32"))
    return TrainConfig(**{**base, **kw})


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _params(run):
    return _leaves(nnx.state(run.model, nnx.Param))


def _same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def _stop(run):
    """A kill after the last writes landed: nothing else of close() runs (no pruning), the lock is freed."""
    run.ckpt.finish()
    run.curriculum.best.flush()
    run._lock.release()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    run = Run(_cfg(out))
    run.curriculum.check_metric(run.evaluate())
    snaps, hist, at_restart = [], [], {}
    while run.step < run.cfg.steps:
        hist.append(run.next_step())
        snaps.append(_params(run))
        if run.step == 3:  # just after stage 1 started
            at_restart = {"opt": _leaves(run.trainer.opt_state), "ref": _leaves(run.trainer.ref_params),
                          "engine": _leaves(run.engine._params)}
    state = {"params": _params(run), "opt": _leaves(run.trainer.opt_state), "evals": list(run.evals),
             "best": run.curriculum.summary()}
    run.close()
    return out, snaps, hist, at_restart, state


def test_stage_starts_from_the_previous_stage_best(uninterrupted):
    out, snaps, hist, at_restart, state = uninterrupted
    assert state["best"] == {"0": {"step": 2, "value": 0.9}, "1": {"step": 5, "value": 0.8}}
    assert [e["step"] for e in state["evals"]] == [0, 1, 2, 3, 4, 5, 6]
    assert hist[2]["grad_norm"] > 0 and not _same(snaps[1], snaps[0])  # step 3 trained and moved the weights...
    assert _same(snaps[2], snaps[1])  # ...and stage 1 started from step 2's (the best) weights exactly
    assert _same(snaps[3], snaps[2]) and not _same(snaps[4], snaps[3])  # step 4: lr 0, the warm-up's first step
    assert all((x == 0).all() for x in at_restart["opt"])  # fresh AdamW state (moments and count)
    for ref, p in zip(at_restart["ref"], snaps[1]):  # KL reference = the restored weights, in ref_dtype
        np.testing.assert_array_equal(ref, p.astype(ref.dtype))
    for e, p in zip(at_restart["engine"], snaps[1]):  # the engine got them
        np.testing.assert_array_equal(e, p.astype(e.dtype))
    assert hist[3]["logp_mismatch_max"] < 1e-4  # and step 4 rolled out with them
    assert [h["lr"] for h in hist] == pytest.approx([0.0, 5e-3, 1e-2, 0.0, 5e-3, 1e-2])  # warm-up per stage
    # retained: the two bests; the superseded ones (steps 1 and 4) were deleted once no checkpoint recorded them
    assert sorted(int(p.name) for p in (out / "checkpoints_best").iterdir() if p.name.isdigit()) == [2, 5]


def test_stop_in_stage_0_resume_crosses_the_boundary_like_the_uninterrupted_run(uninterrupted, tmp_path):
    state = uninterrupted[-1]
    first = Run(_cfg(tmp_path))
    first.curriculum.check_metric(first.evaluate())
    for _ in range(2):
        first.next_step()
    _stop(first)
    resumed = Run(_cfg(tmp_path))
    assert resumed.step == 2 and resumed.curriculum.best.entries[0]["step"] == 2
    while resumed.step < 6:
        resumed.next_step()
    got = {"params": _params(resumed), "opt": _leaves(resumed.trainer.opt_state), "evals": list(resumed.evals),
           "best": resumed.curriculum.summary()}
    resumed.close()
    assert got["best"] == state["best"] and got["evals"] == state["evals"]
    assert _same(got["params"], state["params"]) and _same(got["opt"], state["opt"])


def test_stop_in_stage_1_between_a_best_and_its_checkpoint(uninterrupted, tmp_path):
    """checkpoint_every=4: train-state checkpoints at 3 (stage end) and 4; the best at 5 is written, then the run
    stops. The resume (from 4, in stage 1) drops best 5, reloads only the KL reference, and replays."""
    state = uninterrupted[-1]
    first = Run(_cfg(tmp_path, checkpoint_every=4))
    first.curriculum.check_metric(first.evaluate())
    for _ in range(5):
        first.next_step()
    _stop(first)
    best_dir = tmp_path / "checkpoints_best"
    assert sorted(int(p.name) for p in best_dir.iterdir() if p.name.isdigit()) == [2, 4, 5]
    resumed = Run(_cfg(tmp_path, checkpoint_every=4))
    assert resumed.step == 4 and resumed.curriculum.best.store.all_steps() == [2, 4]
    while resumed.step < 6:
        resumed.next_step()
    got = {"params": _params(resumed), "evals": list(resumed.evals), "best": resumed.curriculum.summary()}
    resumed.close()
    assert got["best"] == state["best"] and got["evals"] == state["evals"]
    assert _same(got["params"], state["params"])  # the KL reference was stage 0's best again


def test_several_stages_need_a_metric_to_restart(tmp_path):
    with pytest.raises(ConfigError, match="2 curriculum stages in 6 steps and stage_restart=best: set select_metric"):
        Run(_cfg(tmp_path, select_metric=""))
    with pytest.raises(ValueError, match="stage_optimizer must be one of"):
        _cfg(tmp_path, stage_optimizer="best")


@pytest.mark.slow(seconds=85)  # 2 real processes (memjax.launch) train 6 steps: 81 s on 2 busy cores
def test_two_processes_hand_off_like_one(uninterrupted, tmp_path):
    """`memjax.launch --nproc 2 --devices-per-proc 2 -- memjax.train` of the same two-stage run: the same
    best checkpoint per stage (every process takes the same decision from the same, gathered, evaluation),
    stage 1 started from stage 0's best with the warm-up restarted, checkpoints_best/ written once, and the
    per-step losses of the one-process run."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    _, _, hist, _, state = uninterrupted
    here = Path(__file__).resolve().parent  # the child imports _cfg from here and conftest from tests/
    out = tmp_path / "two"
    cfg = tmp_path / "staged_two.py"   # the toy system registers itself in each process on import
    cfg.write_text(f"import sys\nsys.path[:0] = [{str(here)!r}, {str(here.parent)!r}]\nfrom test_curriculum import _cfg\n"
                   f"config = _cfg({str(out)!r})\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC",
                                                                      "JAX_PROCESS_ID", "SLURM_", "OMPI_"))}
    env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-m", "memjax.launch", "--nproc", "2", "--devices-per-proc", "2", "--",
                        "memjax.train", str(cfg)], cwd=here.parents[1], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((out / "result.json").read_text())
    assert res["stage_best"] == state["best"] == {"0": {"step": 2, "value": 0.9}, "1": {"step": 5, "value": 0.8}}
    assert [(e["step"], e["score"]) for e in res["evals"]] == [(e["step"], e["score"]) for e in state["evals"]]
    assert [h["lr"] for h in res["history"]] == pytest.approx([h["lr"] for h in hist])   # warm-up per stage
    for a, b in zip(hist, res["history"]):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4, abs=1e-6), (a["step"], a["loss"], b["loss"])
    assert sorted(int(d.name) for d in (out / "checkpoints_best").iterdir() if d.name.isdigit()) == [2, 5]
    assert "[0] best of stage 0 so far: step 2" in p.stdout and "[1] best of stage" not in p.stdout

