"""benchmarks/ by purpose (docs/architecture.md, "Benchmarks"): the shared machinery's benchmarks at the top,
`peers/`, and one folder per paper named as memjax/systems/<paper>/ is; imports point downward only (nothing at the
top imports `peers/` or a paper's folder, a paper's folder never imports another paper's), and the tests of a
folder's scripts sit in the mirrored folder under tests/unit/benchmarks/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "benchmarks"
GROUPS = tuple(sorted(p.name for p in BENCH.iterdir() if (p / "__init__.py").is_file()))  # peers and the papers


def _group(path: Path) -> str | None:
    """The folder (peers or a paper) a benchmark file is in, else None (the top: shared machinery)."""
    rel = path.relative_to(BENCH).parts
    return rel[0] if len(rel) > 1 and rel[0] in GROUPS else None


def _imported_groups(path: Path) -> list[tuple[int, str]]:
    """(line, group) for every import of benchmarks.<group> (absolute or relative) in a file."""
    pkg = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            names = [base + (node.module.split(".") if node.module else [a.name]) for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".") for a in node.names]
        else:
            continue
        out += [(node.lineno, n[1]) for n in names if len(n) > 1 and n[0] == "benchmarks" and n[1] in GROUPS]
    return out


def test_paper_folders_are_the_papers():
    papers = {p.name for p in (ROOT / "memjax" / "systems").iterdir() if (p / "system.py").is_file()}
    assert set(GROUPS) <= papers | {"peers"}, f"benchmarks/ folders that are no paper: {sorted(set(GROUPS) - papers)}"
    assert {"peers", "memagent", "sumer", "memory_r1", "memory_r2"} <= set(GROUPS), GROUPS


def test_imports_point_downward():
    bad = []
    for path in sorted(BENCH.rglob("*.py")):
        own = _group(path)
        for line, g in _imported_groups(path):
            if g != own:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {'the top' if own is None else own} imports "
                           f"benchmarks.{g}")
    assert not bad, "benchmark imports across folders:\n" + "\n".join(bad)


def test_the_checker_sees_a_cross_folder_import(monkeypatch):
    probe = BENCH / "memory_r1" / "_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self: "from ..memagent.linearity import run\nfrom . import distill\n"
                        "import benchmarks.peers.grpo\nfrom benchmarks.rollout_throughput import make_model\n")
    assert _imported_groups(probe) == [(1, "memagent"), (2, "memory_r1"), (3, "peers")]


def test_tests_mirror_the_folders():
    for g in GROUPS:
        scripts = {p.stem for p in (BENCH / g).glob("*.py") if p.stem != "__init__"}
        tests = sorted(t for tier in ("unit", "e2e") for t in (ROOT / "tests" / tier / "benchmarks" / g).glob("test_*.py"))
        assert tests, f"neither tests/unit/benchmarks/{g}/ nor tests/e2e/benchmarks/{g}/ holds a test"
        for t in tests:
            stem = t.stem.removeprefix("test_").removeprefix(f"{g}_")
            assert stem in scripts, f"{t.relative_to(ROOT)}: no benchmarks/{g}/{stem}.py"
