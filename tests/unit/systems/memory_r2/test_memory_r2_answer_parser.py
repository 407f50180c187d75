"""Memory-R2's answer parser: memjax's `parse_answer_official` equals the official `extract_answer_from_text`
(ahmedehabb/Memory-R2 @357b4ec parse_response.py) on the golden replies made by
scripts/gen_answer_parser_goldens.py (the official function's outputs are stored, not its code), plus the
rules spelled out by hand, the "last_tag" alternative and the answer agent's parser choice."""

import json
from pathlib import Path

import pytest

from memjax.systems.memory_r2.messages import ANSWER_PARSERS, answer_parser, parse_answer, parse_answer_official

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "answer_parser_goldens_memory_r2.json"


def test_equals_official_on_goldens():
    doc = json.loads(FIX.read_text(encoding="utf-8"))
    assert doc["source"]["commit"] == "357b4ec"
    cases = doc["cases"]
    assert len(cases) >= 1000
    bad = [(x, y, parse_answer_official(x)) for x, y in cases if (parse_answer_official(x) or "") != y]
    assert not bad, bad[:5]
    # the goldens exercise every rule and the no-match case
    assert sum(y == "" for _, y in cases) > 20 and sum("<ANSWER>" in x for x, _ in cases) > 10


def test_rules_by_hand():
    assert parse_answer_official("<ANSWER> Paris </Answer> then <answer>Rome</answer>") == "Paris"  # first tag
    assert parse_answer("<ANSWER> Paris </Answer> then <answer>Rome</answer>") == "Rome"  # last_tag: last, exact
    assert parse_answer_official("think\n**Answer:** 7 May 2023 \nmore") == "7 May 2023 "  # rest of line
    assert parse_answer_official("**Answer: Caroline** said so") == "Caroline"
    assert parse_answer_official("Final Answer:\n  Lima  \nbecause") == "Lima  "  # \s* crosses the newline
    assert parse_answer_official("answer: lower case") is None  # rules 2-4 are case-sensitive
    assert parse_answer_official("<answer>unclosed") is None and parse_answer_official(None) is None
    assert parse_answer_official("<answer></answer>") == ""  # matched, empty


def test_parser_choice():
    assert set(ANSWER_PARSERS) == {"official", "last_tag"}
    assert answer_parser("official") is parse_answer_official and answer_parser("last_tag") is parse_answer
    with pytest.raises(ValueError, match="answer parser"):
        answer_parser("first_tag")
    from memjax.systems import MemoryR2Section

    assert MemoryR2Section().answer_parser == "official"
    with pytest.raises(ValueError, match="answer_parser"):
        MemoryR2Section(answer_parser="loose")
