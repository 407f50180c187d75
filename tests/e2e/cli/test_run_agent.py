"""`python -m memjax.run_agent` on CPU with the tiny shipped policies, as README.md documents it: MemAgent streams
its memory per chunk and answers, the conversation systems show their searches / operations; record.json and
agent.html are written; bad input is one line and exit 2."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e
FIX = ROOT / "tests" / "fixtures" / "agent"


def _run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "memjax.run_agent", *args], capture_output=True, text=True, cwd=cwd,
                          env={**__import__("os").environ, "JAX_PLATFORMS": "cpu", "COLUMNS": "200"})


def test_memagent_streams_memory_and_writes_record(tmp_path):
    p = _run("--system", "memagent", "--model", "tiny", "--docs", str(FIX / "tiny_facts.txt"), "-q", "where is eve ?",
             "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    chunks = re.findall(r"chunk (\d)/3 memory: (.*)", p.stdout)
    assert [c[0] for c in chunks] == ["1", "2", "3"]
    rec = json.loads((tmp_path / "o" / "record.json").read_text())
    row = rec["questions"][0]
    assert row["trace"]["memories"] == [m.strip() for _, m in chunks]  # what was streamed is what the trace holds
    assert f"answer: {row['answer']}" in p.stdout and "\\boxed{" in row["answer"]
    page = (tmp_path / "o" / "agent.html").read_text()
    assert "where is eve ?" in page and 'class="trace"' in page and "http" not in page.split("<body>")[1]


@pytest.mark.parametrize("system,marker", [("sumer", "model 1: <call> search"), ("memory_r2", "ops:"),
                                           ("memory_r1", '"memory_dia_ids"')])
def test_conversation_systems_show_their_work(tmp_path, system, marker):
    p = _run("--system", system, "--model", "tiny", "--conversation", str(FIX / "tiny_conversation.json"),
             "-q", "where is bob ?", "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    assert marker in p.stdout and "answer:" in p.stdout
    rec = json.loads((tmp_path / "o" / "record.json").read_text())
    assert rec["questions"][0]["question"] == "where is bob ?" and rec["questions"][0]["traces"]


def test_bad_input_is_one_line(tmp_path):
    empty, binary = tmp_path / "empty.txt", tmp_path / "bin.txt"
    empty.write_text("  \n")
    binary.write_bytes(b"ab\0cd")
    no_turns = tmp_path / "conv.json"
    no_turns.write_text("[[], []]")
    nomodel = tmp_path / "m"
    nomodel.mkdir()
    (nomodel / "config.json").write_text("{}")
    cases = [
        (["--system", "memagent", "--model", "tiny", "--docs", str(empty), "-q", "x"], "empty file"),
        (["--system", "memagent", "--model", "tiny", "--docs", str(binary), "-q", "x"], "binary file"),
        (["--system", "memagent", "--model", "tiny", "--docs", str(FIX / "tiny_facts.txt"), "-q", "x",
          "--max-doc-chars", "10"], "over the limit"),
        (["--system", "sumer", "--model", "tiny", "--conversation", str(no_turns), "-q", "x"], "has no turns"),
        (["--system", "memagent", "--model", str(nomodel), "--docs", str(FIX / "tiny_facts.txt"), "-q", "x"],
         "no tokenizer.json"),
    ]
    for args, what in cases:
        p = _run(*args, "--out", str(tmp_path / "o"))
        assert p.returncode == 2 and what in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
