"""Every `python -m memjax.*` entry point: found by parsing the package for `if __name__ == "__main__":`.

`python -m memjax.X` executes memjax/X.py as `__main__`, so a class defined there exists twice: once as
`__main__.C` and once as `memjax.X.C` (what config files import). An isinstance dispatch on such a class fails
from the shell while every in-process test passes (issue 36: `python -m memjax.evaluate configs/memagent/tiny_eval.py`).
The rule checked here, per entry point module:
- a pure CLI module defines no dataclass and no `*Config` class, and its `__main__` block only calls `main()`;
- a library module that also carries a small CLI (it defines dataclasses) runs, in its `__main__` block, the
  `main` of the module imported under its package name, so that every class is the importable one.
And each entry point runs as a real subprocess with `--help` (exit 0, usage printed).
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators))


def entry_points() -> dict[str, ast.Module]:
    out = {}
    for path in sorted((REPO / "memjax").rglob("*.py")):
        tree = ast.parse(path.read_text())
        if any(_is_main_guard(n) for n in tree.body):
            out[".".join(path.relative_to(REPO).with_suffix("").parts)] = tree
    return out


ENTRY_POINTS = entry_points()


def _defined_config_classes(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        decos = [ast.unparse(d) for d in node.decorator_list]
        if node.name.endswith("Config") or any("dataclass" in d for d in decos):
            names.append(node.name)
    return names


def _calls_main_only(body: list[ast.stmt]) -> bool:
    """`sys.exit(main())`, `raise SystemExit(main())` or `main()`."""
    if len(body) != 1:
        return False
    node = body[0]
    call = node.exc if isinstance(node, ast.Raise) else getattr(node, "value", None)
    text = ast.unparse(call) if call is not None else ""
    return text in ("sys.exit(main())", "SystemExit(main())", "main()")


def _runs_imported_main(body: list[ast.stmt], module: str) -> bool:
    """`from <module> import main as _main` then `sys.exit(_main())` / `raise SystemExit(_main())`."""
    if len(body) != 2 or not isinstance(body[0], ast.ImportFrom):
        return False
    imp = body[0]
    if imp.module != module or imp.level or [a.name for a in imp.names] != ["main"]:
        return False
    alias = imp.names[0].asname or "main"
    call = body[1].exc if isinstance(body[1], ast.Raise) else getattr(body[1], "value", None)
    return call is not None and ast.unparse(call) in (f"sys.exit({alias}())", f"SystemExit({alias}())")


def test_the_entry_points_are_found():
    for name in ("memjax.train", "memjax.evaluate", "memjax.plan", "memjax.demo", "memjax.convert",
                 "memjax.data.locomo_stats", "memjax.evaluation.locomo", "memjax.systems.memagent.tiny.warmstart"):
        assert name in ENTRY_POINTS


@pytest.mark.parametrize("module", sorted(ENTRY_POINTS))
def test_main_block_cannot_create_second_class_copies(module):
    tree = ENTRY_POINTS[module]
    block = next(n for n in tree.body if _is_main_guard(n)).body
    classes = _defined_config_classes(tree)
    if classes:
        assert _runs_imported_main(block, module), (
            f"{module} defines {classes} and runs as __main__: move them to an importable module, or make its "
            f"__main__ block `from {module} import main as _main; sys.exit(_main())`")
    else:
        assert _calls_main_only(block), f"{module}: the __main__ block must only call main() (sys.exit(main()))"


def test_the_checks_see_a_violation():
    bad = ast.parse("from dataclasses import dataclass\n@dataclass\nclass C:\n    x: int = 0\n"
                    "def main():\n    return isinstance(C(), C)\nif __name__ == '__main__':\n    main()\n")
    assert _defined_config_classes(bad) == ["C"]
    assert not _runs_imported_main(bad.body[-1].body, "m")
    assert not _calls_main_only(ast.parse("x = 1\nmain()\n").body)


@pytest.mark.e2e
def test_every_entry_point_answers_help_as_a_subprocess():
    """One interpreter per entry point, run as typed from the repository (`python -m X --help`), in parallel to
    keep it short: exit 0 and a usage line. The papers' entry points (`python -m memjax.systems.<paper>.tiny.<module>`)
    also show that importing their parent packages (which register every System) does not load the module first
    (runpy's RuntimeWarning: two copies of its code). This test took over the papers' own subprocess test, which
    started the same 6 commands a second time. (memjax.evaluation.locomo and memjax.parallel.logtee are imported by
    their packages and warn; for them the `__main__` rule checked above is what holds.)"""
    mods = [m for m in ENTRY_POINTS if m.startswith("memjax.systems.")]
    assert len(mods) >= 6, mods
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = {m: subprocess.Popen([sys.executable, "-m", m, "--help"], cwd=REPO, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for m in sorted(ENTRY_POINTS)}
    bad = []
    for m, p in procs.items():
        out, err = p.communicate(timeout=300)
        if p.returncode != 0 or "usage" not in out.lower():
            bad.append(f"{m}: exit {p.returncode}: {(err.strip().splitlines() or [''])[-1]}")
        if m in mods and ("usage:" not in out or "RuntimeWarning" in err):
            bad.append(f"{m}: {err[-1500:]}")
    assert not bad, "\n".join(bad)


@pytest.mark.e2e
def test_config_help_lists_the_fields():
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-m", "memjax.evaluate", "configs/memagent/tiny_eval.py", "--help"], cwd=REPO,
                       env=env, text=True, capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "config fields" in p.stdout and "policy: str" in p.stdout and "agent.name" in p.stdout
