"""Import layering (docs/architecture.md, "Stages" and "Papers"): parsing every module of memjax, no import goes
from a lower stage to a higher one, kernels import nothing from memjax (they are leaves), a paper's folder
(memjax/systems/<paper>/) imports shared packages only, never another paper's folder, and no shared module imports a
paper's folder (exceptions: memjax/systems/__init__.py, the registry that imports them all, and the run and entry
points of stages 7-9, where a user names a paper: memjax.cli.evaluate runs MemAgent's length evaluation,
memjax.cli.eval_config holds its config)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "memjax"

# unit -> stage; a unit is a top-level package or module of memjax (rl.batch: the data layout, numpy only)
STAGES = {
    "kernels": 0, "core": 0, "rewards": 0, "report": 0, "parallel": 0, "rl.batch": 0,
    "model": 1, "data": 1,
    "checkpoint": 2,
    "engine": 3, "memory": 3,
    "agents": 4, "evaluation": 4,
    "rl": 5,
    "tiny": 6, "systems": 6,
    "run": 7, "loop": 8, "cli": 9,
    # the `python -m memjax.<name>` modules of the package root: each imports its command from memjax.cli
    "train": 9, "evaluate": 9, "convert": 9, "plan": 9, "launch": 9, "demo": 9, "run_agent": 9,
    "memjax": 10,
}


PAPERS = ("memagent", "sumer", "memory_r1", "memory_r2")
REGISTRY = ["memjax", "systems"]  # memjax/systems/__init__.py: imports every paper's folder to register it


def _paper(parts: list[str]) -> str | None:
    """The paper whose folder a module (or an imported name) is in, else None (shared)."""
    return parts[2] if len(parts) > 2 and parts[1] == "systems" and parts[2] in PAPERS else None


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


def test_papers_import_shared_code_only():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        for src, dst, line in _imports(path):
            a, b = _paper(src), _paper(dst)
            if b is None or a == b or (a is None and (src == REGISTRY or STAGES.get(_unit(src), 0) >= 7)):
                continue
            who = f"the {a} folder" if a else "a shared module"
            bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {who} imports {'.'.join(dst)} ({b}'s folder)")
    assert not bad, "imports across paper folders:\n" + "\n".join(bad)


def test_every_paper_has_one_folder_with_the_same_shape():
    """Each paper's folder holds its workflow, its System and a tiny/ task with a warm start and a System."""
    for p in PAPERS:
        d = ROOT / "systems" / p
        for f in ("__init__.py", "workflow.py", "system.py", "tiny/__init__.py", "tiny/task.py", "tiny/warmstart.py",
                  "tiny/system.py"):
            assert (d / f).is_file(), f"memjax/systems/{p}/{f} missing"
        assert len((d / "__init__.py").read_text()) > 600, f"memjax/systems/{p}/__init__.py: the paper's docstring"


def test_the_checker_sees_a_cross_paper_import():
    f = ROOT / "systems" / "memory_r1" / "tiny" / "_probe.py"
    src = list(_imports_text("from ...memagent.tiny.task import WORDS\nfrom ..workflow import construct\n", f))
    assert [(_paper(a), _paper(b)) for a, b, _ in src] == [("memory_r1", "memagent"), ("memory_r1", "memory_r1")]
    g = ROOT / "evaluation" / "_probe.py"
    assert [(_paper(a), _paper(b)) for a, b, _ in _imports_text("from ..systems.sumer import tools\n", g)] == \
        [(None, "sumer")]


def test_the_checker_sees_an_upward_import(tmp_path):
    """The parser resolves relative imports: an engine module importing agents is reported."""
    f = ROOT / "engine" / "_layering_probe.py"
    src = list(_imports_text("from ..agents import MemAgent\nimport memjax.rl.trainer\n", f))
    assert [(_unit(a), _unit(b)) for a, b, _ in src] == [("engine", "agents"), ("engine", "rl")]


def _imports_text(text: str, path: Path):
    import unittest.mock as mock
    with mock.patch.object(Path, "read_text", lambda self: text):
        yield from _imports(path)


def _module(parts: list[str]) -> str:
    """The module an import names: `memjax.data.locomo.Question` -> memjax.data.locomo (a file or a package)."""
    for n in range(len(parts), 0, -1):
        p = ROOT.parent.joinpath(*parts[:n])
        if p.with_suffix(".py").is_file() or (p / "__init__.py").is_file():
            return ".".join(parts[:n])
    return ".".join(parts)


def test_no_two_modules_import_each_other():
    """Mutual imports (even deferred ones inside functions) are refused; a package's __init__ importing its own
    modules, and they importing a sibling through the package, are not counted."""
    edges = set()
    for path in sorted(ROOT.rglob("*.py")):
        for src, dst, _ in _imports(path):
            a, b = ".".join(src), _module(dst)
            if a != b and not b.startswith(a + ".") and not a.startswith(b + "."):
                edges.add((a, b))
    both = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
    assert not both, f"modules importing each other: {both}"


@pytest.mark.e2e
def test_the_architecture_picture_is_drawn_from_the_code(tmp_path):
    """`python scripts/draw_architecture.py` (docs/architecture.md) writes the PNG and counts each paper's files."""
    import subprocess
    import sys

    out = tmp_path / "arch.png"
    p = subprocess.run([sys.executable, "scripts/draw_architecture.py", "--out", str(out)], cwd=ROOT.parent,
                       capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "MPLBACKEND": "Agg"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
    for paper in PAPERS:
        n = len(list((ROOT / "systems" / paper).rglob("*.py")))
        assert f"{paper}: {n} files in memjax/systems/{paper}/" in p.stdout
        assert "systems" in p.stdout.split(f"{paper}: ")[1].splitlines()[0]  # every paper registers through base


def test_no_two_test_modules_share_a_file_name():
    """tests/ has no __init__.py: pytest imports each test module by its file name, and a second tests/**/test_x.py
    stops the whole run at collection ("import file mismatch"; CI on 2026-11-28, tests/unit/parallel/test_lifecycle.py
    beside tests/unit/engine/test_lifecycle.py)."""
    seen: dict[str, Path] = {}
    clashes = []
    for p in sorted((ROOT.parent / "tests").rglob("test_*.py")):
        if p.name in seen:
            clashes.append(f"{seen[p.name].relative_to(ROOT.parent)} and {p.relative_to(ROOT.parent)}")
        seen.setdefault(p.name, p)
    assert len(seen) > 100 and not clashes, clashes
