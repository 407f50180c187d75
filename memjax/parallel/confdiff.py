"""What differs between two processes' settings, by name: flat config fields and source files.

Owns `flatten(d)` (a nested dict -> {"a.b.c": leaf}), `differing(a, b)` (the sorted keys whose values differ or
that only one side has), `source_digests()` (memjax's .py files -> short sha256 each) and `agree_fields(name,
flat)`: every process publishes its flat dict (memjax.parallel.startup.exchange) and each compares every other
process's to its own; a difference is one `DistributedMismatch` line naming the first few differing fields and
both values, raised on every process.
Invariants: values compare by their JSON text (tuples and lists alike); with one process nothing is exchanged.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

_SHOWN = 4  # fields named in full in one line; the rest are counted


def flatten(d, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = json.loads(json.dumps(v, default=str))
    return out


def differing(a: dict, b: dict) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if k not in a or k not in b or a[k] != b[k])


def source_digests() -> dict:
    root = Path(__file__).resolve().parents[1]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()[:12]
            for p in sorted(root.rglob("*.py"))}


def describe(a: dict, b: dict, keys: list[str], values: bool = True) -> str:
    def one(k):
        if not values:
            return k
        return f"{k} ({json.dumps(a.get(k, '<absent>'))} vs {json.dumps(b.get(k, '<absent>'))})"

    shown = ", ".join(one(k) for k in keys[:_SHOWN])
    return shown + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def agree_fields(name: str, flat: dict, fix: str, values: bool = True) -> None:
    """Raise DistributedMismatch (one line, on every process) unless every process passed the same `flat`."""
    import jax

    from .distributed import DistributedMismatch
    from .startup import exchange

    if jax.process_count() == 1:
        return
    everyone = exchange(name, flat)
    me = jax.process_index()
    for p, theirs in enumerate(everyone):
        keys = differing(flat, theirs)
        if keys:
            raise DistributedMismatch(f"process {me} and process {p} differ in the {name}: "
                                      f"{describe(flat, theirs, keys, values)}; {fix}")
