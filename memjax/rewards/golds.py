"""The one normaliser of gold answers / references that every scorer in memjax.rewards accepts.

Owns `as_golds(golds, where, name="golds") -> list[str]`: a single string becomes a one-element list, any
other sequence becomes its items as strings (in order); an empty collection raises a one-line ValueError
naming the caller and the argument (golds come from datasets, never from model output).
"""

from __future__ import annotations

from collections.abc import Sequence


def as_golds(golds: str | Sequence[object], where: str, name: str = "golds") -> list[str]:
    out = [golds] if isinstance(golds, str) else [str(g) for g in golds]
    if not out:
        raise ValueError(f"{where}: {name} must not be empty")
    return out
