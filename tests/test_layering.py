"""Import layering (docs/architecture.md, "Stages"): parsing every module of memjax, no import goes from a
lower stage to a higher one, and kernels import nothing from memjax (they are leaves)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "memjax"

# unit -> stage; a unit is a top-level package or module of memjax (rl.batch: the data layout, numpy only)
STAGES = {
    "kernels": 0, "tokenizer": 0, "rewards": 0, "config": 0, "runio": 0, "report": 0, "parallel": 0, "rl.batch": 0,
    "model": 1, "data": 1,
    "checkpoint": 2, "flops": 2,
    "engine": 3, "modelsource": 3, "memory": 3,
    "agents": 4, "evaluation": 4,
    "rl": 5,
    "tiny": 6, "systems": 6,
    "train": 7, "train_config": 7, "cli_check": 7, "eval_config": 7, "curriculum": 7, "evaluate": 7, "demo": 7,
    "convert": 7, "plan": 7, "launch": 7, "memjax": 8,
}


def _unit(parts: list[str]) -> str:
    if len(parts) == 1:
        return "memjax"
    if parts[1] == "rl" and len(parts) > 2 and parts[2] == "batch":
        return "rl.batch"
    return parts[1]


def _imports(path: Path):
    rel = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    pkg = rel[:-1] if rel[-1] != "__init__" else rel[:-1]
    if rel[-1] == "__init__":
        rel = rel[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            mod = base + (node.module.split(".") if node.module else [])
            targets = [mod] if node.module else [mod + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name.split(".") for a in node.names]
        else:
            continue
        for t in targets:
            if t and t[0] == "memjax":
                yield rel, t, node.lineno


def test_no_upward_imports():
    bad, unknown = [], set()
    for path in sorted(ROOT.rglob("*.py")):
        for src, dst, line in _imports(path):
            u, v = _unit(src), _unit(dst)
            unknown |= {x for x in (u, v) if x not in STAGES}
            if u == v or u not in STAGES or v not in STAGES:
                continue
            if u == "kernels" or STAGES[v] > STAGES[u]:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {u} (stage {STAGES[u]}) imports "
                           f"{'.'.join(dst)} ({v}, stage {STAGES[v]})")
    assert not unknown, f"units without a stage (add them to STAGES and docs/architecture.md): {sorted(unknown)}"
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_the_checker_sees_an_upward_import(tmp_path):
    """The parser resolves relative imports: an engine module importing agents is reported."""
    f = ROOT / "engine" / "_layering_probe.py"
    src = list(_imports_text("from ..agents import MemAgent\nimport memjax.rl.trainer\n", f))
    assert [(_unit(a), _unit(b)) for a, b, _ in src] == [("engine", "agents"), ("engine", "rl")]


def _imports_text(text: str, path: Path):
    import unittest.mock as mock
    with mock.patch.object(Path, "read_text", lambda self: text):
        yield from _imports(path)
