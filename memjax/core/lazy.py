"""Lazy re-exports for package `__init__`s (PEP 562): a public name is imported on first use, not with the package.

Owns: `exports(globals(), table)`, which returns the `__getattr__` and `__dir__` a module (a package's `__init__`, or
a CLI module re-exporting what it runs) assigns at its top level. `table` maps each public name to (module relative
to the module's package, attribute; None = the module itself); relative names resolve against `__package__`, so
they also work in a module run as `__main__` by `python -m`.
Invariants: a resolved name is stored in the package's namespace, so it is imported once and later lookups do not
come back here; an unknown name is the usual AttributeError; this module imports nothing but the standard library,
so a package using it costs nothing to import until one of its names is used (tests/e2e/test_imports.py).
"""

from __future__ import annotations

import importlib


def exports(namespace: dict, table: dict[str, tuple[str, str | None]]):
    """(`__getattr__`, `__dir__`) for the module whose globals() are `namespace`, resolving `table`'s names lazily."""

    def __getattr__(name: str):
        try:
            module, attr = table[name]
        except KeyError:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}") from None
        value = importlib.import_module(module, namespace["__package__"])
        if attr is not None:
            value = getattr(value, attr)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__


def names(module: str, *attrs: str) -> dict[str, tuple[str, str]]:
    """`table` entries for several attributes of one module: names(".mesh", "DATA", "FSDP")."""
    return {a: (module, a) for a in attrs}
