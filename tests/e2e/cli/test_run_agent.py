"""`python -m memjax.run_agent` on CPU with the tiny shipped policies, as README.md documents it: MemAgent streams
its memory per chunk and answers, the conversation systems show their searches / operations; record.json and
agent.html are written; bad input is one line and exit 2."""

import json
import os
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


def test_screenshot_writes_a_png_of_the_trace_page(tmp_path):
    from memjax.report.browser import find_chromium

    if find_chromium() is None:
        why = "no headless browser installed (Debian: apt-get install chromium, or set MEMJAX_CHROMIUM)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {why}; .ci/run installs it before `make test`")
        pytest.skip(why)
    from PIL import Image

    png = tmp_path / "shots" / "agent.png"  # a folder that does not exist yet is created
    p = _run("--system", "memagent", "--model", "tiny", "--docs", str(FIX / "tiny_facts.txt"), "-q", "where is eve ?",
             "--out", str(tmp_path / "o"), "--screenshot", str(png), "--size", "800x600")
    assert p.returncode == 0, p.stderr
    assert f"screenshot: {png}" in p.stdout and png.stat().st_size > 0
    im = Image.open(png).convert("RGB")
    assert im.size == (800, 600)
    colours = im.getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50  # a drawn page, not a blank one


def test_screenshot_into_an_unwritable_folder_is_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    cases = [(str(blocker / "agent.png"), "is not a writable folder"),  # its folder is a file (root writes anywhere)
             (str(tmp_path), "is not a writable folder")]               # a folder, not a PNG file
    if os.geteuid() != 0:  # permission bits bind only non-root users
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        cases.append((str(ro / "agent.png"), "is not a writable folder"))
    for png, what in cases:
        p = _run("--system", "memagent", "--model", "tiny", "--docs", str(FIX / "tiny_facts.txt"), "-q", "x",
                 "--out", str(tmp_path / "o"), "--screenshot", png)
        assert p.returncode == 2 and what in p.stderr and p.stderr.startswith("memjax.run_agent: error: --screenshot")
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
        assert not (tmp_path / "o").exists()  # refused before the run: nothing written
