"""Lazy re-exports for package `__init__`s (PEP 562): a public name is imported on first use, not with the package.

Owns: `exports(package, table)`, which returns the `__getattr__` and `__dir__` a package assigns at its top level.
`table` maps each public name to (module relative to the package, attribute; None = the module itself).
Invariants: a resolved name is stored in the package's namespace, so it is imported once and later lookups do not
come back here; an unknown name is the usual AttributeError; this module imports nothing but the standard library,
so a package using it costs nothing to import until one of its names is used (tests/test_imports.py).
"""

from __future__ import annotations

import importlib
import sys


def exports(package: str, table: dict[str, tuple[str, str | None]]):
    """(`__getattr__`, `__dir__`) for `package` resolving `table`'s names lazily."""

    def __getattr__(name: str):
        try:
            module, attr = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = importlib.import_module(module, package)
        if attr is not None:
            value = getattr(value, attr)
        vars(sys.modules[package])[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__


def names(module: str, *attrs: str) -> dict[str, tuple[str, str]]:
    """`table` entries for several attributes of one module: names(".mesh", "DATA", "FSDP")."""
    return {a: (module, a) for a in attrs}
