"""The tiny Memory-R1 answer-agent task (memjax/systems/memory_r1/tiny/answer_task.py): samples, prompts through the shared
AnswerWorkflow, parsers and the selection statistics, with a scripted engine (memjax/systems/memory_r1/tiny/fixed.py, no model)."""

import numpy as np
import pytest

from memjax.agents import run_workflow
from memjax.systems.memory_r1.workflow import fit_answer_prompt
from memjax.tiny.model import WINDOW
from memjax.systems.memory_r1.tiny.fixed import FixedManagerEngine
from memjax.systems.memory_r1.tiny.answer_task import (MAX_RESPONSE, R1AnswerTaskConfig, answer_tokenizer, answer_workflow,
                                        make_answer_split, parse_distill, parse_plain, prompt_tokens, relevant,
                                        selection, selection_stats, teacher_record, teacher_response,
                                        tiny_answer_prompt)


def test_samples_have_one_relevant_record_and_distractors_that_reuse_the_name_or_the_relation():
    cfg = R1AnswerTaskConfig()
    samples = make_answer_split(cfg, 5, 200)
    assert samples == make_answer_split(cfg, 5, 200)                      # pure function of (cfg, seed, index)
    kinds = {"name": 0, "relation": 0}
    for s in samples:
        recs = [m for _, m in s.memories[0]]
        key, place = s.speakers[0], s.qa.answer
        assert recs.count(relevant(s)) == 1 and s.qa.question == f"where is {key} ?"
        assert cfg.min_distractors <= len(recs) - 1 <= cfg.max_distractors
        for r in recs:
            if r == relevant(s):
                continue
            k, rel, x, dot = r.split()
            assert x != place and dot == "."                                # no distractor gives the answer
            assert (k == key and rel == "likes") or (k != key and rel == "in")
            kinds["name" if k == key else "relation"] += 1
        assert teacher_record(s) in recs
    assert min(kinds.values()) > 0.3 * sum(kinds.values())
    correct = np.mean([teacher_record(s) == relevant(s) for s in samples])
    assert 0.3 < correct < 0.6                                              # teacher_correct 0.4 (+ none wrong)


def test_prompts_fit_the_window_at_the_largest_count_and_name_the_variant():
    tok, s = answer_tokenizer(), make_answer_split(R1AnswerTaskConfig().at(7), 1, 1)[0]
    for distill in (False, True):
        ids, dropped = fit_answer_prompt(tok, s, answer_workflow(tok, distill=distill, temperature=0).cfg,
                                         tiny_answer_prompt)
        assert dropped == 0 and len(ids) == prompt_tokens(7)
        resp = tok.encode(teacher_response(s, distill=distill)) + [tok.eos_id]
        assert len(ids) + len(resp) <= WINDOW and len(resp) <= MAX_RESPONSE
        assert tok.decode(ids).split()[-3] == ("select" if distill else "answer")
    with pytest.raises(ValueError, match="window"):
        R1AnswerTaskConfig(max_distractors=8)


def test_parsers():
    assert parse_plain("rome") == ("rome", "marker") and parse_plain("ann rome") == ("", "none")
    assert parse_distill("ann in oslo . answer rome") == ("rome", "marker") and parse_distill("answer rome") == (
        "rome", "marker")
    for bad in ("ann in oslo .", "", "ann in rome in rome", "answer rome rome", "rome"):
        assert parse_distill(bad) == ("", "none"), bad                     # strict: no last-word fallback
    assert selection("ann in rome . bob in oslo . answer rome") == ["ann in rome .", "bob in oslo ."]
    assert selection("ann in") == ["ann in"] and selection("answer rome") == []


def test_distill_workflow_rewards_the_parsed_answer_and_reports_the_selection():
    """A scripted agent that selects the FIRST record about the asked person and answers its place: right iff the
    relevant record comes before every `K likes X .` record; the statistics must say so."""
    tok = answer_tokenizer()
    samples = make_answer_split(R1AnswerTaskConfig().at(3), 9, 64)

    def first_about(words):
        key = words[words.index("where") + 2]
        recs = " ".join(words[words.index("memory") + 1: words.index("where")]).split(" . ")
        rec = next(r.rstrip(" .") for r in recs if r.split()[0] == key) + " ."
        return f"{rec} answer {rec.split()[2]}"

    res = run_workflow(FixedManagerEngine(tok, lambda t: first_about(t.split())), answer_workflow(tok, distill=True, temperature=0.0), samples,
                       record=False)
    first_is_relevant = [next(m for _, m in s.memories[0] if m.split()[0] == s.speakers[0]) == relevant(s)
                         for s in samples]
    assert res.rewards == [float(x) for x in first_is_relevant]
    assert 0 < sum(first_is_relevant) < len(samples)
    st = selection_stats(samples, res.traces)
    assert st["select_relevant"] == pytest.approx(np.mean(first_is_relevant))
    assert st["select_count"] == 1 and st["answer_from_selection"] == 1
    assert st["em_given_relevant"] == 1 and st["em_given_not"] == 0
    assert st["select_name_reuse"] == pytest.approx(1 - np.mean(first_is_relevant))   # the first `K likes X .`
    assert st["select_other_person"] == st["select_not_in_bank"] == 0
    plain = run_workflow(FixedManagerEngine(tok, lambda t: first_about(t.split()).split()[-1]),
                         answer_workflow(tok, distill=False, temperature=0.0), samples, record=False)
    assert plain.rewards == res.rewards and plain.stats["answer_unmarked"] == 0
