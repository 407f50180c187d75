"""memjax's Porter stemmer equals nltk's default PorterStemmer on a word list it stemmed (scripts/gen_locomo_mem0_goldens.py)."""

import json
from pathlib import Path

from memjax.evaluation.nltk_text import porter_stem

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "porter_goldens_nltk.json"


def test_porter_matches_nltk_word_list():
    data = json.loads(FIX.read_text(encoding="utf-8"))
    assert data["meta"]["class"] == "nltk.stem.PorterStemmer()" and len(data["stems"]) >= 5000
    bad = [(w, s, porter_stem(w)) for w, s in data["stems"].items() if porter_stem(w) != s]
    assert not bad, f"{len(bad)} mismatches, first: {bad[:5]}"


def test_porter_nltk_extensions():
    # Porter (1980) examples, and the rules nltk's default mode adds
    assert [porter_stem(w) for w in ("caresses", "ponies", "relational", "hopping", "filing", "controll")] == \
        ["caress", "poni", "relat", "hop", "file", "control"]
    assert porter_stem("dying") == "die" and porter_stem("skies") == "sky"      # irregular-forms pool
    assert porter_stem("dies") == "die" and porter_stem("spied") == "spi"       # 4-letter ies / ied
    assert porter_stem("enjoy") == "enjoy" and porter_stem("happy") == "happi"  # step 1c after a consonant only
    assert porter_stem("is") == "is" and porter_stem("Running") == "run"         # <= 2 letters kept; lower-cased
