"""nltk's English text tools as the official LoCoMo and Mem0 evaluations call them, with no nltk data download.

Owns: `word_tokenize_lower(text)` (= `nltk.word_tokenize(text.lower())`, the tokenisation of Mem0's BLEU-1),
`sent_tokenize(text)` (nltk's Punkt sentence splitter, English model) and `porter_stem(word)` (nltk's default
`PorterStemmer().stem`, the stemming of LoCoMo's F1). nltk is a pinned dependency (pyproject.toml: the release the
official evaluations ran, 3.9.1); what it lacks offline is only the Punkt model, which `nltk.word_tokenize` looks up
in nltk_data. Here the Punkt tokenizer is built from the parameters memjax ships (memjax/assets/punkt, NOTICE.md
there): all abbreviation types and collocations of the English model and, of its orthographic context, the entries
that can change a decision on lower-cased text (types seen lower-case at a sentence start and never upper-case; the
sentence-starter list and the other entries are only read for tokens that begin upper-case, and lower-cased text has
none of the table's types so). Word tokenisation is then what `nltk.word_tokenize` does: `NLTKWordTokenizer` on each
Punkt sentence.
Invariants: equal to nltk 3.9.1 with its full English Punkt model on lower-cased text (the Mem0 BLEU-1 and
word-tokenize goldens in tests/fixtures); nothing is downloaded and nltk_data is never read.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import lru_cache
from importlib import resources

from nltk.stem.porter import PorterStemmer
from nltk.tokenize.destructive import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

_ASSET = ("assets", "punkt", "english_lower.json")


@lru_cache(maxsize=1)
def _punkt() -> PunktSentenceTokenizer:
    path = resources.files("memjax").joinpath(*_ASSET)
    raw = json.loads(path.read_text("utf-8"))
    params = PunktParameters()
    params.abbrev_types = set(raw["abbrev_types"])
    params.collocations = {tuple(c) for c in raw["collocations"]}
    params.ortho_context = defaultdict(int, {k: int(v) for k, v in raw["ortho_context"].items()})
    return PunktSentenceTokenizer(params)


_WORD_TOKENIZER = NLTKWordTokenizer()
_STEMMER = PorterStemmer()          # mode NLTK_EXTENSIONS, lower-cases: nltk's default, as LoCoMo constructs it


def sent_tokenize(text: str) -> list[str]:
    """Punkt sentences of `text` (English parameters; meant for lower-cased text, see the module docstring)."""
    return _punkt().tokenize(text)


def word_tokenize_lower(text: str) -> list[str]:
    """`nltk.word_tokenize(text.lower())`."""
    return [tok for sent in sent_tokenize(text.lower()) for tok in _WORD_TOKENIZER.tokenize(sent)]


def porter_stem(word: str) -> str:
    """`nltk.stem.PorterStemmer().stem(word)`."""
    return _STEMMER.stem(word)
