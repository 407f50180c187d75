"""Every path of this repository that the documentation names exists: README.md, BUILD.md and docs/*.md name files
and folders under memjax/, tests/, configs/, benchmarks/, scripts/ and docs/, and a moved module or test folder must
take its mentions along. Paths with a placeholder (`<paper>`, `{a,b}`, `*`, `...`) are patterns, not paths; the few
that are meant not to exist are listed with the reason. The code's own text (memjax/, benchmarks/, scripts/,
configs/: docstrings, comments, messages) is held to the same rule for what is surely a path: a name ending in
.py, .md, .sh or a folder's slash (a result file a benchmark is about to write, or `module.function`, is not)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PATH = re.compile(r"(?<![\w./-])((?:memjax|tests|configs|benchmarks|scripts|docs)/[\w./-]*)")
NOT_PATHS = {
    "configs/nope.py": "docs/reliability.md's bad-input table: the config that does not exist",
    "docs/en/algorithms/prox_approx.md": "a file of AReaL's repository, not of this one",
}
HYPOTHETICAL = "newpaper"  # docs/architecture.md, "Adding a fifth paper": the files a new paper would add


def named_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) for every repository path in `text`, patterns left out."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            path = m.group(1).rstrip(".,:;)")
            if line[m.end(1):m.end(1) + 1] in ("<", "{", "*") or "..." in path:
                continue
            out.append((n, path))
    return out


def missing(doc: Path, root: Path = REPO, *, sure: bool = False) -> list[str]:
    """`doc`'s lines naming a path that does not exist; `sure`: only names that end as a file or folder does."""
    return [f"{doc.name}:{n}: {p}" for n, p in named_paths(doc.read_text())
            if not (root / p).exists() and p not in NOT_PATHS and HYPOTHETICAL not in p
            and (not sure or p.endswith((".py", ".md", ".sh", "/")))]


def test_the_rule_finds_a_moved_path_and_leaves_patterns_alone(tmp_path):
    (tmp_path / "memjax").mkdir()
    (tmp_path / "memjax" / "here.py").write_text("")
    doc = tmp_path / "doc.md"
    doc.write_text("`memjax/here.py`, `memjax/gone.py`; memjax/<paper>/x.py, memjax/{a,b}.py, tests/.../y.py\n"
                   "see [it](memjax/here.py). configs/nope.py\n")
    assert missing(doc, tmp_path) == ["doc.md:1: memjax/gone.py"]


def test_every_path_the_docs_name_exists():
    docs = [REPO / "README.md", REPO / "BUILD.md", *sorted((REPO / "docs").glob("*.md"))]
    gone = [line for doc in docs for line in missing(doc)]
    assert not gone, "paths named in the docs that do not exist:\n" + "\n".join(gone)


def test_every_path_the_code_names_exists():
    files = [f for top in ("memjax", "benchmarks", "scripts", "configs") for f in sorted((REPO / top).rglob("*"))
             if f.suffix in (".py", ".md", ".sh") and "results" not in f.relative_to(REPO).parts]
    gone = [f"{f.relative_to(REPO)}: {line}" for f in files for line in missing(f, sure=True)]
    assert len(files) > 300 and not gone, "paths named in the code that do not exist:\n" + "\n".join(gone)
