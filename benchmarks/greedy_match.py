"""Do two engine variants generate the same greedy tokens? (issue 47: every speed change shown with its tokens.)

  python -m benchmarks.greedy_match BEFORE.npy AFTER.npy [--json FILE]

Each file is an int32 [sequences, tokens] array of greedy tokens (-1 past a sequence's end), as
`benchmarks.rollout_throughput --mode sweep --greedy-tokens` saves them for the same prompts. Reports the fraction of
sequences whose tokens are identical, the fraction of token positions that agree, and, where sequences diverge, the
median index of the first differing token (bf16 variants that round differently flip a near-tie and then diverge,
so "identical" is the strict test and the first-divergence index says how late it happens). Exit status 0; the
verdict is in the output. Owns `compare(a, b) -> dict`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def compare(a: np.ndarray, b: np.ndarray) -> dict:
    """Token agreement of two [n, t] greedy-token arrays of the same prompts."""
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"greedy_match: the arrays must have one [sequences, tokens] shape, got {a.shape} and {b.shape}")
    diff = a != b
    same_seq = ~diff.any(axis=1)
    first = np.where(diff.any(axis=1), diff.argmax(axis=1), a.shape[1])
    return dict(sequences=int(a.shape[0]), tokens=int(a.shape[1]), identical_sequences=float(same_seq.mean()),
                agreeing_tokens=float((~diff).mean()),
                median_first_divergence=float(np.median(first[~same_seq])) if (~same_seq).any() else None)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--json", type=Path, help="also write the result here")
    a = ap.parse_args(argv)
    for f in (a.before, a.after):
        if not f.is_file():
            raise SystemExit(f"greedy_match: no such file: {f}")
    try:
        res = compare(np.load(a.before), np.load(a.after))
    except ValueError as e:
        raise SystemExit(str(e)) from None
    res.update(before=str(a.before), after=str(a.after))
    print(json.dumps(res))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    return res


if __name__ == "__main__":
    main()
