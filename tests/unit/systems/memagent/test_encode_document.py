"""A long MemAgent document is tokenised in pieces with ids equal to encoding it whole (issue 49: constant memory).

The shipped Qwen2.5 tokenizer encodes a generated multi-document context, full of what the byte-level split pattern
treats specially at a line start (punctuation and spaces before newlines, CRLF, tabs, digits, non-ASCII letters,
emoji, special-token strings, runs of blank lines), whole and in pieces of a few hundred characters.
"""

import numpy as np

from memjax.core.tokenizer import _default as shipped_tokenizer
from memjax.data.hotpotqa import format_context
from memjax.systems.memagent.workflow import _CUT, encode_document

LINES = ["Paris is the capital.", "ends with a space \n", "crlf line\r\n", "\ttabbed", "42 is a number", "élan vital",
         "中文文本在这里", "emoji 🎉 here", "<|im_end|> special", "  two spaces", "x", "'s quote", "end!!!\n\n\n",
         "Über alles", "lower start", "A", "3.14", "—dash", "naïve café", "\u00a0nbsp"]


def _docs(n, seed=0):
    rng = np.random.default_rng(seed)
    return [f"Title {k}\n" + "\n".join(rng.choice(LINES, rng.integers(1, 8))) for k in range(n)]


def test_pieces_equal_the_whole():
    tok = shipped_tokenizer()
    text = format_context(_docs(120)) + "\nlast line\n"
    cuts = len(_CUT.findall(text))
    assert len(text) > 8000 and cuts > 200
    whole = np.asarray(tok.encode(text), np.int32)
    for piece in (1, 97, 300, 2500, len(text)):
        got = encode_document(tok, text, piece_chars=piece)
        assert got.dtype == np.int32 and np.array_equal(got, whole), piece
    assert np.array_equal(encode_document(tok, "no newline " * 50, piece_chars=10),
                          np.asarray(tok.encode("no newline " * 50), np.int32))   # no cut point: encoded whole
