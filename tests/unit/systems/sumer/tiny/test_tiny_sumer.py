"""The tiny searchable-memory task (agent.name = tiny_sumer): task invariants, the format's parser, the teacher
episode equal to what SumerWorkflow records (reward 1, masks, continuation on the real engine), the shipped
warm start, and a short learning check: GRPO updates on one rollout batch follow the rewards, shuffled rewards
do not. The full learning result (20 RL steps through `python -m memjax.train configs/sumer/tiny.py`, 3 seeds,
real vs shuffled rewards) is measured by scripts/tiny_sumer_seeds.py and quoted in configs/sumer/tiny.py:
held-out greedy reward +0.193 +- 0.047 (real) vs -0.344 +- 0.089 (shuffled) after 20 steps."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memjax.agents import run_workflow
from memjax.agents.toolcall import CallError, ToolCall
from memjax.engine import Engine
from memjax.systems.sumer.tiny.system import TinySumerSection, TinySumerSystem
from memjax.systems.sumer.tiny.agent import workflow
from memjax.systems.sumer.tiny.task import (HELDOUT_SEED, PEOPLE, WORDS, TinySumerFormat, TinySumerTask, make_sample,
                                    make_split, teacher_turns)
from memjax.systems.sumer.tiny.warmstart import INFO, default_path, episode_row

pytestmark = pytest.mark.learning

FMT = TinySumerFormat()


@pytest.mark.parametrize("index", range(12))
def test_samples_need_a_search_and_keyword_finds_exactly_the_person(index):
    s = make_sample(TinySumerTask(), 0, index)
    words = s.question.split()
    key = words[2]
    recs = s.tools.retriever.records
    about = [r for r in recs if r.content.split()[0] == key]
    assert [m for w in s.tools.search(key, mode="keyword").windows for m in w] == about
    if "session" in words:
        assert len(about) >= 2
        hit = s.tools.search(key, mode="keyword", session=int(words[5]))
        assert [m.content for w in hit.windows for m in w] == [f"{key} in {s.gold}"]
    else:
        assert [r.content for r in about] == [f"{key} in {s.gold}"]
    answer = [r for r in recs if r.id in s.evidence]  # the evidence is the one record that answers
    assert len(s.evidence) == 1 and [r.content for r in answer] == [f"{key} in {s.gold}"]
    if "session" in words:
        assert answer[0].session == int(words[5])
    assert make_sample(TinySumerTask(), 0, index).question == s.question  # deterministic
    memory_words = [w for w in WORDS if not w.startswith("<")]  # what records and their metadata are made of
    assert len(WORDS) <= 64 and all(p not in w for p in PEOPLE for w in memory_words if w != p)


def test_parser():
    calls, tagged = FMT.parse(FMT.encode("<call> search ann session 2 <call> submit rome <call> search <call> ? "
                                         "<call> search ann session <call> search session 3 <end>"))
    assert tagged and calls[:2] == [ToolCall("search_memory", {"query": "ann", "mode": "keyword", "session": 2}),
                                    ToolCall("submit_answer", {"answer": "rome"})]
    assert all(isinstance(c, CallError) for c in calls[2:]) and len(calls) == 6
    assert FMT.parse(FMT.encode("ann rome <end>")) == ([], False)
    assert FMT.tool_turn(["none"], closed=False) == FMT.encode("<end> <tool> none <end> <assistant>")


@pytest.fixture(scope="module")
def warm():
    """The shipped warm start on one engine (the system's engine config), shared by the tests below."""
    system = TinySumerSystem(TinySumerSection(heldout_size=32, eval_samples=0))
    model, tok = system.load_model(None)
    return system, model, tok, Engine(model, system.engine_config(None))


@pytest.mark.slow(seconds=130)  # the module: ~310 s on 2 cores at load ~10 (engine compiles for the tiny SUMER task)
def test_teacher_episode_is_what_the_workflow_records(warm):
    """A policy that emits the teacher's turns (scripted through the real engine's continuation) gets reward 1
    and exactly the warm-start row and mask. The engine is the module's (its weights do not matter: every
    generated turn is replaced by the teacher's)."""
    samples = make_split(TinySumerTask(), HELDOUT_SEED, 6)
    engine = warm[3]

    class Teacher:  # wraps the engine: replaces each generated turn by the teacher's (ids + log-probs 0)
        def __init__(self, e):
            self.e, self.config, self.stats = e, e.config, e.stats

        def submit(self, prompt, params, parent=None, retain=False):
            return self.e.submit(prompt, params, parent=parent, retain=retain)

        def step(self):
            out = []
            for c in self.e.step():
                full = (c.kv.tokens[: c.prompt_len])
                s = next(x for x in samples if FMT.prompt(x.question) == full[: len(FMT.prompt(x.question))])
                k = full.count(FMT.ids["<assistant>"]) - 1
                c.token_ids = FMT.encode(teacher_turns(s)[k])
                c.logprobs = [0.0] * len(c.token_ids)
                c.kv.tokens = full + c.token_ids
                c.kv.n_cached = min(c.kv.n_cached, len(full) - 1)
                out.append(c)
            return out

        def release(self, c):
            self.e.release(c)

        def abort(self, rids):
            self.e.abort(rids)

    res = run_workflow(Teacher(engine), workflow(0.0), samples, progress=False)
    assert res.rewards == [1.0] * 6 and res.stats["end_submitted"] == 1.0
    b = res.batch
    for i, s in enumerate(samples):
        row, mask = episode_row(FMT, s)
        n = int(b.lengths[i])
        assert b.input_ids[i, :n].tolist() == row and b.loss_mask[i, :n].tolist() == mask
    assert engine.retained_pages == 0


@pytest.fixture(scope="module")
def rollout(warm):
    """One sampled rollout batch of the warm start (16 questions x group 8, seed 1): the splice check and both
    arms of the learning check read it (a rollout is a function of the weights, samples and seeds only)."""
    system, _, tok, engine = warm
    return run_workflow(engine, system.workflow(engine, tok), make_split(TinySumerTask(), 5, 16), group_size=8,
                        seed=1)


def test_shipped_warmstart(warm):
    path = default_path()
    info = json.loads((path / INFO).read_text())
    size = sum(f.stat().st_size for f in path.iterdir())
    assert size < 600_000 and info["dev_accuracy"] >= info["target"]
    system, _, tok, engine = warm
    ev = system.evaluate(engine, tok)
    assert 0.2 < ev["accuracy"] < 0.95 and np.isfinite(ev["reward"])


def test_sampled_episodes_from_the_warm_start_are_spliced_exactly(warm, rollout):
    """Sampled multi-turn episodes: the engine's log-probs (turns continued on retained KV pages) equal the
    trainer's on the recorded rows; tool-turn ids are masked; continuation saved prefill."""
    from memjax.rl.trainer import Trainer, UpdateConfig

    model = warm[1]
    res = rollout
    b = res.batch
    assert res.stats["mean_searches"] > 0.5 and res.stats["engine_continued_tokens"] > 0
    lp = Trainer(model, update=UpdateConfig(micro_rows=128, pad_tokens=64)).logprobs(model, b)
    m = b.loss_mask > 0
    assert np.abs(lp[m] - b.old_logp[m]).max() < 1e-4
    tool = FMT.ids["<tool>"]
    assert (b.loss_mask[b.input_ids == tool] == 0).all() and (b.input_ids == tool).sum() > 0


@pytest.mark.parametrize("ablation", ["none", "shuffle_rewards"])
def test_grpo_updates_follow_the_rewards(warm, rollout, ablation):
    """The short learning check (the seed study with full RL runs is in the module docstring of
    configs/sumer/tiny.py and the report): GRPO updates (the recipe's mean/std advantages, clip 0.2/0.28) on
    one rollout batch of the warm start widen the log-prob margin between the submitted answers that were
    right and those that were wrong; with the batch's rewards shuffled they do not."""
    from memjax.rl.advantages import AdvantageConfig, with_advantages
    from memjax.rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig

    model, _ = warm[0].load_model(None)   # a fresh copy of the warm start: the updates change it in place
    res = rollout
    b = res.batch
    right = np.asarray(res.rewards) > 0
    assert 0.1 < right.mean() < 0.6
    mask = b.loss_mask > 0
    answer = np.zeros_like(mask)  # the answer word: the last trained token before the closing <end>
    for i in range(b.num_rows):
        answer[i, np.flatnonzero(mask[i])[-2]] = True
    adv = AdvantageConfig(norm="mean_std")
    trainer = Trainer(model, OptimConfig(lr=1e-4, warmup_steps=0, weight_decay=0.0),
                      LossConfig(clip_low=0.2, clip_high=0.28), UpdateConfig(micro_rows=128, pad_tokens=64), adv)

    def margin():
        lp = trainer.logprobs(model, b)
        return lp[answer & right[:, None]].mean() - lp[answer & ~right[:, None]].mean()

    before = margin()
    if ablation == "shuffle_rewards":
        b = b.replace(reward=np.random.default_rng(0).permutation(b.reward).astype(np.float32))
    for k in range(3):
        trainer.update(with_advantages(b, adv), seed=k)
    gain = margin() - before
    if ablation == "none":
        assert gain > 0.05, gain
    else:
        assert gain < 0.02, gain
