"""The tiny tasks' shared words and tokenizer: every paper's tiny task (memjax/systems/<paper>/tiny/task.py) builds its
vocabulary from these lists and tokenises with `TinyTokenizer(words)`.

Owns SPECIALS (the four chat ids, first in every vocabulary), the name lists (PEOPLE, CONTAINERS, PLACES) and
`TinyTokenizer`: a word per token, so every length in a tiny task is exact by construction and nothing is trained
or shipped for the tokenizer.
Invariants: `decode(encode(s)) == " ".join(s.split())` for any string of vocabulary words; unknown words raise a
ValueError naming the word; a vocabulary with a repeated word is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.tokenizer import TokenIds

SPECIALS = ("<pad>", "<user>", "<assistant>", "<end>")
PEOPLE = ("ann", "bob", "cal", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "lee", "max", "ned",
          "oli", "pam")
CONTAINERS = ("bag", "box", "can", "cup", "jar", "pot", "tin", "tub")
PLACES = ("rome", "oslo", "lima", "kiev", "baku", "doha", "riga", "bern", "cairo", "delhi", "paris", "tokyo",
          "quito", "sofia", "dubai", "perth")


class TinyTokenizer:
    """Whitespace word tokenizer over a task's `words` (SPECIALS first). Chat template (ids): per message
    `<role> content <end>`, then `<assistant>` when add_generation_prompt. eos = endoftext = `<end>`, pad = `<pad>`."""

    def __init__(self, words: Sequence[str]):
        self.words = tuple(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        if len(self.ids) != len(self.words):
            raise ValueError("TinyTokenizer: duplicate words in the vocabulary")
        self.vocab_size = len(self.words)
        self.pad_id, self.eos_id = self.ids["<pad>"], self.ids["<end>"]
        self.endoftext_id = self.eos_id
        self.role_ids = {"user": self.ids["<user>"], "assistant": self.ids["<assistant>"]}

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"TinyTokenizer.encode expects str, got {type(text).__name__}")
        out = []
        for w in text.split():
            if w not in self.ids:
                raise ValueError(f"TinyTokenizer.encode: word {w!r} is not in the tiny vocabulary")
            out.append(self.ids[w])
        return out

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False, skip_unknown: bool = False) -> str:
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                if skip_unknown:
                    continue
                raise ValueError(f"TinyTokenizer.decode: id {i} outside the vocabulary [0, {self.vocab_size})")
            if skip_special_tokens and self.words[i] in SPECIALS:
                continue
            out.append(self.words[i])
        return " ".join(out)

    def count_unknown(self, ids: Iterable[int]) -> int:
        return sum(1 for i in ids if not 0 <= int(i) < self.vocab_size)

    def _content(self, content: Any) -> list[int]:
        if isinstance(content, str):
            return self.encode(content)
        out: list[int] = []
        for part in content:
            if isinstance(part, str):
                out += self.encode(part)
            elif isinstance(part, TokenIds):
                out += list(part.ids)
            else:
                out += [int(i) for i in part]
        return out

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True
                            ) -> list[int]:
        out: list[int] = []
        for m in messages:
            role = m.get("role")
            if role not in self.role_ids:
                raise ValueError(f"TinyTokenizer.apply_chat_template: role {role!r} not in {sorted(self.role_ids)}")
            out += [self.role_ids[role], *self._content(m.get("content", "")), self.eos_id]
        if add_generation_prompt:
            out.append(self.role_ids["assistant"])
        return out
