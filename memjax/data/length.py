"""Fitting a synthesised text to a target token count.

Owns: `fit_units`, the search RULER-style generators use to pick how many haystack units (noise sentences, essay
words, list words, documents, ...) a context holds.

Contract: `build(n)` renders the text with `n` units and must be a deterministic function of `n` whose token count
is non-decreasing in `n` (every generator draws its randomness once, before fitting, so unit n+1 only adds text).
`fit_units` returns the LARGEST `n` in `[lo, hi]` with `count(build(n)) <= target`. The tolerance is therefore one
unit: `target - tokens < tokens(n + 1) - tokens(n)` whenever `n < hi` (a noise sentence ~20 tokens, a list word ~4,
a document ~150). Callers check a task-specific minimum fill on top (see `memjax.data.ruler`).

The search is interpolation (regula falsi on the near-linear token count) safeguarded by bisection, so a 128K-token
context costs ~4-6 full tokenisations instead of ~17.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Fit:
    """The chosen unit count, its text and token count, and how many texts were tokenised to find it."""

    units: int
    text: str
    tokens: int
    evaluations: int


class TargetTooSmall(ValueError):
    """Even the minimum number of units exceeds the target."""


def fit_units(build: Callable[[int], str], count: Callable[[str], int], target: int, *, lo: int,
              hi: int | None = None, probe: int = 8) -> Fit:
    """Largest `n` in `[lo, hi]` (`hi=None`: unbounded) with `count(build(n)) <= target`."""
    if target < 1:
        raise ValueError(f"fit_units: target must be >= 1 token, got {target}")
    if hi is not None and hi < lo:
        raise ValueError(f"fit_units: empty unit range [{lo}, {hi}]")
    cache: dict[int, tuple[str, int]] = {}

    def ev(n: int) -> int:
        if n not in cache:
            text = build(n)
            cache[n] = (text, count(text))
        return cache[n][1]

    def done(n: int) -> Fit:
        return Fit(units=n, text=cache[n][0], tokens=cache[n][1], evaluations=len(cache))

    c_lo = ev(lo)
    if c_lo > target:
        raise TargetTooSmall(f"the minimum of {lo} units already has {c_lo} tokens > target {target}")
    if hi == lo:
        return done(lo)
    # Slope estimate from a small probe, then extrapolate until the target is exceeded (or hi is reached).
    n1 = lo + probe if hi is None else min(hi, lo + probe)
    c1 = ev(n1)
    if c1 <= target and n1 == hi:
        return done(n1)
    good, c_good = (n1, c1) if c1 <= target else (lo, c_lo)
    bad: int | None = None if c1 <= target else n1
    c_bad = c1
    while bad is None:
        slope = max((c_good - c_lo) / max(good - lo, 1), 0.25)
        step = max(1, int((target - c_good) / slope * 1.02) + 1)
        step = min(step, 1024 * max(good - lo, probe))  # bounded growth if the slope estimate is off
        n = good + step if hi is None else min(hi, good + step)
        c = ev(n)
        if c <= target:
            good, c_good = n, c
            if n == hi:
                return done(n)
        else:
            bad, c_bad = n, c
    # Invariant: c(good) <= target < c(bad), good < bad. Regula falsi with a bisection safeguard.
    use_bisect = False
    while bad - good > 1:
        if use_bisect or c_bad == c_good:
            mid = (good + bad) // 2
        else:
            mid = good + int((target - c_good) * (bad - good) / (c_bad - c_good))
            mid = min(max(mid, good + 1), bad - 1)
        width = bad - good
        c = ev(mid)
        if c <= target:
            good, c_good = mid, c
        else:
            bad, c_bad = mid, c
        use_bisect = (bad - good) * 2 > width  # interpolation shrank the bracket by less than half: bisect next
    return done(good)
