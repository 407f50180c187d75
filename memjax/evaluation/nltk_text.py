"""nltk's English text tools as the official LoCoMo and Mem0 evaluations call them, with no nltk data download.

Owns: `word_tokenize_lower(text)` (= `nltk.word_tokenize(text.lower())`, the tokenisation of Mem0's BLEU-1),
`sent_tokenize(text)` (nltk's Punkt sentence splitter, English model) and `porter_stem(word)` (nltk's default
`PorterStemmer().stem`, the stemming of LoCoMo's F1). nltk is a pinned dependency (pyproject.toml: 3.9.1, the
release the official evaluations ran); offline it lacks only the Punkt model, which is built here from the
parameters memjax ships (memjax/assets/punkt; `_punkt` says which). Word tokenisation is then what
`nltk.word_tokenize` does: `NLTKWordTokenizer` on each Punkt sentence.
nltk is imported on first use (`nltk_module()`), not with memjax.evaluation: the engine, trainer and GPU benchmarks
import the paper registry, which imports the evaluation harness, and the GPU image has no nltk.
Invariants: equal to nltk 3.9.1 with its full English Punkt model on lower-cased text (the Mem0 BLEU-1 and
word-tokenize goldens in tests/fixtures; docs/metric_profiles.md, the `mem0` row); nothing is downloaded and
nltk_data is never read.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import lru_cache
from importlib import resources

_ASSET = ("assets", "punkt", "english_lower.json")


def nltk_module():
    """nltk, imported where a metric first needs it, or one line naming the missing dependency."""
    try:
        import nltk
    except ImportError as e:
        raise ImportError("memjax's LoCoMo / Mem0 metrics need nltk: pip install nltk==3.9.1 (a memjax dependency)") \
            from e
    return nltk


@lru_cache(maxsize=1)
def _punkt():
    """nltk's Punkt tokenizer built from the parameters memjax ships (memjax/assets/punkt, NOTICE.md there).

    They are all abbreviation types and collocations of nltk's English model and, of its orthographic context,
    the entries that can change a decision on lower-cased text (types seen lower-case at a sentence start and
    never upper-case); the sentence-starter list and the other entries are only read for tokens that begin
    upper-case, which lower-cased text does not have."""
    from_nltk = nltk_module().tokenize.punkt
    raw = json.loads(resources.files("memjax").joinpath(*_ASSET).read_text("utf-8"))
    params = from_nltk.PunktParameters()
    params.abbrev_types = set(raw["abbrev_types"])
    params.collocations = {tuple(c) for c in raw["collocations"]}
    params.ortho_context = defaultdict(int, {k: int(v) for k, v in raw["ortho_context"].items()})
    return from_nltk.PunktSentenceTokenizer(params)


@lru_cache(maxsize=1)
def _word_tokenizer():
    return nltk_module().tokenize.destructive.NLTKWordTokenizer()


@lru_cache(maxsize=1)
def _stemmer():
    return nltk_module().stem.porter.PorterStemmer()    # mode NLTK_EXTENSIONS, lower-cases: as LoCoMo builds it


def sent_tokenize(text: str) -> list[str]:
    """Punkt sentences of `text` (English parameters; meant for lower-cased text, see the module docstring)."""
    return _punkt().tokenize(text)


def word_tokenize_lower(text: str) -> list[str]:
    """`nltk.word_tokenize(text.lower())`."""
    tok = _word_tokenizer()
    return [t for sent in sent_tokenize(text.lower()) for t in tok.tokenize(sent)]


def porter_stem(word: str) -> str:
    """`nltk.stem.PorterStemmer().stem(word)`."""
    return _stemmer().stem(word)
