"""`nltk.word_tokenize(text.lower())` (nltk 3.9.1, English Punkt model) without nltk or its data download.

Owns: `word_tokenize_lower(text)`, the tokenisation behind Mem0's BLEU-1 (mem0ai/mem0 evaluation/metrics/utils.py
`calculate_bleu_scores` lower-cases both sides, then calls `nltk.word_tokenize`). It is nltk's two stages, ported
from nltk 3.9.1 (Apache-2.0, (C) NLTK Project), which used the standard `re` module:
1. `sent_tokenize`: the Punkt sentence splitter (nltk/tokenize/punkt.py, `PunktSentenceTokenizer.tokenize` with
   boundary realignment): candidate ends `. ? !` followed by punctuation or a next token; a candidate context is a
   break when its first token is marked one by the first pass (`. ? !` alone; a period-final token that is not an
   abbreviation nor an ellipsis) and the second pass (collocations; the orthographic heuristic after initials and
   numbers) keeps it.
2. `NLTKWordTokenizer.tokenize` on each sentence (nltk/tokenize/destructive.py): the Treebank regexes (quotes,
   punctuation, final period, brackets, double dashes, clitics, MacIntyre contractions).
Parameters: the English Punkt model's abbreviation types and collocations, and of its orthographic context only the
entries that can change a decision on lower-cased text (memjax/assets/punkt/english_lower.json, NOTICE.md there,
written from nltk's `load_punkt_params` by scripts/gen_locomo_mem0_goldens.py --write-punkt-asset). Why that
subset suffices: the text is lower-cased first, so no token of the table's (ASCII) types starts upper-case; then the orthographic heuristic only
asks, for a next token starting lower-case, whether its type was seen at a sentence start in lower case and never
upper-case (`_ORTHO_BEG_LC` and not `_ORTHO_UC`), and the sentence-starter list is only read for upper-case next tokens.
Invariants: equal to nltk 3.9.1's `word_tokenize(text.lower())` on the Mem0 BLEU goldens
(tests/fixtures/metric_goldens_mem0.json); only for lower-cased text (the function lower-cases its input).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

# ---- Punkt (nltk/tokenize/punkt.py, PunktLanguageVars and PunktSentenceTokenizer) ----
_ORTHO_BEG_UC, _ORTHO_MID_UC, _ORTHO_UNK_UC = 1 << 1, 1 << 2, 1 << 3
_ORTHO_BEG_LC, _ORTHO_MID_LC, _ORTHO_UNK_LC = 1 << 4, 1 << 5, 1 << 6
_ORTHO_UC = _ORTHO_BEG_UC + _ORTHO_MID_UC + _ORTHO_UNK_UC
_ORTHO_LC = _ORTHO_BEG_LC + _ORTHO_MID_LC + _ORTHO_UNK_LC

_SENT_END_CHARS = (".", "?", "!")
_RE_SENT_END = "[%s]" % re.escape("".join(_SENT_END_CHARS))
_RE_NON_WORD = r"(?:[)\";}\]\*:@\'\({\[%s])" % re.escape("".join(sorted(set(_SENT_END_CHARS) - {"."})))
_RE_MULTI_CHAR = r"(?:\-{2,}|\.{2,}|(?:\.\s){2,}\.)"
_RE_WORD_START = r"[^\(\"\`{\[:;&\#\*@\)}\]\-,]"
_WORD_RE = re.compile(r"""(
        %(MultiChar)s
        |
        (?=%(WordStart)s)\S+?  # Accept word characters until end is found
        (?= # Sequences marking a word's end
            \s|                                 # White-space
            $|                                  # End-of-string
            %(NonWord)s|%(MultiChar)s|          # Punctuation
            ,(?=$|\s|%(NonWord)s|%(MultiChar)s) # Comma if at end of word
        )
        |
        \S
    )""" % {"NonWord": _RE_NON_WORD, "MultiChar": _RE_MULTI_CHAR, "WordStart": _RE_WORD_START},
    re.UNICODE | re.VERBOSE)
_PERIOD_CONTEXT_RE = re.compile(r"""
        %(SentEndChars)s             # a potential sentence ending
        (?=(?P<after_tok>
            %(NonWord)s              # either other punctuation
            |
            \s+(?P<next_tok>\S+)     # or whitespace and some other token
        ))""" % {"NonWord": _RE_NON_WORD, "SentEndChars": _RE_SENT_END}, re.UNICODE | re.VERBOSE)
_RE_BOUNDARY_REALIGN = re.compile(r'["\')\]}]+?(?:\s+|(?=--)|$)', re.MULTILINE)
_RE_ELLIPSIS = re.compile(r"\.\.+$")
_RE_NUMERIC = re.compile(r"^-?[\.,]?\d[\d,\.-]*\.?$")
_RE_INITIAL = re.compile(r"[^\W\d]\.$", re.UNICODE)
_PUNCTUATION = tuple(";:,.!?")
_WHITESPACE = " \t\n\r\x0b\x0c"          # string.whitespace


@lru_cache(maxsize=1)
def _params() -> tuple[frozenset, frozenset, dict]:
    raw = json.loads((resources.files("memjax") / "assets" / "punkt" / "english_lower.json").read_text("utf-8"))
    return (frozenset(raw["abbrev_types"]), frozenset(tuple(c) for c in raw["collocations"]),
            dict(raw["ortho_context"]))


class _Tok:
    __slots__ = ("tok", "type", "period_final", "sentbreak", "abbr", "ellipsis")

    def __init__(self, tok: str):
        self.tok = tok
        self.type = _RE_NUMERIC.sub("##number##", tok.lower())
        self.period_final = tok.endswith(".")
        self.sentbreak = self.abbr = self.ellipsis = None

    @property
    def type_no_period(self) -> str:
        return self.type[:-1] if len(self.type) > 1 and self.type[-1] == "." else self.type

    @property
    def type_no_sentperiod(self) -> str:
        return self.type_no_period if self.sentbreak else self.type


def _tokens(text: str):
    for line in text.split("\n"):
        if line.strip():
            for tok in _WORD_RE.findall(line):
                yield _Tok(tok)


def _first_pass(t: _Tok, abbrevs: frozenset) -> None:
    tok = t.tok
    if tok in _SENT_END_CHARS:
        t.sentbreak = True
    elif _RE_ELLIPSIS.match(tok):
        t.ellipsis = True
    elif t.period_final and not tok.endswith(".."):
        if tok[:-1].lower() in abbrevs or tok[:-1].lower().split("-")[-1] in abbrevs:
            t.abbr = True
        else:
            t.sentbreak = True


def _ortho_heuristic(t: _Tok, ortho: dict):
    if t.tok in _PUNCTUATION:
        return False
    oc = ortho.get(t.type_no_sentperiod, 0)
    if t.tok[0].isupper() and (oc & _ORTHO_LC) and not (oc & _ORTHO_MID_UC):
        return True
    if t.tok[0].islower() and ((oc & _ORTHO_UC) or not (oc & _ORTHO_BEG_LC)):
        return False
    return "unknown"


def _second_pass(t1: _Tok, t2: _Tok | None, colls: frozenset, ortho: dict) -> None:
    if not t2 or not t1.period_final:
        return
    typ, next_typ = t1.type_no_period, t2.type_no_sentperiod
    initial = _RE_INITIAL.match(t1.tok)
    if (typ, next_typ) in colls:
        t1.sentbreak, t1.abbr = False, True
        return
    if (t1.abbr or t1.ellipsis) and not initial:
        if _ortho_heuristic(t2, ortho) is True:
            t1.sentbreak = True
            return
        # (an upper-case next token in the sentence-starter list: impossible on lower-cased text, see above)
    if initial or typ == "##number##":
        s = _ortho_heuristic(t2, ortho)
        if s is False:
            t1.sentbreak, t1.abbr = False, True
            return
        if s == "unknown" and initial and t2.tok[0].isupper() and not (ortho.get(next_typ, 0) & _ORTHO_LC):
            t1.sentbreak, t1.abbr = False, True


def _contains_sentbreak(text: str) -> bool:
    abbrevs, colls, ortho = _params()
    toks = list(_tokens(text))
    for t in toks:
        _first_pass(t, abbrevs)
    found = False
    for i, t in enumerate(toks):
        _second_pass(t, toks[i + 1] if i + 1 < len(toks) else None, colls, ortho)
        if found:
            return True
        if t.sentbreak:
            found = True
    return False


def _last_ws(text: str) -> int:
    for i in range(len(text) - 1, -1, -1):
        if text[i] in _WHITESPACE:
            return i
    return 0


def _end_contexts(text: str):
    prev_slice, prev_match = slice(0, 0), None
    for m in _PERIOD_CONTEXT_RE.finditer(text):
        before = text[prev_slice.stop: m.start()]
        idx = _last_ws(before)
        idx = idx + prev_slice.stop + 1 if idx else prev_slice.start
        word_slice = slice(idx, m.start())
        if prev_match and prev_slice.stop <= word_slice.start:
            yield prev_match, text[prev_slice] + prev_match.group() + prev_match.group("after_tok")
        prev_match, prev_slice = m, word_slice
    if prev_match:
        yield prev_match, text[prev_slice] + prev_match.group() + prev_match.group("after_tok")


def _slices(text: str):
    last = 0
    for m, context in _end_contexts(text):
        if _contains_sentbreak(context):
            yield slice(last, m.end())
            last = m.start("next_tok") if m.group("next_tok") else m.end()
    yield slice(last, len(text.rstrip()))


def sent_tokenize(text: str) -> list[str]:
    """nltk 3.9.1 `sent_tokenize(text)` (English Punkt, boundary realignment); exact for lower-cased text."""
    slices = list(_slices(text))
    out, realign = [], 0
    for i, s1 in enumerate(slices):
        s1 = slice(s1.start + realign, s1.stop)
        if i + 1 == len(slices):
            if text[s1]:
                out.append(text[s1])
            continue
        s2 = slices[i + 1]
        m = _RE_BOUNDARY_REALIGN.match(text[s2])
        if m:
            out.append(text[s1.start: s2.start + len(m.group(0).rstrip())])
            realign = m.end()
        else:
            realign = 0
            if text[s1]:
                out.append(text[s1])
    return out


# ---- NLTKWordTokenizer (nltk/tokenize/destructive.py, nltk 3.9.1) ----
_STARTING_QUOTES = [
    (re.compile("([«“‘„]|[`]+)", re.U), r" \1 "),
    (re.compile(r"^\""), r"``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r"([ \(\[{<])(\"|\'{2})"), r"\1 `` "),
    (re.compile(r"(?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b", re.U), r"\1 \2"),
]
_ENDING_QUOTES = [
    (re.compile("([»”’])", re.U), r" \1 "),
    (re.compile(r"''"), " '' "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"\s+"), " "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
]
_PUNCT_RULES = [
    (re.compile(r'([^\.])(\.)([\]\)}>"\'' "»”’ " r"]*)\s*$", re.U), r"\1 \2 \3 "),
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.{2,}", re.U), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r'([^\.])(\.)([\]\)}>"\']*)\s*$'), r"\1 \2\3 "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"[*]", re.U), r" \g<0> "),
]
_PARENS_BRACKETS = (re.compile(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ")
_DOUBLE_DASHES = (re.compile(r"--"), r" -- ")
_CONTRACTIONS2 = [re.compile(p) for p in (
    r"(?i)\b(can)(?#X)(not)\b", r"(?i)\b(d)(?#X)('ye)\b", r"(?i)\b(gim)(?#X)(me)\b", r"(?i)\b(gon)(?#X)(na)\b",
    r"(?i)\b(got)(?#X)(ta)\b", r"(?i)\b(lem)(?#X)(me)\b", r"(?i)\b(more)(?#X)('n)\b", r"(?i)\b(wan)(?#X)(na)(?=\s)")]
_CONTRACTIONS3 = [re.compile(p) for p in (r"(?i) ('t)(?#X)(is)\b", r"(?i) ('t)(?#X)(was)\b")]


def treebank_tokenize(text: str) -> list[str]:
    """nltk 3.9.1 `NLTKWordTokenizer().tokenize(text)` (no parenthesis conversion)."""
    for rx, sub in _STARTING_QUOTES:
        text = rx.sub(sub, text)
    for rx, sub in _PUNCT_RULES:
        text = rx.sub(sub, text)
    text = _PARENS_BRACKETS[0].sub(_PARENS_BRACKETS[1], text)
    text = _DOUBLE_DASHES[0].sub(_DOUBLE_DASHES[1], text)
    text = " " + text + " "
    for rx, sub in _ENDING_QUOTES:
        text = rx.sub(sub, text)
    for rx in _CONTRACTIONS2:
        text = rx.sub(r" \1 \2 ", text)
    for rx in _CONTRACTIONS3:
        text = rx.sub(r" \1 \2 ", text)
    return text.split()


def word_tokenize_lower(text: str) -> list[str]:
    """nltk 3.9.1 `word_tokenize(text.lower())` with the English Punkt model."""
    text = text.lower()
    return [tok for sent in sent_tokenize(text) for tok in treebank_tokenize(sent)]
