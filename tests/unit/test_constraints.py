"""constraints.txt locks the environment `make venv` builds: one `name==version` line per package, a pin inside
its range for every requirement pyproject.toml states (the dependencies and the test and track extras), the
Makefile installing through the file and re-installing when it changes, and the interpreter running these tests at
the pinned version of every direct requirement. So a suite's result is the locked set's, and a release upstream
changes nothing until someone runs `make lock` and the suite on the new set."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LOCKED_EXTRAS = ("test", "track")  # what `make lock` installs; cuda12 is a GPU node's, outside the lock


def pins(text: str) -> dict[str, Version]:
    """{canonical name: version} of a constraints file; raises on a line that is not an exact pin or on a repeat."""
    out: dict[str, Version] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#=<>!~]+)", line)
        if not m:
            raise ValueError(f"constraints.txt:{n}: {line!r} is not an exact pin name==version")
        name = canonicalize_name(m.group(1))
        if name in out:
            raise ValueError(f"constraints.txt:{n}: {name} is pinned twice")
        out[name] = Version(m.group(2))
    return out


def requirements() -> list[Requirement]:
    """The requirements `make venv` installs, as pyproject.toml states them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in LOCKED_EXTRAS:
        reqs += project["optional-dependencies"][extra]
    return [r for r in map(Requirement, reqs) if r.marker is None or r.marker.evaluate()]


def test_every_line_is_an_exact_pin_and_the_parser_refuses_others():
    assert len(pins((REPO / "constraints.txt").read_text())) > 50
    for bad in ("flax>=0.12", "flax==0.12.12\nFlax==0.12.11", "-e ."):
        with pytest.raises(ValueError):
            pins(bad)


def test_every_requirement_is_pinned_inside_its_range():
    locked = pins((REPO / "constraints.txt").read_text())
    problems = []
    for req in requirements():
        v = locked.get(canonicalize_name(req.name))
        if v is None:
            problems.append(f"{req} is not pinned")
        elif not req.specifier.contains(v, prereleases=True):
            problems.append(f"{req}: the lock pins {v}, outside the range")
    assert not problems, "; ".join(problems) + " (make lock re-locks)"


def test_make_venv_installs_through_the_lock_and_reinstalls_when_it_changes():
    make = (REPO / "Makefile").read_text()
    stamp_rule = re.search(r"^\$\(STAMP\):(.*)$", make, re.M)
    assert stamp_rule and "constraints.txt" in stamp_rule.group(1).split()
    installs = re.findall(r"pip install -q (.*)-e '\.\[test\]'", make)
    assert installs == ["-c constraints.txt "], installs


def test_this_interpreter_runs_the_locked_versions():
    locked = pins((REPO / "constraints.txt").read_text())
    off = {}
    for req in requirements():
        name = canonicalize_name(req.name)
        have = Version(metadata.version(req.name))
        if have != locked[name]:
            off[name] = f"{have} installed, {locked[name]} locked"
    assert not off, f"{off}: this environment is not the locked one (make venv installs it)"
