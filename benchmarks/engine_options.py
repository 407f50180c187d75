"""`--engine KEY=VALUE` for the GPU benchmarks: EngineConfig fields set from the command line, so one GPU run can time
the old and the new engine path side by side (issue 47: layers=unrolled, fuse_projections=true, prefill_buckets=8).

Owns `add_engine_option(parser)` and `engine_overrides(pairs)`: each KEY must be an EngineConfig field, VALUE is
converted to the field's default's type (bool: true/false; int; float; str); bad input exits with one line naming it.
"""

from __future__ import annotations

import argparse
import dataclasses


def add_engine_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--engine", action="append", default=[], metavar="KEY=VALUE",
                    help="EngineConfig field for the engines this benchmark builds (repeatable), e.g. layers=unrolled")


def engine_overrides(pairs: list[str]) -> dict:
    """['layers=unrolled', 'fuse_projections=true'] -> {'layers': 'unrolled', 'fuse_projections': True}."""
    from memjax.engine.config import EngineConfig

    defaults = {f.name: f.default for f in dataclasses.fields(EngineConfig)}
    out = {}
    for pair in pairs:
        key, sep, val = pair.partition("=")
        if not sep or key not in defaults:
            raise SystemExit(f"--engine {pair!r}: expected KEY=VALUE with KEY an EngineConfig field "
                             f"(e.g. layers=unrolled)")
        d = defaults[key]
        if isinstance(d, bool):
            if val.lower() not in ("true", "false"):
                raise SystemExit(f"--engine {pair!r}: {key} takes true or false")
            out[key] = val.lower() == "true"
        elif isinstance(d, float):
            try:
                out[key] = float(val)
            except ValueError:
                raise SystemExit(f"--engine {pair!r}: {key} takes a number") from None
        elif isinstance(d, int):
            try:
                out[key] = int(val)
            except ValueError:
                raise SystemExit(f"--engine {pair!r}: {key} takes an int") from None
        else:
            out[key] = val
    return out
