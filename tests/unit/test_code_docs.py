"""The code's own words stay in the present tense: no comment or docstring anywhere in memjax/ carries a calendar date,
an issue number or a pointer to BUILD.md, and no string the code prints points outside the repository (`../shared`,
local paper texts such as `papers/sumer.txt`): papers are cited by arXiv id or name and table.

History belongs in `git log`, measurements in docs/performance.md; a module docstring holds at most 15 lines. Every `memjax/**/*.py` file is read; none is
skipped. Comments and docstrings (module, class, function) are checked for all four; other string literals only for
BUILD.md and `../shared`, because prompts and fixtures legitimately hold dates ("6:59 pm on 26 August, 2023") and
CSS colours ("#445").
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
          "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
DATE = re.compile(rf"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b|\b\d{{1,2}}(?:st|nd|rd|th)? (?:{MONTHS})\b|"
                  rf"\b(?:{MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?\b")
ISSUE = re.compile(r"\bissues? #?\d+|(?<![\w&#/])#\d+\b", re.I)
POINTER = re.compile(r"BUILD\.md|\.\./shared\b|\bpapers/[\w.-]+|\bSPECS\.md")
FORBIDDEN = {"a date": DATE, "an issue number": ISSUE, "a pointer outside the code": POINTER}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """Line numbers of the string constants that are docstrings (module, class, function)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                lines.add(first.lineno)
    return lines


def hits(path: Path, root: Path = REPO) -> list[str]:
    """`path:line: what: text` for every forbidden phrase in the file's comments, docstrings and strings."""
    text = path.read_text()
    docs = _docstring_nodes(ast.parse(text))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            body, rules = tok.string.lstrip("#"), FORBIDDEN
        elif tok.type == tokenize.STRING:
            body = tok.string
            rules = FORBIDDEN if tok.start[0] in docs else {"a pointer outside the code": POINTER}
        else:
            continue
        for what, rule in rules.items():
            for m in rule.finditer(body):
                line = tok.start[0] + body[:m.start()].count("\n")
                out.append(f"{path.relative_to(root)}:{line}: {what}: {m.group(0)!r}")
    return out


def test_the_rules_catch_what_they_are_for(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""Measured on 2026-11-27 (issue 46, BUILD.md)."""\n'
                     "x = 1  # before 2 December, see #47\n"
                     "def f():\n    \"\"\"Since Nov 29 the kernel is the default.\"\"\"\n"
                     "print('see ../shared/papers')\n"
                     "PROMPT = 'at 6:59 pm on 26 August, 2023; issue 3 of the magazine'\n"
                     "CSS = 'td{color:#445}'  # a prompt's data and a colour, not history\n")
    found = [h.split(":", 1)[1] for h in hits(probe, tmp_path)]
    assert found == ["1: a date: '2026-11-27'", "1: an issue number: 'issue 46'",
                     "1: a pointer outside the code: 'BUILD.md'", "2: a date: '2 December'",
                     "2: an issue number: '#47'", "4: a date: 'Nov 29'",
                     "5: a pointer outside the code: '../shared'"], found


def test_no_code_comment_or_docstring_carries_a_date_an_issue_or_a_pointer_outside():
    files = sorted((REPO / "memjax").rglob("*.py"))
    assert len(files) > 100  # the whole package is read
    found = [h for f in files for h in hits(f)]
    assert not found, f"{len(found)} dated / issue / outside references in memjax/:\n" + "\n".join(found)


MAX_MODULE_DOC_LINES = 15  # what it owns, its invariants and why; measurements and history live in docs/


def module_doc_lines(path: Path) -> int:
    """Lines of a module's docstring as written (0 without one)."""
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    return 0 if doc is None else doc.count("\n") + 1


def test_every_module_docstring_is_short(tmp_path):
    probe = tmp_path / "long.py"
    probe.write_text('"""' + "\n".join(f"line {i}" for i in range(16)) + '"""\n')
    assert module_doc_lines(probe) == 16 > MAX_MODULE_DOC_LINES  # the count sees a long one
    files = sorted((REPO / "memjax").rglob("*.py"))
    long = [f"{f.relative_to(REPO)}: {n} lines" for f in files if (n := module_doc_lines(f)) > MAX_MODULE_DOC_LINES]
    assert not long, (f"module docstrings over {MAX_MODULE_DOC_LINES} lines (move measurements and detail to "
                      "docs/<topic>.md or the functions' own docstrings):\n" + "\n".join(long))
