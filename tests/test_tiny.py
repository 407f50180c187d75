"""The embedded default learns: tiny memory task, shipped warm start, Multi-Conv GRPO on CPU.

Fast tests check the task, tokenizer and teacher traces (they must be exactly the prompts MemAgent builds).
`test_rl_rises_and_shuffled_rewards_do_not` is the learning test: RL from the shipped warm start with the
configs/tiny.py settings (40 steps, seed 0), and the same run with rewards shuffled across groups.

Measured with `python scripts/tiny_seeds.py --steps 40` (CPU, 2 cores; seeds 0, 1, 2), held-out = 256
questions, "sampled" = mean reward of 4 temperature-1 answers per question, before = 0.238 sampled / 0.316 greedy:
  real RL          sampled rise +0.039 / +0.017 / +0.015  (mean +0.023, seed std 0.014); greedy rise
                   +0.008 / -0.004 / -0.035 (no reliable greedy gain in 40 steps)
  shuffled rewards sampled rise -0.199 / -0.138 / -0.078  (mean -0.138, std 0.061): the policy degrades
  real - shuffled  after-RL sampled accuracy gap +0.238 / +0.154 / +0.093 (mean +0.162, std 0.073)
So what is well outside seed noise at this budget is the gap between a real and a broken learning signal
(MIN_GAP = 0.05, below the smallest measured gap 0.093) and the ablation's non-rise (it falls by >= 0.078;
MAX_ABLATION_RISE = 0). The real run's own rise is small: it is asserted positive (MIN_RISE = 0.005, below
the smallest measured +0.0146), which is NOT a margin well outside its noise (std 0.014); see the report.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from memjax.agents import MemAgent
from memjax.engine import Engine
from memjax.model import init_model
from memjax.rewards import memagent_reward
from memjax.tiny.agent import engine_config, memagent_config, model_config
from memjax.tiny.rl import TinyRLConfig, run
from memjax.tiny.task import HELDOUT_SEED, WORDS, TaskConfig, TinyTokenizer, make_sample, make_split
from memjax.tiny.warmstart import default_path, trace_conversations


def test_tokenizer_roundtrip_and_chat_template():
    tok = TinyTokenizer()
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
    tok, task = TinyTokenizer(), TaskConfig(multihop_frac=0.5)
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
    import json
    info = json.loads((default_path() / "warmstart.json").read_text())
    assert 0.2 <= info["dev_accuracy"] <= 0.6


MIN_RISE, MIN_GAP, MAX_ABLATION_RISE = 0.005, 0.05, 0.0


@pytest.mark.slow
def test_rl_rises_and_shuffled_rewards_do_not(tmp_path):
    cfg = dataclasses.replace(TinyRLConfig(), seed=0, eval_every=0, out_dir=str(tmp_path / "rl"))
    assert cfg.steps == 40
    real = run(cfg, log=lambda *a: None)
    rise = real["after"]["accuracy_sampled"] - real["before"]["accuracy_sampled"]
    assert rise >= MIN_RISE, (real["before"], real["after"])
    abl = run(dataclasses.replace(cfg, ablation="shuffle_rewards", out_dir=str(tmp_path / "abl")),
              log=lambda *a: None)
    abl_rise = abl["after"]["accuracy_sampled"] - abl["before"]["accuracy_sampled"]
    assert abl["before"] == real["before"]
    assert abl_rise <= MAX_ABLATION_RISE, (abl["before"], abl["after"])
    assert real["after"]["accuracy_sampled"] - abl["after"]["accuracy_sampled"] >= MIN_GAP
    assert np.isfinite(abl["history"][-1]["grad_norm"]) and abl["history"][-1]["grad_norm"] > 0  # it did update
