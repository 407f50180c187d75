"""RULER synthetic tasks: length fit to the target, answers recoverable from the context, determinism, errors."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.core.tokenizer import Tokenizer
from memjax.data import (
    TASKS,
    RulerConfig,
    RulerGenerator,
    load_hotpotqa,
    load_squad,
    without_essay,
)
from memjax.data.length import TargetTooSmall, fit_units
from memjax.data.ruler_tasks import (
    CWESpec,
    FWESpec,
    NIAHSpec,
    QASpec,
    VTSpec,
    word_lists,
)

FIX = Path(__file__).parents[2] / "fixtures" / "data"
TARGET = 1500
SYNTHETIC = [t for t in TASKS if not t.startswith("qa_")]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.default()


@pytest.fixture(scope="module")
def gen(tok: Tokenizer) -> RulerGenerator:
    return RulerGenerator(RulerConfig(target_tokens=TARGET, seed=5), tokenizer=tok, tasks=without_essay(TASKS),
                          squad=load_squad(FIX / "squad_dev_excerpt.json"),
                          hotpotqa=load_hotpotqa(FIX / "hotpotqa_dev_excerpt.json"))


def _recoverable(task: str, context: str, answers: tuple[str, ...], query: str) -> None:
    spec = TASKS[task]
    if task.startswith("niah"):
        assert isinstance(spec, NIAHSpec)
        keys = re.search(r"for (.*) mentioned in the provided text\?$", query).group(1)  # type: ignore[union-attr]
        keys = [k for k in re.split(r", and |, ", keys)]
        found = [v for k in keys for v in re.findall(
            rf"One of the special magic {spec.value_type} for {re.escape(k)} is: (\S+)\.(?:\n|$| )", context)]
        assert sorted(found) == sorted(answers) and len(answers) == spec.num_queries * spec.num_values
    elif task == "vt":
        value = re.search(r"assigned the value (\d+) in the text", query).group(1)  # type: ignore[union-attr]
        direct = dict(re.findall(r"VAR (\w+) = (\d+)", context))
        links = re.findall(r"VAR (\w+) = VAR (\w+)", context)
        names = {k for k, v in direct.items() if v == value}
        for _ in range(10):
            names |= {a for a, b in links if b in names}
        assert names == set(answers) and len(answers) == 5
    elif task == "cwe":
        words = Counter(re.findall(r"\d+\. (.+?)(?= \d+\. |$)", context))
        top = [w for w, _ in words.most_common(10)]
        assert set(top) == set(answers) and min(words[a] for a in answers) > max(
            c for w, c in words.items() if w not in answers)
    elif task == "fwe":
        counts = Counter(w for w in context.split() if w != "...")
        ranked = counts.most_common(4)
        assert [w for w, _ in ranked[:3]] == list(answers) and ranked[2][1] > ranked[3][1]
    elif task == "qa_1":
        assert any(a in context for a in answers)
    else:
        assert task == "qa_2"


@pytest.mark.parametrize("task", list(TASKS))
def test_each_task_fits_target_and_answer_is_recoverable(gen: RulerGenerator, tok: Tokenizer, task: str) -> None:
    for index in (0, 1):
        s = gen.sample(task, index)
        n = len(tok.encode(s.context))
        assert n == s.num_tokens <= TARGET
        # maximal fill: one more unit would exceed the target (or the material ran out)
        spec_hi = gen.num_questions(task)
        if spec_hi is None or task != "qa_1":
            assert len(tok.encode(gen.render(task, index, s.units + 1))) > TARGET
        assert n >= (0.9 if not task.startswith("qa_") else 0.6) * TARGET
        _recoverable(task, s.context, s.answers, s.query)
        assert s.metric == ("string_match_part" if task.startswith("qa_") else "string_match_all")
        assert s.task == task and s.index == index and s.id == f"{task}/{TARGET}/{index}"
        assert s.to_dict()["answers"] == list(s.answers)


def test_larger_target_tracks_within_one_unit(tok: Tokenizer) -> None:
    g = RulerGenerator(RulerConfig(target_tokens=6000, seed=1), tokenizer=tok, tasks=without_essay(TASKS))
    for task in ("niah_multikey_2", "vt", "cwe", "fwe"):
        s = g.sample(task, 3)
        step = len(tok.encode(g.render(task, 3, s.units + 1))) - s.num_tokens
        assert 0 <= 6000 - s.num_tokens < step <= 60, task
        _recoverable(task, s.context, s.answers, s.query)


def test_deterministic_order_independent_and_seeded(gen: RulerGenerator, tok: Tokenizer) -> None:
    fresh = RulerGenerator(gen.config, tokenizer=tok, tasks=gen.tasks, squad=gen.squad, hotpotqa=gen.hotpotqa)
    for task in ("niah_multivalue", "vt", "cwe", "fwe", "qa_2"):
        b = fresh.sample(task, 1)  # sample 1 first on a fresh generator
        assert gen.sample(task, 1) == b
    other = RulerGenerator(RulerConfig(target_tokens=TARGET, seed=6), tokenizer=tok, tasks=gen.tasks,
                           hotpotqa=gen.hotpotqa)
    for task in ("niah_single_1", "niah_multikey_3", "vt", "cwe", "fwe", "qa_2"):
        assert other.sample(task, 0).context != gen.sample(task, 0).context
        assert gen.sample(task, 0).context != gen.sample(task, 1).context


def test_query_templates(gen: RulerGenerator) -> None:
    one = gen.sample("niah_single_1", 0).query
    assert one.startswith("A special magic number is hidden within the following text. Make sure to memorize it. ")
    assert one.endswith("mentioned in the provided text?") and "What is the special magic number for " in one
    many = gen.sample("niah_multiquery", 0).query
    assert many.startswith("Some special magic numbers are hidden") and ", and " in many
    assert gen.sample("niah_multikey_3", 0).query.startswith("A special magic uuid is")
    assert gen.sample("qa_1", 0).query.startswith("Answer the question based on the given documents. ")
    assert "the 10 most common words" in gen.sample("cwe", 0).query


def test_essay_haystack_needs_text_then_hides_needles_in_it(tok: Tokenizer) -> None:
    g = RulerGenerator(RulerConfig(target_tokens=1200), tokenizer=tok)
    with pytest.raises(ValueError, match="essay haystack.*without_essay"):
        g.sample("niah_single_2", 0)
    essay = " ".join(load_hotpotqa(FIX / "hotpotqa_dev_excerpt.json").docs[:20]).replace("\n", " ")
    g = RulerGenerator(RulerConfig(target_tokens=1200), tokenizer=tok, essay=essay)
    for task in ("niah_single_3", "niah_multikey_1", "niah_multivalue"):
        s = g.sample(task, 0)
        assert 1080 <= s.num_tokens <= 1200 and s.context.split()[0] == essay.split()[0]
        _recoverable(task, s.context, s.answers, s.query)


def test_errors(gen: RulerGenerator, tok: Tokenizer) -> None:
    with pytest.raises(KeyError, match="unknown RULER task"):
        gen.sample("niah_single_9", 0)
    with pytest.raises(IndexError):
        gen.sample("vt", -1)
    with pytest.raises(IndexError, match="questions in"):
        gen.sample("qa_1", 10_000)
    with pytest.raises(ValueError, match="needs a squad corpus"):
        RulerGenerator(RulerConfig(target_tokens=500), tokenizer=tok).sample("qa_1", 0)
    big = RulerGenerator(RulerConfig(target_tokens=20_000), tokenizer=tok, squad=gen.squad)
    with pytest.raises(ValueError, match="ran out of material"):
        big.sample("qa_1", 0)
    with pytest.raises(ValueError, match="cannot fit"):
        RulerGenerator(RulerConfig(target_tokens=50), tokenizer=tok).sample("cwe", 0)
    with pytest.raises(ValueError, match="too small for three distinct"):
        RulerGenerator(RulerConfig(target_tokens=40), tokenizer=tok).sample("fwe", 0)
    with pytest.raises(ValueError):
        RulerConfig(target_tokens=0)
    for bad in (lambda: NIAHSpec(num_keys=1, num_queries=2), lambda: NIAHSpec(haystack="desert"),
                lambda: NIAHSpec(key_type="emojis"), lambda: VTSpec(num_hops=0), lambda: CWESpec(freq_common=3),
                lambda: FWESpec(alpha=1.0), lambda: QASpec("trivia")):  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            bad()


def test_qa_distractor_modes(gen: RulerGenerator, tok: Tokenizer) -> None:
    squad = gen.squad
    assert squad is not None
    q = squad.questions[0]
    ruler = gen.render("qa_1", 0, 1 + len(q.article_doc_ids))
    assert all(squad.docs[d] in ruler for d in q.article_doc_ids)  # RULER: own article's paragraphs come first
    other = RulerGenerator(RulerConfig(target_tokens=TARGET, qa_distractors="other_articles"), tokenizer=tok,
                           squad=squad).render("qa_1", 0, 1 + len(q.article_doc_ids))
    assert squad.docs[q.doc_id] in other and not any(squad.docs[d] in other for d in q.article_doc_ids)


def test_word_lists_loaded() -> None:
    w = word_lists()
    assert len(w["noun"]) > 6000 and len(w["adjective"]) > 800 and len(w["verb"]) > 900
    assert all(x == x.strip() and x for v in w.values() for x in v)


# --- the length fit itself ---------------------------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=300), st.integers(0, 5), st.integers(1, 4000))
def test_fit_units_finds_the_largest_fitting_count(sizes: list[int], base: int, target: int) -> None:
    prefix = [base]
    for s in sizes:
        prefix.append(prefix[-1] + s)
    build = str  # the "text" is the unit count; its "token count" is the prefix sum
    hi = len(sizes)
    if prefix[0] > target:
        with pytest.raises(TargetTooSmall):
            fit_units(build, lambda t: prefix[int(t)], target, lo=0, hi=hi)
        return
    fit = fit_units(build, lambda t: prefix[int(t)], target, lo=0, hi=hi)
    best = max(n for n in range(hi + 1) if prefix[n] <= target)
    assert fit.units == best and fit.tokens == prefix[best] and fit.text == str(best)


def test_fit_units_unbounded_is_cheap() -> None:
    fit = fit_units(lambda n: "x" * (7 * n + 3), len, 1_000_003, lo=0)
    assert fit.units == 142857 and fit.tokens == 999_999 + 3 and fit.evaluations <= 6
