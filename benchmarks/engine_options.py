"""`--engine KEY=VALUE` for the GPU benchmarks: EngineConfig fields set from the command line, so one GPU run can time
the old and the new engine path side by side (issue 47: kernels.layers=unrolled, kernels.fuse_projections=true,
kernels.prefill_buckets=8).

Owns `add_engine_option(parser)`, `engine_overrides(pairs)` and `with_overrides(ecfg, overrides)`: each KEY is an
EngineConfig field's dotted path as `--set engine.KEY` names it (`schedule`, `kv.kv_dtype`, `kernels.layers`), VALUE
is converted to the field's default's type (bool: true/false; int; float; str); bad input exits with one line naming it.
"""

from __future__ import annotations

import argparse
import dataclasses


def add_engine_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--engine", action="append", default=[], metavar="KEY=VALUE",
                    help="EngineConfig field for the engines this benchmark builds (repeatable), e.g. "
                         "kernels.layers=unrolled")


def _leaf_defaults() -> dict:
    """{dotted path: default} of every EngineConfig field, sections (kv, kernels) flattened."""
    from memjax.engine.config import EngineConfig

    out = {}

    def walk(obj, prefix):
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if dataclasses.is_dataclass(v):
                walk(v, f"{prefix}{f.name}.")
            else:
                out[prefix + f.name] = v

    walk(EngineConfig(), "")
    return out


def engine_overrides(pairs: list[str]) -> dict:
    """['kernels.layers=unrolled', 'kernels.fuse_projections=true'] ->
    {'kernels.layers': 'unrolled', 'kernels.fuse_projections': True}."""
    defaults = _leaf_defaults()
    out = {}
    for pair in pairs:
        key, sep, val = pair.partition("=")
        if not sep or key not in defaults:
            raise SystemExit(f"--engine {pair!r}: expected KEY=VALUE with KEY an EngineConfig field "
                             f"(e.g. kernels.layers=unrolled)")
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


def with_overrides(ecfg, overrides: dict):
    """`ecfg` with engine_overrides' {dotted path: value} set (validated once, as the whole config)."""
    top = {k: v for k, v in overrides.items() if "." not in k}
    for section in ("kv", "kernels"):
        sub = {k.split(".", 1)[1]: v for k, v in overrides.items() if k.startswith(section + ".")}
        if sub:
            top[section] = dataclasses.replace(getattr(ecfg, section), **sub)
    return dataclasses.replace(ecfg, **top) if top else ecfg
