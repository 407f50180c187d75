r"""`\boxed{}` answer extraction, the MATH-style `strip_string` normaliser, and MemAgent's training reward.

Owns: `last_boxed`, `strip_string`, `memagent_score` / `memagent_reward`, and `RewardStats` (the counter of
missing answers every scorer in memjax.rewards can update).

MemAgent's training reward (verl `reward_score/hotpotqa.py` in the MemAgent repo, reimplemented leniently; the
exact reference is memjax/rewards/memagent_official.py): keep the last 300 characters of the response, lower-case
them, take the last boxed answer, and score 1.0 if `strip_string(answer) == strip_string(ground_truth.lower())`
for any ground truth, else 0.0. `last_boxed`'s docstring lists where it deliberately differs from the reference.

Invariants: never raises on model output (any `str`, or a non-str, which scores as missing); a missing answer
scores 0.0 and is counted when a `RewardStats` is passed; `last_boxed` returns the LAST box's argument with
nested braces kept, None when there is none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .golds import as_golds

_COMMAND = re.compile(r"\\(boxed|fbox)(?![A-Za-z])")
_SPACE = " \t\r\n"
TAIL_CHARS = 300  # the reference scores only the last 300 characters of a response


@dataclass
class RewardStats:
    """Counts scored responses and those without an extractable answer (scored 0.0). Mutable; not thread-safe."""

    total: int = 0
    missing: int = 0

    def record(self, missing: bool) -> None:
        self.total += 1
        self.missing += int(missing)

    @property
    def missing_rate(self) -> float:
        return self.missing / self.total if self.total else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"total": self.total, "missing": self.missing, "missing_rate": self.missing_rate}


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` / `\\fbox{...}` / `\\boxed x` in `text`, or None.

    The argument of the LAST `\\boxed` / `\\fbox` command, nested braces kept: for `\\boxed{...}` /
    `\\boxed {...}` / `\\fbox{...}` the brace-matched content, for the space form `\\boxed x` the text after the
    spaces up to the first `$` or line end (stripped); None when that last command is unbalanced or not followed by
    an argument (`\\boxed{}` gives ""). Deliberate differences from MemAgent's reference extractor
    (memjax.rewards.memagent_official): the last command wins (the reference preferred any `\\boxed ` space form
    over a later `\\boxed{}`), the space form stops at a line end, and `\\fbox{}` answers are scored (the
    reference's `remove_boxed` asserted a `\\boxed{` prefix, so they scored 0)."""
    if not isinstance(text, str):
        return None
    match = max(_COMMAND.finditer(text), key=lambda m: m.start(), default=None)
    if match is None:
        return None
    start = j = match.end()
    while j < len(text) and text[j] in _SPACE:
        j += 1
    if j < len(text) and text[j] == "{":
        depth = 0
        for k in range(j, len(text)):
            c = text[k]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return text[j + 1:k]
        return None
    if match.group(1) == "boxed" and j > start and j < len(text):
        arg = re.split(r"[$\n]", text[j:], maxsplit=1)[0].strip()
        return arg or None
    return None


def strip_string(string: str) -> str:
    """The MemAgent reward's normaliser (a short MATH `strip_string`).

    Drop newlines, `\\!`, `\\left`, `\\right`, degree marks, `\\$`, `\\%`; `\\\\` -> `\\`;
    `tfrac`/`dfrac` -> `frac`; `" ."` -> `" 0."`, `"{."` -> `"{0."`; then remove every space."""
    s = string.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\$", "").replace("\\%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    return s.replace(" ", "")


@dataclass(frozen=True)
class BoxedScore:
    """A scored response: the score and the extracted (lower-cased) answer, None when missing."""

    score: float
    answer: str | None


def memagent_score(text: str, ground_truths: str | Sequence[object], *,
                   tail_chars: int | None = TAIL_CHARS) -> BoxedScore:
    """MemAgent's training reward with the extracted answer (for logging). `tail_chars=None` scores the whole text."""
    truths = as_golds(ground_truths, "memagent_reward", "ground_truths")
    if not isinstance(text, str):
        return BoxedScore(0.0, None)
    window = (text[-tail_chars:] if tail_chars else text).lower()
    answer = last_boxed(window)
    if answer is None:
        return BoxedScore(0.0, None)
    pred = strip_string(answer)
    return BoxedScore(float(any(pred == strip_string(t.lower()) for t in truths)), answer)


def memagent_reward(text: str, ground_truths: str | Sequence[object], *, tail_chars: int | None = TAIL_CHARS,
                    stats: RewardStats | None = None) -> float:
    """1.0 if the last boxed answer equals a ground truth after lower-casing and `strip_string`, else 0.0."""
    result = memagent_score(text, ground_truths, tail_chars=tail_chars)
    if stats is not None:
        stats.record(result.answer is None)
    return result.score
