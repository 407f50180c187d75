"""The test tiers (docs/testing.md) hold: parsing every test module, a test that starts a process carries `e2e`,
tests/e2e/ holds exactly the modules marked e2e as a whole, and the quick tier (`make check`: no e2e, learning, aot,
peers or gpu mark) imports every package of memjax.

"Starts a process" is read from the source: a call into subprocess, multiprocessing or os.fork / os.system, made by
the test, by a function or fixture of its module (or conftest.py) that it uses, or by a helper module of tests/ it
calls (tests/forked_cli.py, tests/e2e/parallel/fault_matrix.py, ...), followed through any depth. So a new test
that starts a process without the mark fails here, in the quick tier, before it can slow the quick tier down.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
QUICK_EXCLUDES = {"e2e", "learning", "aot", "peers", "gpu"}
SUBPROCESS = {"run", "Popen", "check_output", "check_call", "call", "getoutput", "getstatusoutput"}
OS = {"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp", "spawnv"}


def _starts(qual: str) -> bool:
    head, _, attr = qual.rpartition(".")
    return (head == "subprocess" and attr in SUBPROCESS) or qual.split(".")[0] == "multiprocessing" or (
        head == "os" and attr in OS)


class Module:
    """One parsed source file: its import aliases (name -> dotted origin) and its functions and classes by name."""

    def __init__(self, path: Path):
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.aliases: dict[str, str] = {}
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                for a in n.names:
                    self.aliases[a.asname or a.name] = f"{n.module}.{a.name}"
        self.defs = {n.name: n for n in ast.walk(self.tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}

    def refs(self, node) -> set[str]:
        """What a node refers to: dotted names through the aliases, local names, and `fixture:<arg>` per argument."""
        out = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute):
                parts, base = [n.attr], n.value
                while isinstance(base, ast.Attribute):
                    parts.append(base.attr)
                    base = base.value
                if isinstance(base, ast.Name):
                    head = self.aliases.get(base.id, base.id)
                    out.update(".".join([head, *parts[::-1][:k]]) for k in range(1, len(parts) + 1))
            elif isinstance(n, ast.Name):
                out.add(self.aliases.get(n.id, n.id))
            elif isinstance(n, ast.arg):
                out.add("fixture:" + n.arg)
        return out


def _mark_names(expr) -> set[str]:
    return {n.attr for n in ast.walk(expr) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}


def _decorator_marks(node) -> set[str]:
    return set().union(set(), *(_mark_names(d) for d in node.decorator_list))


def module_marks(m: Module) -> set[str]:
    out = set()
    for n in m.tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets):
            out |= _mark_names(n.value)
    return out


def _is_fixture(d) -> bool:
    return isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        "fixture" in ast.unparse(x) for x in d.decorator_list)


def _tests_in(m: Module):
    """(class or None, test function, its marks: module's, class's and its own; parametrize marks not read)."""
    base = module_marks(m)
    for n in m.tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"):
            yield None, n, base | _decorator_marks(n)
        elif isinstance(n, ast.ClassDef) and n.name.startswith("Test"):
            for d in n.body:
                if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name.startswith("test"):
                    yield n, d, base | _decorator_marks(n) | _decorator_marks(d)


class Scanner:
    """Which tests start a process, and why (the chain of names down to the call)."""

    def __init__(self, tests: Path):
        self.tests = tests
        self.mods = {p: Module(p) for p in sorted(tests.rglob("*.py")) if "fixtures" not in p.relative_to(tests).parts}
        self.by_name = {".".join(p.with_suffix("").relative_to(tests.parent).parts): m for p, m in self.mods.items()}
        self.memo: dict[tuple, str | None] = {}

    def fixtures(self, m: Module) -> dict[str, tuple]:
        out = {}
        for p, c in self.mods.items():
            if p.name == "conftest.py" and m.path.is_relative_to(p.parent):
                out.update({name: (c, name) for name, d in c.defs.items() if _is_fixture(d)})
        out.update({name: (m, name) for name, d in m.defs.items() if _is_fixture(d)})
        return out

    def why(self, m: Module, name: str, seen: frozenset = frozenset()) -> str | None:
        key = (m.path, name)
        if key in self.memo:
            return self.memo[key]
        if key in seen or name not in m.defs:
            return None
        seen = seen | {key}
        fixtures, result = self.fixtures(m), None
        for q in sorted(m.refs(m.defs[name])):
            if _starts(q):
                result = q
            elif q.startswith("fixture:") and q[8:] in fixtures and fixtures[q[8:]] != (m, name):
                r = self.why(*fixtures[q[8:]], seen)
                result = r and f"fixture {q[8:]} -> {r}"
            elif q in m.defs and q != name:
                r = self.why(m, q, seen)
                result = r and f"{q} -> {r}"
            elif q.rpartition(".")[0] in self.by_name:  # a helper module of tests/
                r = self.why(self.by_name[q.rpartition(".")[0]], q.rpartition(".")[2], seen)
                result = r and f"{q} -> {r}"
            if result:
                break
        self.memo[key] = result
        return result

    def unmarked_starters(self) -> list[str]:
        out = []
        for p, m in self.mods.items():
            if not p.name.startswith("test_"):
                continue
            for cls, fn, marks in _tests_in(m):
                w = self.why(m, fn.name)
                if w is None and cls is not None:  # a class's fixtures (autouse or not) run for its tests
                    w = next((r for d in cls.body if _is_fixture(d) for r in [self.why(m, d.name)] if r), None)
                if w and "e2e" not in marks:
                    out.append(f"{p.relative_to(self.tests.parent)}::{fn.name} starts a process ({w}) without e2e")
        return out


def test_every_test_that_starts_a_process_is_marked_e2e():
    assert Scanner(TESTS).unmarked_starters() == []


def test_the_scan_finds_a_process_started_through_a_fixture_and_a_helper(tmp_path):
    tests = tmp_path / "tests"
    (tests / "unit").mkdir(parents=True)
    (tests / "helper.py").write_text("import multiprocessing\n\ndef start():\n    multiprocessing.Process().start()\n")
    (tests / "unit" / "test_x.py").write_text(
        "import pytest\nimport subprocess as sp\nfrom tests.helper import start\n\n"
        "@pytest.fixture\ndef child():\n    return sp.run(['python', '-c', 'pass'])\n\n"
        "def test_through_fixture(child):\n    pass\n\n"
        "def test_through_helper():\n    start()\n\n"
        "@pytest.mark.e2e\ndef test_marked(child):\n    pass\n\n"
        "def test_in_process():\n    assert 1 + 1 == 2\n")
    got = Scanner(tests).unmarked_starters()
    assert [g.split(" ")[0] for g in got] == ["tests/unit/test_x.py::test_through_fixture",
                                               "tests/unit/test_x.py::test_through_helper"], got
    assert "fixture child -> subprocess.run" in got[0] and "multiprocessing" in got[1]


def test_tests_e2e_holds_exactly_the_modules_marked_e2e_as_a_whole():
    misplaced = []
    for p in sorted(TESTS.rglob("test_*.py")):
        whole = "e2e" in module_marks(Module(p))
        if whole != p.is_relative_to(TESTS / "e2e"):
            misplaced.append(f"{p.relative_to(ROOT)}: module-level e2e={whole}")
    assert misplaced == []


def _imported_packages(m: Module) -> set[str]:
    out = set()
    for n in ast.walk(m.tree):
        names = []
        if isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            names = [n.module] + [f"{n.module}.{a.name}" for a in n.names]
        out.update(x.split(".")[1] for x in names if x.startswith("memjax.") and x.count(".") >= 1)
    return out


def _root_module_packages(name: str) -> set[str]:
    """The packages a root module of memjax (memjax/train.py, ...) imports: `from .pkg... import` anywhere in it and
    its lazy names (`names(".pkg.mod", ...)`, memjax/core/lazy.py), which load when used."""
    path = ROOT / "memjax" / f"{name}.py"
    if not path.is_file():
        return set()
    out = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module:
            out.add(n.module.split(".")[0])
        elif isinstance(n, ast.Call) and getattr(n.func, "id", None) == "names" and n.args and isinstance(
                n.args[0], ast.Constant) and str(n.args[0].value).startswith("."):
            out.add(str(n.args[0].value)[1:].split(".")[0])
    return out


def test_the_quick_tier_imports_every_memjax_package():
    """Each package of memjax (a folder with __init__.py) is imported by a test module with a quick-tier test, or by
    a root module of memjax (an entry point such as memjax/train.py) that such a test module imports."""
    packages = {p.parent.name for p in (ROOT / "memjax").glob("*/__init__.py")}
    quick = [m for p in sorted(TESTS.rglob("test_*.py")) for m in [Module(p)]
             if any(not (marks & QUICK_EXCLUDES) for _, _, marks in _tests_in(m))]
    assert len(quick) > 50
    direct = set().union(*(_imported_packages(m) for m in quick))
    touched = direct.union(*(_root_module_packages(x) for x in direct))
    assert sorted(packages - touched) == []
