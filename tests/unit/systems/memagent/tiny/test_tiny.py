"""The embedded default learns: tiny memory task, shipped warm start, Multi-Conv GRPO on CPU.

Fast tests check the task, tokenizer and teacher traces (they must be exactly the prompts MemAgent builds),
the shipped warm start, that configs/tiny.py runs the tiny system through the one training loop (memjax.train),
the ablations and the flat-group filter. The learning test (`test_rl_rises`, `test_shuffled_rewards_do_not_rise`,
`test_real_rewards_beat_shuffled_ones`, over the module fixtures `real_run` and `shuffled_run`): RL from the shipped warm start with
the configs/tiny.py settings for STEPS steps (seed 0), and the same run with rewards shuffled across groups
(both start from the same weights, so the held-out evaluation before RL is computed once).

Measured with `python scripts/tiny_seeds.py` (CPU, 2 cores; seeds 0, 1, 2; held-out = 256 questions; "sampled"
= mean reward of 4 temperature-1 answers per question; benchmarks/results/tiny_rl_seeds_cpu.{json,png}).
Before RL: sampled 0.443, greedy 0.555 (the same for every seed). Rise after N RL steps, mean +- std over seeds:
                       step 10                    step 20                    step 30
  real rewards         sampled +0.080 +- 0.008    sampled +0.170 +- 0.008    sampled +0.212 +- 0.022
                       greedy  +0.055 +- 0.010    greedy  +0.129 +- 0.014    greedy  +0.178 +- 0.020
  shuffled rewards     sampled -0.121 +- 0.025    sampled -0.189 +- 0.016    sampled -0.269 +- 0.029
                       greedy  -0.155 +- 0.046    greedy  -0.220 +- 0.034    greedy  -0.340 +- 0.053
Those seed-study numbers predate the trainer's training-step lr schedule; with it (configs/tiny.py warm-up 3
training steps), seed 0 after 10 steps: sampled 0.443 -> 0.521 (+0.077), greedy 0.555 -> 0.594 (+0.039).
Since the engine samples by CDF inversion instead of Gumbel-max (memjax/engine/sampler.py: same distribution, another
random stream), 10 steps, seeds 0 / 1 / 2: sampled +0.090 / +0.137 / +0.098 (seed 0 from 0.418), greedy +0.012 /
+0.102 / +0.027 (greedy before RL unchanged, 0.555): the greedy rise after 10 steps is seed-noisy, so the test only
asks that greedy accuracy does not fall.
The test runs STEPS = 10 (about 3 minutes for both runs on 2 cores) and asserts: sampled rise >= 0.04 (5 seed
std below the mean, 5 std above 0; smallest seed +0.070, +0.090 with the inversion sampler), greedy rise >= 0
(smallest seed +0.012), real
minus shuffled after-RL sampled accuracy >= 0.10 (measured +0.20 +- 0.03), and no rise under shuffled rewards
(largest seed -0.096 sampled, -0.105 greedy). Another CPU may take other float paths and so other samples;
the margins are sized for that, not for bit-equality with the numbers above.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from memjax.cli.train import Run, TrainConfig, train
from memjax.core.config import load_config_file
from memjax.engine import Engine
from memjax.model import init_model
from memjax.rewards import memagent_reward
from memjax.rl.ablation import ablate as _ablate
from memjax.rl.batch import Conversation, build_batch
from memjax.systems.memagent.tiny.agent import memagent_config
from memjax.systems.memagent.tiny.system import TinySection
from memjax.systems.memagent.tiny.task import (
    HELDOUT_SEED,
    WORDS,
    TaskConfig,
    TinyTokenizer,
    make_sample,
    make_split,
)
from memjax.systems.memagent.tiny.warmstart import default_path, trace_conversations
from memjax.systems.memagent.workflow import MemAgent
from memjax.tiny.model import engine_config, model_config

pytestmark = pytest.mark.learning


def test_tokenizer_roundtrip_and_chat_template():
    tok = TinyTokenizer(WORDS)
    text = "where is ann ? \\boxed{ rome }"
    assert tok.decode(tok.encode(text)) == text
    assert tok.vocab_size == len(WORDS) and tok.eos_id == tok.endoftext_id
    with pytest.raises(ValueError, match="not in the tiny vocabulary"):
        tok.encode("where is zed ?")
    ids = tok.apply_chat_template([{"role": "user", "content": ["question", [5, 6], "answer"]}])
    assert ids == [tok.ids["<user>"], tok.ids["question"], 5, 6, tok.ids["answer"], tok.eos_id, tok.ids["<assistant>"]]
    assert tok.count_unknown([1, 63, -1]) == 2
    assert memagent_reward(tok.decode(tok.encode("\\boxed{ rome }")), ["rome"]) == 1.0


@pytest.mark.parametrize("index", range(20))
def test_samples_have_a_unique_answer(index):
    task = TaskConfig(multihop_frac=0.5)
    s = make_sample(task, 0, index)
    facts = [f.split() for f in s["context"].split(" . ") if f]
    assert len(s["context"].split()) == 4 * task.num_facts
    where = {f[0]: f[2].rstrip(" .") for f in facts}
    assert len(where) == task.num_facts  # every subject once
    key = s["query"].split()[2]
    ans = where[key]
    if s["hops"] == 2:
        ans = where[ans]
    assert [ans] == s["answers"] and s["final"] == f"\\boxed{{ {ans} }}"
    assert make_sample(task, 0, index) == s  # deterministic


def test_teacher_trace_is_what_memagent_builds():
    """A model forced to emit the teacher trace gets reward 1 and sees exactly the SFT prompts."""
    tok, task = TinyTokenizer(WORDS), TaskConfig(multihop_frac=0.5)
    samples = make_split(task, HELDOUT_SEED, 6)
    convs = [trace_conversations(tok, task, s) for s in samples]
    engine = Engine(init_model(model_config(), 0), engine_config(max_slots=8))
    responses = {tuple(p): r for c in convs for p, r in c}

    class Teacher:  # replaces the engine's output with the teacher response for the exact prompt
        config = engine.config
        stats = engine.stats

        def __init__(self):
            self.pending, self.next_id = {}, 0

        def submit(self, prompt, params):
            rid, self.next_id = self.next_id, self.next_id + 1
            self.pending[rid] = responses[tuple(prompt)]
            return rid

        def step(self):
            from memjax.engine.config import Completion
            out = [Completion(r, [0.0] * len(r), "stop", request_id=rid) for rid, r in self.pending.items()]
            self.pending = {}
            return out

    res = MemAgent(Teacher(), tok, memagent_config(task), stop_token_ids=(tok.eos_id,)).run(samples)
    assert res.rewards == [1.0] * len(samples)
    assert [t["memories"] for t in res.traces] == [s["memories"] for s in samples]


def test_shipped_warmstart_is_partial():
    info = json.loads((default_path() / "warmstart.json").read_text())
    assert 0.2 <= info["dev_accuracy"] <= 0.6
    assert info["model"]["hidden_size"] == model_config().hidden_size  # made by the current warmstart.train


CONFIG = Path(__file__).resolve().parents[5] / "configs" / "tiny.py"


def tiny_config(**changes) -> TrainConfig:
    """configs/tiny.py (what `make demo` runs), with TrainConfig / agent-section changes (keys `agent.X`)."""
    cfg = load_config_file(CONFIG)
    agent = {k[6:]: changes.pop(k) for k in list(changes) if k.startswith("agent.")}
    return dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, **agent), **changes)


def test_config_file_runs_the_tiny_system():
    cfg = load_config_file(CONFIG)
    assert isinstance(cfg.agent, TinySection) and cfg.agent.name == "tiny"
    assert (cfg.prompts_per_step, cfg.agent.group_size, cfg.filter_flat_groups) == (32, 8, True)


def test_ablations_keep_reward_statistics():
    convs = [Conversation([1, 2], [3], [-0.5], sample=i, group=i // 4, turn=0) for i in range(8)]
    batch = build_batch(convs, [1, 0, 0, 0, 1, 1, 0, 1], [i // 4 for i in range(8)])
    rng = np.random.default_rng(0)
    shuffled = _ablate(batch, "shuffle_rewards", rng)
    assert sorted(shuffled.reward) == sorted(batch.reward) and shuffled.reward.dtype == np.float32
    flat = _ablate(batch, "zero_advantages", rng)
    assert np.all(flat.reward == batch.reward.mean())
    assert _ablate(batch, "none", rng) is batch
    with pytest.raises(ValueError, match="ablation"):
        TrainConfig(ablation="flip")


def test_flat_groups_are_not_trained_on(tmp_path):
    """With every reward equal (zero_advantages) the filter leaves nothing: no update, weights unchanged."""
    cfg = tiny_config(steps=1, prompts_per_step=4, eval_every=0, ablation="zero_advantages",
                      out_dir=str(tmp_path), **{"agent.heldout_size": 8, "agent.eval_samples": 0})
    res = train(cfg)
    row = res["history"][0]
    assert row["trained_samples"] == 0 and "grad_norm" not in row
    assert res["after"] == {**res["before"], "step": 1}


# Learning test: configs/tiny.py's settings for STEPS steps; thresholds from the seed study (module docstring).
STEPS = 10
MIN_RISE_SAMPLED, MIN_RISE_GREEDY, MIN_GAP_SAMPLED = 0.04, 0.0, 0.10
MAX_ABLATION_RISE = 0.0


def _weights(run: Run) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(run.model, nnx.Param))]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """RL from the shipped warm start with real rewards: (result, its weights before RL)."""
    run = Run(tiny_config(steps=STEPS, seed=0, eval_every=0, out_dir=str(tmp_path_factory.mktemp("rl") / "real")))
    start = _weights(run)
    run.run()
    return run.summary, start


@pytest.fixture(scope="module")
def shuffled_run(real_run, tmp_path_factory):
    """The same run with rewards shuffled across groups: (result, its weights before RL). The held-out evaluation
    before RL is the real run's: both start from the same weights (checked by test_shuffled_rewards_do_not_rise),
    so that row is handed over instead of scoring them again (Run.run evaluates at step 0 only while evals is
    empty). Each run is its own fixture, so one test's set-up holds one run (pytest-timeout counts set-up)."""
    cfg = tiny_config(steps=STEPS, seed=0, eval_every=0, ablation="shuffle_rewards",
                      out_dir=str(tmp_path_factory.mktemp("rl") / "shuffled"))
    run = Run(cfg)
    start = _weights(run)
    run.evals.append(dict(real_run[0]["before"]))
    run.run()
    return run.summary, start


@pytest.mark.slow(seconds=270)  # the module: both runs (set-up of the first two tests); 79 s alone on 2 cores, 2026-11-29
def test_rl_rises(real_run):
    b, a = real_run[0]["before"], real_run[0]["after"]
    assert b["step"] == 0 and a["step"] == STEPS
    assert a["accuracy_sampled"] - b["accuracy_sampled"] >= MIN_RISE_SAMPLED, (b, a)
    assert a["accuracy"] - b["accuracy"] >= MIN_RISE_GREEDY, (b, a)


def test_shuffled_rewards_do_not_rise(real_run, shuffled_run):
    (real, start), (abl, abl_start) = real_run, shuffled_run
    assert len(start) == len(abl_start) and all(np.array_equal(x, y) for x, y in zip(start, abl_start))
    assert abl["before"] == real["before"] and abl["after"]["step"] == STEPS
    assert all("grad_norm" in h for h in abl["history"])  # the ablation did update on every step
    for k in ("accuracy_sampled", "accuracy"):
        assert abl["after"][k] - abl["before"][k] <= MAX_ABLATION_RISE, (abl["before"], abl["after"])


def test_real_rewards_beat_shuffled_ones(real_run, shuffled_run):
    real, abl = real_run[0], shuffled_run[0]
    assert real["after"]["accuracy_sampled"] - abl["after"]["accuracy_sampled"] >= MIN_GAP_SAMPLED


# README.md states what `make demo` prints (issue 50). The demo is configs/tiny.py for 30 steps with an evaluation every
# 10; `real_run` is the same run (seed 0, same settings; the lr is constant after its warm-up and evaluations draw no
# training randomness) stopped at step 10, so its before / after rows are the demo's step-0 and step-10 lines. The
# README numbers were printed on this repository's 2-core CPU; another CPU may take other float paths (module
# docstring), hence the tolerance.
README_DEMO = re.compile(r"sampled ([\d.]+) → ([\d.]+) \(step 10\) → ([\d.]+) \(step 30\); greedy ([\d.]+) → ([\d.]+) "
                         r"\(step 10\) → ([\d.]+) \(step 30\)")
DEMO_TOLERANCE = 0.03


def test_readme_demo_numbers_are_what_the_demo_prints(real_run):
    text = " ".join((Path(__file__).resolve().parents[5] / "README.md").read_text().split())
    m = README_DEMO.search(text)
    assert m, "README.md no longer states the demo's held-out numbers in the form this test reads"
    s0, s10, _, g0, g10, _ = (float(x) for x in m.groups())
    b, a = real_run[0]["before"], real_run[0]["after"]
    for said, got in ((s0, b["accuracy_sampled"]), (s10, a["accuracy_sampled"]), (g0, b["accuracy"]),
                      (g10, a["accuracy"])):
        assert abs(said - got) <= DEMO_TOLERANCE, (m.group(0), b, a)
