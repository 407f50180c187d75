"""Porter stemmer in NLTK's default mode (`nltk.stem.PorterStemmer()`, mode NLTK_EXTENSIONS), without nltk.

Owns: `porter_stem(word)`. LoCoMo's official F1 (snap-research/locomo, task_eval/evaluation.py `f1_score`) stems every
token with `nltk.stem.PorterStemmer().stem`; memjax does not depend on nltk, so this module re-implements that mode
rule for rule: Porter (1980) steps 1a-5b plus NLTK's extensions (the irregular-forms pool, words of length <= 2
left alone, 'ies'/'ied' on 4-letter words, step 1c only after a consonant that is not the whole stem, 'alli' first
and re-run through step 2, 'fulli' and 'logi', the 2-letter vc form of *o). Port of nltk 3.10.4
nltk/stem/porter.py (Apache-2.0, (C) NLTK Project), restricted to that mode.
Invariants: equal to nltk's `PorterStemmer().stem` (3.9.1, the goldens' version; 3.10.4 stems the same word list
identically) through the LoCoMo goldens (tests/fixtures/metric_goldens_locomo.json) and a word list
(tests/fixtures/porter_goldens_nltk.json).
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiou")
_IRREGULAR = {"sky": ["sky", "skies"], "die": ["dying"], "lie": ["lying"], "tie": ["tying"], "news": ["news"],
              "inning": ["innings", "inning"], "outing": ["outings", "outing"], "canning": ["cannings", "canning"],
              "howe": ["howe"], "proceed": ["proceed"], "exceed": ["exceed"], "succeed": ["succeed"]}
_POOL = {v: k for k, vs in _IRREGULAR.items() for v in vs}


def _flags(word: str) -> list[bool]:
    """True where word[i] is a consonant ('y' is one iff it starts the word or follows a vowel)."""
    out: list[bool] = []
    for i, ch in enumerate(word):
        if ch in _VOWELS:
            out.append(False)
        elif ch == "y":
            out.append(True if i == 0 else not out[i - 1])
        else:
            out.append(True)
    return out


def _cons(word: str, i: int) -> bool:
    return _flags(word[: i + 1])[i]


def _measure(stem: str) -> int:
    return "".join("c" if c else "v" for c in _flags(stem)).count("vc")


def _pos(stem: str) -> bool:
    return _measure(stem) > 0


def _has_vowel(stem: str) -> bool:
    return not all(_flags(stem))


def _double_cons(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _cons(word, len(word) - 1)


def _cvc(word: str) -> bool:
    n = len(word)
    if n >= 3 and _cons(word, n - 3) and not _cons(word, n - 2) and _cons(word, n - 1) and word[-1] not in "wxy":
        return True
    return n == 2 and not _cons(word, 0) and _cons(word, 1)


def _rules(word: str, rules) -> str:
    """The first rule whose suffix matches decides: its condition true -> replaced, false -> word unchanged."""
    for suffix, repl, cond in rules:
        if suffix == "*d" and _double_cons(word):
            stem = word[:-2]
            return stem + repl if cond is None or cond(stem) else word
        if word.endswith(suffix):
            stem = word[: len(word) - len(suffix)] if suffix else word
            return stem + repl if cond is None or cond(stem) else word
    return word


def _step1a(w: str) -> str:
    if w.endswith("ies") and len(w) == 4:
        return w[:-3] + "ie"
    return _rules(w, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)])


def _step1b(w: str) -> str:
    if w.endswith("ied"):
        return w[:-3] + ("ie" if len(w) == 4 else "i")
    if w.endswith("eed"):
        stem = w[:-3]
        return stem + "ee" if _measure(stem) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            s = w[: -len(suffix)]
            break
    else:
        return w
    return _rules(s, [("at", "ate", None), ("bl", "ble", None), ("iz", "ize", None),
                      ("*d", s[-1], lambda stem: s[-1] not in ("l", "s", "z")),
                      ("", "e", lambda stem: _measure(stem) == 1 and _cvc(stem))])


def _step1c(w: str) -> str:
    return _rules(w, [("y", "i", lambda stem: len(stem) > 1 and _cons(stem, len(stem) - 1))])


_STEP2 = [("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
          ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"), ("ization", "ize"),
          ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"),
          ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"), ("fulli", "ful")]


def _step2(w: str) -> str:
    if w.endswith("alli") and _pos(w[:-4]):
        return _step2(w[:-4] + "al")
    rules = [(s, r, _pos) for s, r in _STEP2] + [("logi", "log", lambda stem: _pos(w[:-3]))]
    return _rules(w, rules)


def _step3(w: str) -> str:
    return _rules(w, [(s, r, _pos) for s, r in (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"),
                                                ("ical", "ic"), ("ful", ""), ("ness", ""))])


def _step4(w: str) -> str:
    def gt1(stem):
        return _measure(stem) > 1
    rules = [(s, "", gt1) for s in ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent")]
    rules.append(("ion", "", lambda stem: _measure(stem) > 1 and stem[-1] in ("s", "t")))
    rules += [(s, "", gt1) for s in ("ou", "ism", "ate", "iti", "ous", "ive", "ize")]
    return _rules(w, rules)


def _step5a(w: str) -> str:
    if w.endswith("e"):
        stem = w[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            return stem
    return w


def _step5b(w: str) -> str:
    return _rules(w, [("ll", "l", lambda stem: _measure(w[:-1]) > 1)])


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    """`nltk.stem.PorterStemmer().stem(word)` (lower-cases first, like nltk's default `to_lowercase=True`)."""
    stem = word.lower()
    if stem in _POOL:
        return _POOL[stem]
    if len(word) <= 2:
        return stem
    for step in (_step1a, _step1b, _step1c, _step2, _step3, _step4, _step5a, _step5b):
        stem = step(stem)
    return stem
