"""Rewards: boxed extraction, MemAgent's reward, SQuAD EM/F1/sub-EM, RULER string match, BLEU-1/F1; fuzzed."""

from __future__ import annotations

import math
import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memjax.rewards as R
from memjax.rewards import (
    RewardStats,
    last_boxed,
    memagent_reward,
    squad_scores,
    string_match_all,
    string_match_part,
    strip_string,
)
from memjax.rewards.squad import normalize_answer, squad_f1

# --- last_boxed ---


@pytest.mark.parametrize("text, expected", [
    (r"so the answer is \boxed{Paris}.", "Paris"),
    (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
    (r"\boxed{a{b{c}}d} tail }", "a{b{c}}d"),
    (r"first \boxed{1} then \boxed{2}", "2"),
    (r"\boxed{1} and \fbox{x}", "x"),
    (r"\fbox{x} and \boxed{y}", "y"),
    (r"\boxed 5", "5"),
    (r"$\boxed 42$ is it", "42"),
    ("\\boxed  New York\nmore text", "New York"),
    (r"\boxed {spaced}", "spaced"),
    (r"\boxed{}", ""),
    (r"\boxed{abc", None),                   # unbalanced
    (r"\boxed{1} then \boxed{abc", None),    # the last one decides
    (r"no box here", None),
    (r"\boxed", None),
    (r"\boxed$", None),
    (r"\boxedfoo{1}", None),                 # a different command
    (r"\boxed{1} \boxedfoo{2}", "1"),
    ("", None),
])
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


def test_last_boxed_non_str() -> None:
    assert last_boxed(None) is None  # type: ignore[arg-type]
    assert last_boxed(123) is None  # type: ignore[arg-type]


_balanced = st.recursive(st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=8),
                         lambda inner: st.lists(inner, min_size=1, max_size=3).map(lambda xs: "{" + "".join(xs) + "}")
                         | st.tuples(inner, inner).map("".join), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(_balanced, st.text(alphabet=st.characters(blacklist_characters="\\"), max_size=20),
       st.sampled_from(["boxed", "fbox"]))
def test_last_boxed_keeps_nested_braces(content: str, prefix: str, cmd: str) -> None:
    assert last_boxed(f"{prefix}\\{cmd}{{{content}}} and after") == content


# --- strip_string / memagent_reward ---


@pytest.mark.parametrize("raw, expected", [
    (r"\dfrac{1}{2}", r"\frac{1}{2}"),
    (r"\tfrac12", r"\frac12"),
    (r"\left( x \right)", "(x)"),
    (r"90^{\circ}", "90"),
    (r"50\%", "50"),
    (r"\$5", "5"),
    ("a .5", "a0.5"),
    ("{.5}", "{0.5}"),
    ("New York\nCity", "NewYorkCity"),
    (r"a\!b", "ab"),
    ("", ""),
])
def test_strip_string(raw: str, expected: str) -> None:
    assert strip_string(raw) == expected


def _reference_reward(text: str, truths: list[str]) -> float:
    """Independent oracle for the MemAgent reward on well-formed brace answers: last 300 chars, lower-case, the
    brace-matched argument of the last \\boxed, the reference strip_string steps, exact match."""
    t = text[-300:].lower()
    i = t.rfind("\\boxed{")
    if i < 0:
        return 0.0
    depth, j = 0, i + len("\\boxed")
    for k in range(j, len(t)):
        depth += {"{": 1, "}": -1}.get(t[k], 0)
        if depth == 0:
            ans = t[j + 1:k]
            break
    else:
        return 0.0

    def norm(s: str) -> str:
        for a, b in [("\n", ""), ("\\!", ""), ("\\\\", "\\"), ("tfrac", "frac"), ("dfrac", "frac"), ("\\left", ""),
                     ("\\right", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("\\$", ""), ("\\%", ""), (" .", " 0."),
                     ("{.", "{0."), (" ", "")]:
            s = s.replace(a, b)
        return s
    return float(any(norm(ans) == norm(g.lower()) for g in truths))


@pytest.mark.parametrize("text, truths, expected", [
    (r"The answer: \boxed{Paris}", ["paris"], 1.0),
    (r"\boxed{New  York City}", ["New York City"], 1.0),
    (r"\boxed{new york}", ["New York City"], 0.0),
    (r"\boxed{Lyon}", ["Paris", "lyon"], 1.0),
    (r"\boxed{2022}", [2022], 1.0),
    (r"\boxed{\text{yes}}", ["yes"], 0.0),  # no \text stripping in the reference normaliser
    (r"\boxed{yes} no wait \boxed{no}", ["yes"], 0.0),
    (r"\boxed 5", ["5"], 1.0),
    (r"\fbox{blue}", ["Blue"], 1.0),
    ("no boxed answer at all", ["x"], 0.0),
])
def test_memagent_reward_cases(text: str, truths: list, expected: float) -> None:
    assert memagent_reward(text, truths) == expected
    if "\\boxed{" in text:
        assert _reference_reward(text, [str(t) for t in truths]) == expected


def test_memagent_reward_scores_only_the_tail_and_counts_missing() -> None:
    text = r"\boxed{Paris}" + " filler" * 60
    stats = RewardStats()
    assert memagent_reward(text, "paris", stats=stats) == 0.0  # the box is outside the last 300 characters
    assert memagent_reward(text, "paris", tail_chars=None, stats=stats) == 1.0
    assert memagent_reward(None, ["paris"], stats=stats) == 0.0  # type: ignore[arg-type]
    assert (stats.total, stats.missing) == (3, 2) and stats.as_dict()["missing_rate"] == pytest.approx(2 / 3)
    res = R.memagent_score(r"I think \boxed{PARIS}", ["paris"])
    assert res.score == 1.0 and res.answer == "paris"
    with pytest.raises(ValueError, match="ground_truths must not be empty"):
        memagent_reward(r"\boxed{x}", [])


_answers = st.text(alphabet=string.ascii_letters + string.digits + " .", min_size=1, max_size=20)


@settings(max_examples=150, deadline=None)
@given(_answers, st.lists(_answers, min_size=1, max_size=3), st.text(max_size=100))
def test_memagent_reward_matches_oracle(answer: str, truths: list[str], prefix: str) -> None:
    text = prefix.replace("\\", "/") + "\\boxed{" + answer + "}"
    assert memagent_reward(text, truths) == _reference_reward(text, truths)
    assert memagent_reward(text, [answer]) == 1.0 or len(text) > 300


# --- SQuAD ---


def test_normalize_answer() -> None:
    assert normalize_answer("The  Eiffel-Tower, in PARIS!") == "eiffeltower in paris"
    assert normalize_answer("a an the") == ""
    assert normalize_answer("theatre") == "theatre"


@pytest.mark.parametrize("pred, golds, em, f1, sub_em", [
    ("the Eiffel Tower", ["Eiffel Tower"], 1.0, 1.0, 1.0),
    ("Eiffel Tower in Paris", ["Eiffel Tower"], 0.0, 2 * 0.5 * 1.0 / 1.5, 1.0),
    ("Tower", ["Eiffel Tower"], 0.0, 2 * 1.0 * 0.5 / 1.5, 1.0),  # MemAgent's sub-EM is two-sided
    ("Louvre", ["Eiffel Tower", "louvre"], 1.0, 1.0, 1.0),
    ("yes it is", ["yes"], 0.0, 0.0, 1.0),  # HotpotQA yes/no rule zeroes F1
    ("no", ["yes"], 0.0, 0.0, 0.0),
    ("the", ["Paris"], 0.0, 0.0, 0.0),  # empty after normalisation: not a substring match
    ("the", ["a"], 1.0, 1.0, 1.0),
])
def test_squad_scores_cases(pred: str, golds: list[str], em: float, f1: float, sub_em: float) -> None:
    assert squad_scores(pred, golds) == pytest.approx({"em": em, "f1": f1, "sub_em": sub_em})


def test_squad_scores_options_and_missing() -> None:
    assert squad_scores("yes it is", "yes", hotpot_yes_no=False)["f1"] == pytest.approx(0.5)
    stats = RewardStats()
    assert squad_scores(None, ["x"], stats=stats) == {"em": 0.0, "f1": 0.0, "sub_em": 0.0}
    assert stats.missing == 1
    with pytest.raises(ValueError):
        squad_scores("x", [])


def _f1_numpy(pred: list[str], gold: list[str]) -> float:
    """Token F1 from count vectors over the joint vocabulary (independent of Counter arithmetic)."""
    if not pred or not gold:
        return float(pred == gold)
    vocab = sorted(set(pred) | set(gold))
    p = np.array([pred.count(w) for w in vocab])
    g = np.array([gold.count(w) for w in vocab])
    same = np.minimum(p, g).sum()
    return 0.0 if same == 0 else float(2 * same / (p.sum() + g.sum()))


_words = st.lists(st.sampled_from(["paris", "tower", "eiffel", "x", "1", "old", "new"]), max_size=8)


@settings(max_examples=200, deadline=None)
@given(_words, _words)
def test_token_f1_matches_count_vector_formula(pred: list[str], gold: list[str]) -> None:
    assert squad_f1(" ".join(pred), " ".join(gold), hotpot_yes_no=False) == pytest.approx(_f1_numpy(pred, gold))


# --- RULER string match ---


def test_string_match() -> None:
    assert string_match_all("Values: 123 and 456", ["123", "456"]) == 1.0
    assert string_match_all("Values: 123", ["123", "456"]) == 0.5
    assert string_match_all("ABC-def", ["abc-DEF"]) == 1.0
    assert string_match_all(None, ["1"]) == 0.0  # type: ignore[arg-type]
    assert string_match_part("it is 456", ["123", "456"]) == 1.0
    assert string_match_part("nothing", ["123", "456"]) == 0.0
    with pytest.raises(ValueError):
        string_match_all("x", [])
    assert R.METRICS["string_match_all"] is string_match_all


# --- BLEU-1 / token F1 ---


def test_bleu1_and_text_f1() -> None:
    assert R.bleu1("the cat sat", "the cat sat on the mat") == pytest.approx(math.exp(1 - 6 / 3))
    assert R.bleu1("the the the the", "the cat") == pytest.approx(1 / 4)  # clipped counts
    assert R.bleu1("dog", "cat") == 0.0 and R.bleu1("", "cat") == 0.0
    assert R.bleu1("Cat sat.", ["dog", "cat sat ."]) == 1.0 and R.bleu1("Cat, sat.", "cat sat .") == 0.75
    assert R.token_f1_multiset("The cat sat", ["a cat sat down"]) == pytest.approx(2 * 1 * (2 / 3) / (1 + 2 / 3))
    stats = RewardStats()
    assert R.bleu1(None, "x", stats=stats) == 0.0  # type: ignore[arg-type]
    assert R.token_f1_multiset(None, "x", stats=stats) == 0.0  # type: ignore[arg-type]
    assert stats.missing == 2


# --- fuzz: arbitrary model output never raises, scores stay in [0, 1] ---

_latexish = st.lists(st.sampled_from(["\\boxed", "\\fbox", "{", "}", " ", "$", "\n", "a", "1", "\\frac", "the", ".",
                                      "\\%", "yes"]), max_size=30).map("".join)
_any_text = st.one_of(st.text(max_size=200), _latexish)


@settings(max_examples=300, deadline=None)
@given(_any_text, st.lists(st.text(max_size=20), min_size=1, max_size=3))
def test_fuzz_never_raises_and_stays_in_range(text: str, golds: list[str]) -> None:
    boxed = last_boxed(text)
    assert boxed is None or (isinstance(boxed, str) and boxed in text)
    assert memagent_reward(text, golds) in (0.0, 1.0)
    scores = squad_scores(text, golds)
    assert set(scores) == {"em", "f1", "sub_em"} and all(0.0 <= v <= 1.0 for v in scores.values())
    assert scores["em"] <= scores["sub_em"] and scores["em"] <= scores["f1"] + 1e-12
    for fn in (string_match_all, string_match_part, R.bleu1, R.token_f1_multiset):
        assert 0.0 <= fn(text, golds) <= 1.0


def test_public_contract_names() -> None:
    for name in ("last_boxed", "memagent_reward", "squad_scores", "string_match_all"):
        assert callable(getattr(R, name))
