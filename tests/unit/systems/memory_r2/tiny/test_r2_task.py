"""The tiny Memory-R2 task: generation, the op grammar and the frozen reader, per-session rewards with the
compression penalty on hand-computed episodes, and the LoGo bookkeeping of TinyR2Workflow on a scripted engine
(local chains from the anchor's snapshot, local group ids, global banks untouched, LoGo credit per unit);
`replay_reward` equals the workflow's reward and outcome-only credit gives every session of a rollout one
advantage; the many-session shapes fit the window."""

import numpy as np
import pytest

from memjax.agents import run_workflow
from memjax.systems.memory_r2.workflow import SESSION_STRIDE
from memjax.memory import MemoryBank
from memjax.systems.memory_r2.system import logo_unit_advantages
from memjax.tiny.model import WINDOW
from memjax.systems.memory_r2.tiny.agent import TinyR2Workflow
from memjax.systems.memory_r2.tiny.task import (LOCATION_RELS, R2_WORDS, R2TaskConfig, apply_ops, bank_text,
                                 case_of, correct_op, make_r2_sample, parse_ops, prompt_text, r2_tokenizer, read,
                                 replay_reward, teacher_trace)

from scripted_engine import ScriptedEngine


def _fact(text, case="new"):
    k, rel, p, _ = text.split()
    return {"text": text, "subject": k, "rel": rel, "place": p, "case": case}


# Two sessions: ann is located, chit-chat about bob; then ann moves and cal is new.
EPISODE = {"sessions": [[_fact("ann in rome ."), _fact("bob likes oslo .", "noise")],
                        [_fact("ann in lima .", "move"), _fact("cal in kiev .")]],
           "questions": [{"question": "where is ann ?", "key": "ann", "answer": "lima", "session": 1},
                         {"question": "where is cal ?", "key": "cal", "answer": "kiev", "session": 1}],
           "coins": [[0.0, 0.0], [0.0, 0.0]], "seed": 5, "index": 0}


def test_vocabulary_and_samples():
    tok = r2_tokenizer()
    assert len(R2_WORDS) == len(set(R2_WORDS)) <= 64
    cfg = R2TaskConfig()
    samples = [make_r2_sample(cfg, 1, i) for i in range(300)]
    assert make_r2_sample(cfg, 1, 7) == samples[7] and make_r2_sample(cfg, 2, 7) != samples[7]
    right = total = 0
    rels = {"in": 0, "to": 0, "likes": 0}
    for s in samples:
        last = {}
        for t, facts in enumerate(s["sessions"]):
            for f in facts:
                rels[f["rel"]] += 1
                assert f["case"] == ("noise" if f["rel"] == "likes" else "move" if f["subject"] in last else "new")
                if f["rel"] in LOCATION_RELS:
                    # a move (`to`) is about someone located before; `in` introduces a new person
                    assert (f["subject"] in last) == (f["rel"] == "to")
                    last[f["subject"]] = (f["place"], t)
        assert {q["key"]: (q["answer"], q["session"]) for q in s["questions"]} == last
        bank = MemoryBank(seed=0)
        for facts in s["sessions"]:  # worst case for the window: every fact added
            ids = tok.apply_chat_template([{"role": "user", "content": prompt_text(bank, facts)}])
            assert len(ids) + cfg.max_response_tokens <= WINDOW
            apply_ops(bank, facts, ["add"] * len(facts))
        bank = MemoryBank(seed=0)
        for facts in s["sessions"]:  # the correct ops answer every question
            apply_ops(bank, facts, [correct_op(bank.copy(), f) for f in facts[:1]] + [])
            for f in facts[1:]:
                apply_ops(bank, [f], [correct_op(bank, f)])
        assert all(read(bank, q["key"]) == q["answer"] for q in s["questions"])
        for p, ops in teacher_trace(cfg, s):
            assert tok.decode(tok.encode(p)) == p and parse_ops(ops, cfg.facts_per_session) is not None
        right += sum(c < cfg.teacher_correct for row in s["coins"] for c in row)
        total += cfg.sessions * cfg.facts_per_session
    assert 0.23 < right / total < 0.37  # teacher_correct 0.3
    assert min(rels.values()) > 0.1 * sum(rels.values())
    # move_rel = "in": a move reads like a new person; only the bank tells them apart
    assert all(f["rel"] in ("in", "likes") for i in range(50)
               for ss in make_r2_sample(R2TaskConfig(move_rel="in"), 1, i)["sessions"] for f in ss)
    with pytest.raises(ValueError, match="move_rel"):
        R2TaskConfig(move_rel="likes")
    with pytest.raises(ValueError, match="noise_prob"):
        R2TaskConfig(noise_prob=1.5)
    with pytest.raises(ValueError, match="window"):
        R2TaskConfig(sessions=5, facts_per_session=3)


def test_ops_reader_and_cases_by_hand():
    bank = MemoryBank(seed=0)
    s0, s1 = EPISODE["sessions"]
    assert [case_of(bank, f) for f in s0] == ["new", "noise"]
    assert apply_ops(bank, s0, ["add", "skip"]) == 0 and read(bank, "ann") == "rome" and bank.words() == 3
    assert [case_of(bank, f) for f in s1] == ["move", "new"]
    stale = bank.copy()
    apply_ops(stale, s1, ["add", "add"])  # the classic mistake: the stale place stays first
    assert read(stale, "ann") == "rome" and read(stale, "cal") == "kiev"
    assert apply_ops(bank, s1, ["update", "update"]) == 1  # no cal record to update: a counted no-op
    assert read(bank, "ann") == "lima" and read(bank, "cal") == "none" and read(bank, "bob") == "none"
    assert prompt_text(bank, s1) == "memory ann in lima . session ann in lima . cal in kiev . op"
    assert parse_ops("add skip", 2) == ["add", "skip"]
    assert parse_ops("add", 2) is None and parse_ops("add in", 2) is None and parse_ops("", 2) is None
    # the teacher with every coin below teacher_correct is the correct policy
    assert [ops for _, ops in teacher_trace(R2TaskConfig(), EPISODE)] == ["add skip", "update add"]
    bad = dict(EPISODE, coins=[[0.9, 0.9], [0.9, 0.9]])
    # the teacher's mistakes follow the episode's case: ann's move is `add`ed although the bank lacks ann
    assert [ops for _, ops in teacher_trace(R2TaskConfig(), bad)] == ["skip add", "add skip"]
    # a move worded `K to P .`: updates a location record of either wording, and is read as a location
    to = _fact("ann to oslo .")
    assert case_of(bank, to) == "move" and case_of(MemoryBank(seed=0), to) == "new"
    apply_ops(bank, [to], ["update"])
    assert read(bank, "ann") == "oslo" and bank_text(bank) == "ann to oslo ."
    apply_ops(bank, [_fact("ann in rome .")], ["update"])  # and an `in` fact updates a `to` record
    assert read(bank, "ann") == "rome" and bank.words() == 3


def _run(replies, *, local, n=2, m=2, **cfg):
    tok = r2_tokenizer()
    calls = iter(replies) if isinstance(replies, list) else None

    def reply(text):
        return next(calls) if calls is not None else replies(text)

    task = R2TaskConfig(local_prob=1.0, local_rollouts=m, **cfg)
    wf = TinyR2Workflow(tok, task, group_size=n, local=local)
    return run_workflow(ScriptedEngine(tok, reply), wf, [EPISODE], group_size=n, seed=0)


def _by_session(correct: bool):
    good = {"ann in rome": "add skip", "ann in lima": "update add"}
    bad = {"ann in rome": "add add", "ann in lima": "add add"}
    return lambda text: next(v for k, v in (good if correct else bad).items() if k + " . bob" in text
                             or k + " . cal" in text)


def test_rewards_and_compression_penalty_by_hand():
    # correct ops: final bank "ann in lima . cal in kiev ." (6 words), C = (6, 12): no penalty (6 <= 0.7 * 12)
    res = _run(_by_session(True), local=False)
    tr = res.traces[0]
    assert tr["memory"] == "ann in lima . cal in kiev ." and tr["global_rewards"] == [0.0, 1.0]
    assert res.rewards == [0.5, 0.5] and tr["f1"] == 1.0
    # add everything: final bank 12 words; penalty 0.3 * (12 - 8.4) / 12 = 0.09; ann answered rome (F1 0)
    res = _run(_by_session(False), local=False)
    tr = res.traces[0]
    assert tr["memory_words"] == 12 and [q["answer"] for q in tr["questions"]] == ["rome", "kiev"]
    assert tr["global_rewards"] == pytest.approx([-0.09, 0.5 - 0.09])
    assert res.rewards[0] == pytest.approx(0.5 * (-0.09 + 0.41)) and tr["f1"] == 0.5
    # local branches (every session, m = 2): session 0 after "add add": 6 words, C_0 = 6,
    # penalty 0.3 * (6 - 4.2) / 6 = 0.09, no credited question -> -0.09; session 1 from the snapshot
    # "ann in rome . bob likes oslo ." after "add add": 12 words, C_1 = 12 -> 0.5 - 0.09
    res = _run(_by_session(False), local=True)
    local = [x for tr in res.traces for x in tr["local"]]
    assert sorted((x["session"], round(x["reward"], 6)) for x in local) == [(0, -0.09), (0, -0.09), (1, 0.41),
                                                                            (1, 0.41)]


def test_logo_bookkeeping_and_credit():
    # per call, cycle correct / mistaken ops so groups have variance; scripted order = submission order
    cycle = {"ann in rome": ["add skip", "add add", "skip add"], "ann in lima": ["update add", "add add"]}
    count = {k: 0 for k in cycle}

    def reply(text):
        k = next(k for k in cycle if k + " . bob" in text or k + " . cal" in text)
        count[k] += 1
        return cycle[k][(count[k] - 1) % len(cycle[k])]

    n, m = 3, 2
    res = _run(reply, local=True, n=n, m=m)
    b = res.batch
    assert b.num_rows == n * 2 + 2 * m  # every session re-rolled once, m chains each
    glob = b.local_group == -1
    assert glob.sum() == n * 2 and set(b.group[glob]) == {0, 1}
    # local rows share their session's group id as local_group, and sit on the anchor's trajectory
    assert set(b.local_group[~glob]) == set(b.group[~glob]) and (b.local_group[~glob] == b.group[~glob]).all()
    for t in (0, 1):
        rows = np.where(~glob & (b.group == t))[0]
        assert len(rows) == m and len(set(b.sample[rows])) == 1 and len(set(b.unit[rows])) == m
    # a global chain's bank never sees its local branches: the anchor's final memory follows its own outputs
    for tr in res.traces:
        bank = MemoryBank(seed=0)
        for facts, out in zip(EPISODE["sessions"], tr["outputs"]):
            ops = parse_ops(out, 2)
            if ops:
                apply_ops(bank, facts, ops)
        assert " ".join(r.content for r in bank) == tr["memory"]
    # LoGo credit: global units standardised over the n rollouts per session, local units within their m
    out = logo_unit_advantages(b)
    for t in (0, 1):
        g = np.where(glob & (b.group == t))[0]
        r = b.unit_reward[g]
        want = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
        np.testing.assert_allclose(out.row_advantage[g], want, atol=1e-5)
        loc = np.where(~glob & (b.group == t))[0]
        r = b.unit_reward[loc]
        want = (r - r.mean()) / (r.std(ddof=1) + 1e-6) if r.std() > 0 else np.zeros_like(r)
        np.testing.assert_allclose(out.row_advantage[loc], want, atol=1e-5)
    assert SESSION_STRIDE > 2
    # plain GRPO: no local rows at all
    plain = _run(reply, local=False, n=n, m=m).batch
    assert plain.num_rows == n * 2 and (plain.local_group == -1).all()


def test_replay_reward_and_outcome_credit():
    from memjax.systems.memory_r2.tiny.system import outcome_unit_rewards

    replies = {"ann in rome": ["add skip", "add add", "skip add"], "ann in lima": ["update add", "add add", "add"]}
    count = dict.fromkeys(replies, 0)

    def reply(text):
        k = next(k for k in replies if k + " . bob" in text or k + " . cal" in text)
        count[k] += 1
        return replies[k][(count[k] - 1) % 3]

    n = 3
    res = _run(reply, local=True, n=n, m=2)
    task = R2TaskConfig()
    for tr in res.traces:  # the replay of a rollout's outputs is its reward (the unparseable one included)
        assert replay_reward(task, EPISODE, tr["outputs"]) == pytest.approx(tr["reward"])
    assert len({tuple(tr["outputs"]) for tr in res.traces}) == n and len(set(res.rewards)) > 1
    b = res.batch
    out = outcome_unit_rewards(b)
    glob = b.local_group == -1
    np.testing.assert_allclose(out.unit_reward[glob], b.reward[b.sample[glob]])
    np.testing.assert_array_equal(out.unit_reward[~glob], b.unit_reward[~glob])  # local units keep theirs
    adv = logo_unit_advantages(out).row_advantage
    for i in set(b.sample[glob]):  # one advantage per rollout: both sessions share it
        assert len(set(np.round(adv[glob & (b.sample == i)], 6))) == 1
    r = b.reward
    np.testing.assert_allclose(sorted(set(np.round(adv[glob], 5))),
                               sorted(np.round((r - r.mean()) / (r.std(ddof=1) + 1e-6), 5)), atol=1e-5)
    with pytest.raises(ValueError, match="unit_reward"):
        outcome_unit_rewards(b.replace(unit_reward=None))


def test_many_session_shapes():
    cfg = R2TaskConfig(facts_per_session=1, sessions=8)
    s = make_r2_sample(cfg, 3, 0)
    assert len(s["sessions"]) == 8 and all(len(x) == 1 for x in s["sessions"]) and cfg.max_response_tokens == 2
    assert 3 + 3 + 4 * 8 + 2 <= WINDOW
    with pytest.raises(ValueError, match="overflow"):
        R2TaskConfig(facts_per_session=1, sessions=11)


def test_shipped_warm_start_and_sft_rows():
    from memjax.systems.memory_r2.tiny.warmstart import load_r2_warmstart, sft_arrays

    model, info = load_r2_warmstart(log=lambda *_: None)
    assert model.cfg.vocab_size == 64 and model.cfg.max_position_embeddings == WINDOW
    assert info["task"]["teacher_correct"] == 0.3 and info["dev"]["bad_output"] == 0.0
    tok = r2_tokenizer()
    ids, mask = sft_arrays(tok, R2TaskConfig(), [EPISODE])
    assert ids.shape == (2, WINDOW)  # one row per session
    # the response of session 1 is the teacher's ops + <end>, right after the prompt
    prompt = tok.apply_chat_template([{"role": "user", "content": "memory ann in rome . session ann in lima . "
                                       "cal in kiev . op"}])
    assert ids[1, :len(prompt)].tolist() == prompt and mask[1, :len(prompt)].sum() == 0
    assert tok.decode(ids[1][mask[1] == 1]) == "update add <end>"
