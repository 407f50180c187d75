"""The public contract of docs/architecture.md resolves: every dotted `memjax.` name in its code block is an
attribute chain that exists (modules moved inside the package keep these names)."""

import importlib
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _contract_names() -> list[str]:
    text = DOC.read_text()
    block = text.split("## Public contract", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    return sorted(set(re.findall(r"\bmemjax(?:\.[A-Za-z_]\w*)+", block)))


def test_every_public_contract_name_resolves():
    names = _contract_names()
    assert len(names) >= 12, names
    missing = []
    for name in names:
        obj = importlib.import_module("memjax")
        for part in name.split(".")[1:]:
            try:
                obj = getattr(obj, part)
            except AttributeError:
                missing.append(name)
                break
    assert not missing, f"public names that no longer resolve: {missing}"


def test_the_checker_sees_a_missing_name(monkeypatch):
    real = DOC.read_text()
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: real.replace("memjax.flops.estimate",
                                                                              "memjax.flops.no_such_name"))
    try:
        test_every_public_contract_name_resolves()
    except AssertionError as e:
        assert "memjax.flops.no_such_name" in str(e)
    else:
        raise AssertionError("a missing public name was not reported")
