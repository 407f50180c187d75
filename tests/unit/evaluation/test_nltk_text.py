"""The metrics' nltk runs offline: Punkt is built from memjax's shipped parameters, nltk_data is never looked up,
and the pinned nltk is the release the goldens were made with."""

import importlib.metadata
import sys

import nltk.data
import pytest

from memjax.evaluation import nltk_text


def test_no_nltk_data_lookup(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"nltk data looked up: {args}")

    monkeypatch.setattr(nltk.data, "find", refuse)
    monkeypatch.setattr(nltk.data, "load", refuse)
    nltk_text._punkt.cache_clear()
    try:
        assert nltk_text.word_tokenize_lower("Dr. Who arrived at 5 p.m. yesterday. Then he left.") == [
            "dr.", "who", "arrived", "at", "5", "p.m.", "yesterday", ".", "then", "he", "left", "."]  # abbreviations kept
        assert nltk_text.porter_stem("Generously") == "gener"
    finally:
        nltk_text._punkt.cache_clear()


def test_pinned_release():
    # the goldens (tests/fixtures/*_nltk.json, metric_goldens_mem0.json) were made with 3.9.1; 3.10 moves a BLEU-1 pair
    assert importlib.metadata.version("nltk") == "3.9.1"


def test_missing_nltk_is_one_line(monkeypatch):
    # memjax imports without nltk (the GPU image has none, tests/e2e/benchmarks/test_gpu_pass.py); a metric then says so
    monkeypatch.setitem(sys.modules, "nltk", None)
    with pytest.raises(ImportError, match=r"need nltk: pip install nltk==3\.9\.1"):
        nltk_text.nltk_module()
