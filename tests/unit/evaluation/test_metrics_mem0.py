"""Mem0's official F1 / BLEU-1 (evaluation/metrics/utils.py) and nltk's word_tokenize, reproduced on golden outputs of
the official code (scripts/gen_locomo_mem0_goldens.py, nltk 3.9.1)."""

import json
import math
from pathlib import Path

import pytest

from memjax.evaluation.metrics_mem0 import mem0_bleu1, mem0_f1
from memjax.evaluation.nltk_text import sent_tokenize, word_tokenize_lower

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _load(name):
    return json.loads((FIX / name).read_text(encoding="utf-8"))


def test_mem0_matches_official_goldens():
    data = _load("metric_goldens_mem0.json")
    assert data["meta"]["repo"] == "mem0ai/mem0" and data["meta"]["commit"] == "373709f"
    assert data["meta"]["nltk"] == "3.9.1" and len(data["cases"]) >= 1000
    bad = [(c["pred"], c["gold"], k, c[k], got) for c in data["cases"] for k, fn in (("f1", mem0_f1), ("bleu1", mem0_bleu1))
           if abs((got := fn(c["pred"], c["gold"])) - c[k]) > 1e-12]
    assert not bad, f"{len(bad)} mismatches, first: {bad[:3]}"


def test_word_tokenize_matches_nltk_on_conversation_turns():
    data = _load("word_tokenize_goldens_nltk.json")
    assert data["meta"]["nltk"] == "3.9.1" and len(data["cases"]) >= 1500
    bad = [(c["text"], c["tokens"]) for c in data["cases"] if word_tokenize_lower(c["text"]) != c["tokens"]]
    assert not bad, f"{len(bad)} mismatches, first: {bad[:2]}"
    # the goldens exercise the sentence splitter: most turns have several sentences
    assert sum(len(sent_tokenize(c["text"].lower())) > 1 for c in data["cases"]) > 1000


def test_mem0_quirks():
    assert word_tokenize_lower("Mr. Smith left. He didn't!") == ["mr.", "smith", "left", ".", "he", "did", "n't", "!"]
    assert mem0_f1("The cat, the cat.", "cat the") == 1.0                  # sets; '.' and ',' split; articles kept
    assert mem0_f1("", "x") == 0.0 and mem0_f1(None, "x") == 0.0 and mem0_f1("x", "") == 0.0
    assert mem0_bleu1("dog", "cat") == 0.0                                  # no unigram match: 0 before smoothing
    # ',' is a token of its own: all 3 predicted tokens match, brevity penalty exp(1 - 4/3)
    assert mem0_bleu1("7 May 2023", "7 May, 2023") == pytest.approx(math.exp(1 - 4 / 3))
    assert mem0_bleu1("7 may , 2023 again", "7 May, 2023") == pytest.approx(4 / 5)
