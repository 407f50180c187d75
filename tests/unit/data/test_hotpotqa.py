"""RULER-HotpotQA synthesis: pool, exactly N documents, gold paragraphs, format, determinism, filter hook, errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.data import hotpotqa as hq
from memjax.data.hotpotqa import (
    HotpotQACorpus,
    HotpotQuestion,
    RulerHotpotQAConfig,
    filter_no_context,
    format_context,
    load_hotpotqa,
    synthesize,
)

EXCERPT = Path(__file__).parents[2] / "fixtures" / "data" / "hotpotqa_dev_excerpt.json"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "hotpotqa" / "hotpot_dev_distractor_first100.json"
DOC_HEADER = re.compile(r"(?:^|\n\n)Document (\d+):\n")


@pytest.fixture(scope="module")
def corpus() -> HotpotQACorpus:
    return load_hotpotqa(EXCERPT)


def test_pool_is_sorted_unique_title_plus_sentences(corpus: HotpotQACorpus) -> None:
    raw = json.loads(EXCERPT.read_text(encoding="utf-8"))
    expected = sorted({t + "\n" + "".join(s) for r in raw for t, s in r["context"]})
    assert list(corpus.docs) == expected
    assert len(corpus.questions) == len(raw)
    for q, r in zip(corpus.questions, raw, strict=True):
        assert q.id == r["_id"] and q.question == r["question"] and q.answers == (r["answer"],)
        own = [corpus.docs[d] for d in q.doc_ids]
        assert own == list(dict.fromkeys(t + "\n" + "".join(s) for t, s in r["context"]))
        titles = {t for t, _ in r["supporting_facts"]}
        assert {corpus.docs[d].split("\n", 1)[0] for d in q.gold_doc_ids} == titles


@pytest.mark.parametrize("num_docs", [10, 11, 37, 80])
def test_exactly_n_documents_gold_present_and_format(corpus: HotpotQACorpus, num_docs: int) -> None:
    for index in range(len(corpus.questions)):
        s = synthesize(corpus, index, RulerHotpotQAConfig(num_docs=num_docs, seed=7))
        q = corpus.questions[index]
        numbers = [int(m) for m in DOC_HEADER.findall(s.context)]
        assert numbers == list(range(1, num_docs + 1)) and s.num_docs == num_docs
        assert len(s.doc_ids) == len(set(s.doc_ids)) == num_docs
        assert set(q.doc_ids) <= set(s.doc_ids)  # all own paragraphs kept
        assert s.context == "\n\n".join(f"Document {i + 1}:\n{corpus.docs[d]}" for i, d in enumerate(s.doc_ids))
        assert len(s.gold_doc_indices) == len(q.gold_doc_ids) >= 2
        for g in s.gold_doc_indices:
            assert corpus.docs[s.doc_ids[g - 1]] in {corpus.docs[d] for d in q.gold_doc_ids}
            assert f"Document {g}:\n{corpus.docs[s.doc_ids[g - 1]]}" in s.context
        assert s.answers == q.answers and s.query == q.question and s.id == q.id


def test_deterministic_and_order_independent(corpus: HotpotQACorpus) -> None:
    cfg = RulerHotpotQAConfig(num_docs=30, seed=3)
    forward = [synthesize(corpus, i, cfg) for i in range(len(corpus.questions))]
    backward = [synthesize(corpus, i, cfg) for i in reversed(range(len(corpus.questions)))][::-1]
    assert forward == backward
    assert synthesize(load_hotpotqa(EXCERPT), 2, cfg) == forward[2]


def test_different_seeds_and_indices_differ(corpus: HotpotQACorpus) -> None:
    a = synthesize(corpus, 0, RulerHotpotQAConfig(num_docs=30, seed=0))
    b = synthesize(corpus, 0, RulerHotpotQAConfig(num_docs=30, seed=1))
    assert a.doc_ids != b.doc_ids and a.context != b.context
    # the shuffle alone also differs when N is the question's own 10 paragraphs
    c = synthesize(corpus, 0, RulerHotpotQAConfig(num_docs=10, seed=0))
    d = synthesize(corpus, 0, RulerHotpotQAConfig(num_docs=10, seed=1))
    assert sorted(c.doc_ids) == sorted(d.doc_ids) and c.doc_ids != d.doc_ids


def _toy_corpus(pool: int, own: list[int]) -> HotpotQACorpus:
    q = HotpotQuestion(id="q", question="?", answers=("a",), doc_ids=tuple(own), gold_doc_ids=tuple(own[:2]))
    return HotpotQACorpus(path="<toy>", docs=tuple(f"doc {i:05d}" for i in range(pool)), questions=(q,))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_distractors_are_uniform_draws_from_the_complement(data: st.DataObject) -> None:
    pool = data.draw(st.integers(12, 300))
    own = data.draw(st.lists(st.integers(0, pool - 1), min_size=2, max_size=10, unique=True))
    n = data.draw(st.integers(len(own), pool))
    ids = hq.choose_documents(_toy_corpus(pool, own), 0, RulerHotpotQAConfig(num_docs=n, seed=data.draw(
        st.integers(0, 2**31))))
    assert len(ids) == n and len(set(ids.tolist())) == n
    assert set(own) <= set(ids.tolist()) and ids.min() >= 0 and ids.max() < pool


def test_distractor_distribution_covers_complement_evenly() -> None:
    corpus = _toy_corpus(40, [0, 5, 6, 39])
    hits = np.zeros(40)
    for seed in range(400):
        ids = hq.choose_documents(corpus, 0, RulerHotpotQAConfig(num_docs=10, seed=seed))
        hits[ids] += 1
    free = np.setdiff1d(np.arange(40), [0, 5, 6, 39])
    assert np.all(hits[[0, 5, 6, 39]] == 400)
    expected = 400 * 6 / 36
    assert np.all(np.abs(hits[free] - expected) < 0.5 * expected)  # loose: every free id is drawn ~equally


def test_n_bounds_errors(corpus: HotpotQACorpus) -> None:
    with pytest.raises(ValueError, match="exceeds the document pool of 80 unique paragraphs.*full dev"):
        synthesize(corpus, 0, RulerHotpotQAConfig(num_docs=81))
    with pytest.raises(ValueError, match="smaller than question 0's own 10 paragraphs"):
        synthesize(corpus, 0, RulerHotpotQAConfig(num_docs=9))
    with pytest.raises(IndexError, match="out of range"):
        synthesize(corpus, 8, RulerHotpotQAConfig(num_docs=20))
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="num_docs"):
            RulerHotpotQAConfig(num_docs=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        RulerHotpotQAConfig(seed=-1)


def test_bad_files_name_the_file_record_and_field(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match="nope.json"):
        load_hotpotqa(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: not valid JSON"):
        load_hotpotqa(bad)
    bad.write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: expected a non-empty JSON list"):
        load_hotpotqa(bad)
    rec = json.loads(EXCERPT.read_text(encoding="utf-8"))[:2]
    del rec[1]["answer"]
    bad.write_text(json.dumps(rec), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: record 1: missing field 'answer'"):
        load_hotpotqa(bad)
    rec = json.loads(EXCERPT.read_text(encoding="utf-8"))[:1]
    rec[0]["context"][3] = ["title only"]
    bad.write_text(json.dumps(rec), encoding="utf-8")
    with pytest.raises(ValueError, match=r"record 0: context\[3\]"):
        load_hotpotqa(bad)
    rec = json.loads(EXCERPT.read_text(encoding="utf-8"))[:1]
    rec[0]["supporting_facts"] = [["Not A Title", 0]]
    bad.write_text(json.dumps(rec), encoding="utf-8")
    with pytest.raises(ValueError, match="'Not A Title' is not in its context"):
        load_hotpotqa(bad)


def test_format_context() -> None:
    assert format_context(["a\nx", "b"]) == "Document 1:\na\nx\n\nDocument 2:\nb"
    assert format_context([]) == ""


def test_no_context_filter_hook(corpus: HotpotQACorpus) -> None:
    calls: list[int] = []

    def judge(questions):  # "answers correctly without the document" for yes/no questions
        calls.append(len(questions))
        return [q.answers[0] in ("yes", "no") for q in questions]

    res = filter_no_context(corpus, judge, batch_size=3)
    yes_no = {i for i, q in enumerate(corpus.questions) if q.answers[0] in ("yes", "no")}
    assert set(res.dropped) == yes_no and set(res.kept) == set(range(len(corpus.questions))) - yes_no
    assert calls == [3, 3, 2]
    sub = filter_no_context(corpus, judge, indices=[5, 1])
    assert set(sub.kept) | set(sub.dropped) == {1, 5}
    with pytest.raises(ValueError, match="returned 1 verdicts for 8"):
        filter_no_context(corpus, lambda qs: [True])
    with pytest.raises(IndexError):
        filter_no_context(corpus, judge, indices=[99])
    assert "\\boxed{}" in hq.NO_CONTEXT_PROMPT.format(question="Q?")


@pytest.mark.skipif(not SHARED.is_file(), reason="shared HotpotQA sample not present")
def test_real_dev_sample_training_size() -> None:
    corpus = load_hotpotqa(SHARED)
    assert len(corpus.questions) == 100 and 900 < len(corpus.docs) <= 1000
    s = synthesize(corpus, 99, RulerHotpotQAConfig(num_docs=200, seed=0))
    assert len(DOC_HEADER.findall(s.context)) == 200 and len(s.gold_doc_indices) >= 2
