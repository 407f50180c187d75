"""Opt-in census of the XLA compiles of a test run (`make census`): which programs the suite compiles, how often, for
which test, and at what CPU cost.

With MEMJAX_COMPILE_CENSUS=DIR, every process that imports jax with this hook installed (the test processes through
tests/conftest.py; children through tests/child_site, which `make census` puts on PYTHONPATH) appends one JSON line
per compile request to DIR/<pid>.jsonl: the program's name, its input types (`sig`), `hit` (the persistent
compilation cache held it; None where the request bypassed the cache), the CPU seconds of the request (the compile,
or the cache read), the test that asked (PYTEST_CURRENT_TEST, which children inherit) and the end of the cache key.
Tracing and lowering come before the request and are not counted. `python tests/compile_census.py DIR` prints the
totals, the costliest programs and modules, and the programs compiled more than once. Without the variable nothing
is installed.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import threading
import time
from pathlib import Path

ENV = "MEMJAX_COMPILE_CENSUS"


def install(compiler) -> None:
    """Wrap jax._src.compiler's compile_or_get_cached (and its cache read) when ENV names a folder; idempotent."""
    folder = os.environ.get(ENV)
    if not folder or getattr(compiler, "_memjax_census", False):
        return
    compiler._memjax_census = True
    Path(folder).mkdir(parents=True, exist_ok=True)
    read, request = compiler._cache_read, compiler.compile_or_get_cached
    last = threading.local()

    def cache_read(module_name, cache_key, *args, **kwargs):
        out = read(module_name, cache_key, *args, **kwargs)
        last.hit, last.key = out[0] is not None, cache_key[-16:]
        return out

    def compile_or_get_cached(backend, computation, *args, **kwargs):
        last.hit = last.key = None
        cpu = time.process_time()
        executable = request(backend, computation, *args, **kwargs)
        row = {"name": str(computation.operation.attributes["sym_name"]).strip('"'), "sig": signature(computation),
               "hit": last.hit, "cpu": round(time.process_time() - cpu, 4), "key": last.key,
               "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "argv": " ".join(sys.argv)[:160]}
        with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        return executable

    compiler._cache_read = cache_read
    compiler.compile_or_get_cached = compile_or_get_cached


def signature(computation) -> str:
    """The input types of the module's main function (its shapes and dtypes), cut to 400 characters."""
    for op in computation.body.operations:
        if str(op.attributes["sym_name"]).strip('"') == "main":
            return str(op.attributes["function_type"]).split(") ->")[0][:400]
    return ""


def load(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(Path(folder).glob("*.jsonl")) for line in f.read_text().splitlines()]


def module_of(row: dict) -> str:
    return row["test"].split("::")[0] if row["test"] else "(no test) " + row["argv"][:60]


def report(rows: list[dict], top: int = 15) -> str:
    misses = [r for r in rows if not r["hit"]]
    compiled, read = sum(r["cpu"] for r in misses), sum(r["cpu"] for r in rows if r["hit"])
    lines = [(f"{len(rows)} compile requests: {len(misses)} compiled ({compiled:.0f} CPU-s), "
              f"{len(rows) - len(misses)} read from the cache ({read:.0f} CPU-s)")]
    for title, key in (("programs", lambda r: r["name"]), ("modules", module_of)):
        cpu, n = collections.Counter(), collections.Counter()
        for r in misses:
            cpu[key(r)] += r["cpu"]
            n[key(r)] += 1
        lines.append(f"\ncompiled, by {title} (CPU-s, count):")
        lines += [f"{v:9.1f} {n[k]:5d}  {k}" for k, v in cpu.most_common(top)]
    again = collections.defaultdict(list)
    for r in misses:
        if r["key"]:
            again[r["key"]].append(r)
    twice = {k: v for k, v in again.items() if len(v) > 1}
    lines.append(f"\ncompiled more than once: {len(twice)} programs, "
                 f"{sum(r['cpu'] for v in twice.values() for r in v[1:]):.1f} CPU-s beyond the first compile")
    for v in sorted(twice.values(), key=lambda v: -sum(r["cpu"] for r in v[1:]))[:top]:
        lines.append(f"{sum(r['cpu'] for r in v[1:]):9.1f} {len(v):5d}  {v[0]['name']}: "
                     + ", ".join(sorted({module_of(r) for r in v})))
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python tests/compile_census.py DIR (the folder MEMJAX_COMPILE_CENSUS named)")
    print(report(load(Path(sys.argv[1]))))
