"""memjax.report on each system's real trace schema, without a model: the tiny Memory-R1 / Memory-R2 workflows and
the SUMER workflow run through run_workflow on scripted engines (their real `trace()` dicts), are written with
runio's JSONL writer into an evaluation-shaped out_dir, and the page is parsed with html.parser: the R1 events,
R2's per-session bank diffs, SUMER's tool calls beside their results, every reward; plus LoCoMo predictions
written by the real harness, escaping, and the one-line errors of `python -m memjax.report`."""

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from scripted_engine import ScriptedEngine

from memjax.agents import run_workflow
from memjax.core.outdir import JsonlLog, write_atomic
from memjax.core.tokenizer import Tokenizer
from memjax.data.locomo import load_locomo
from memjax.data.locomo_splits import split_questions
from memjax.engine import Completion
from memjax.engine.config import KVHandle
from memjax.evaluation.locomo import evaluate_locomo
from memjax.memory.bank import MemoryRecord
from memjax.memory.embedders import HashedBowEmbedder
from memjax.memory.retrieval import Retriever
from memjax.report import ReportError, load_run, write_report
from memjax.rewards.locomo import RuleBasedJudge
from memjax.systems.memory_r1.tiny.task import (
    R1TaskConfig,
    TinyR1Workflow,
    make_r1_sample,
    prompt_text,
    r1_tokenizer,
)
from memjax.systems.memory_r2.tiny.agent import TinyR2Workflow
from memjax.systems.memory_r2.tiny.task import (
    R2TaskConfig,
    make_r2_sample,
    r2_tokenizer,
)
from memjax.systems.sumer.tools import MemoryTools, ToolsConfig
from memjax.systems.sumer.workflow import QwenSumerFormat, SumerSample, SumerWorkflow

ROOT = Path(__file__).resolve().parents[3]
LOCOMO = ROOT / "tests" / "fixtures" / "data" / "locomo_fixture.json"


class Page(HTMLParser):
    """Elements by class and the text inside each trace / table cell (what a reader sees)."""

    def __init__(self, html):
        super().__init__()
        self.stack, self.classes, self.traces, self.cells, self.heads, self.inputs = [], {}, [], [], [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for c in (a.get("class") or "").split():
            self.classes[c] = self.classes.get(c, 0) + 1
        if tag == "input":
            self.inputs.append(a)
        if "trace" in (a.get("class") or "").split():
            self.traces.append({"data": a.get("data-text", ""), "text": ""})
        if tag not in ("input", "br", "meta", "img"):
            self.stack.append((tag, a))

    def handle_endtag(self, tag):
        while any(t == tag for t, _ in self.stack):
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self.traces and any("trace" in (a.get("class") or "").split() for _, a in self.stack):
            self.traces[-1]["text"] += data
        if self.stack and self.stack[-1][0] == "td":
            self.cells.append(data)
        if self.stack and self.stack[-1][0] == "th":
            self.heads.append(data)


def _eval_dir(out: Path, traces: list[dict], system: str) -> Path:
    out.mkdir()
    write_atomic(out / "results.json", json.dumps({"config": {"agent": {"name": system}}, "system": system,
                                                   "metrics": {"reward": 0.5}, "seconds": 1.0}))
    JsonlLog(out / "traces.jsonl").write(*traces)
    return out


def _page(out: Path) -> Page:
    path = write_report(out)
    assert path == out / "report.html"
    return Page(path.read_text())


def test_memory_r1_events(tmp_path):
    tok = r1_tokenizer()
    samples = [make_r1_sample(R1TaskConfig(), 3, i) for i in range(6)]
    by_prompt = {prompt_text(s): s for s in samples}
    res = run_workflow(ScriptedEngine(tok, lambda text: by_prompt[text.split("<user> ", 1)[1].split(" <end>")[0]]["op"]),
                       TinyR1Workflow(tok), samples)
    page = _page(_eval_dir(tmp_path / "r1", res.traces, "memory_r1_tiny"))
    assert len(page.traces) == 6 and all("reward 1" in t["text"] for t in page.traces)
    for t, s in zip(page.traces, samples):
        event = {"add": "ADD", "update": "UPDATE", "delete": "DELETE", "none": "NOOP"}[s["op"].split()[0]]
        assert f"event {event}" in " ".join(t["text"].split()) and f"fact: {s['fact']}" in " ".join(t["text"].split())
    assert page.classes.get("op-ADD", 0) + page.classes.get("op-UPDATE", 0) + page.classes.get("op-NOOP", 0) >= 6


def test_memory_r2_bank_diffs_per_session(tmp_path):
    tok = r2_tokenizer()
    ep = make_r2_sample(R2TaskConfig(), 1, 0)
    res = run_workflow(ScriptedEngine(tok, lambda text: " ".join(["add"] * 2)), TinyR2Workflow(tok, R2TaskConfig(),
                       group_size=1, local=False), [ep], group_size=1, seed=0)
    tr = res.traces[0]
    assert len(tr["banks"]) == len(ep["sessions"]) and tr["banks"][-1] == tr["memory"]
    page = _page(_eval_dir(tmp_path / "r2", res.traces, "memory_r2_tiny"))
    text = page.traces[0]["text"]
    assert page.classes["session"] == len(ep["sessions"]) and page.classes["diff"] == len(ep["sessions"])
    # every fact was added, so each session's diff adds exactly its facts
    assert page.classes["ins"] == sum(len(s) for s in ep["sessions"]) and "del" not in page.classes
    for s in ep["sessions"]:
        assert all(f"+ {f['text']}" in text for f in s)
    assert f"reward {tr['reward']:.3g}" in text


def _sumer_traces():
    tok = Tokenizer.default()
    recs = [MemoryRecord(id=f"D1:{i + 1}", content=c, conversation="c", speaker="Ann", session=1, session_time="day 1",
                         dia_ids=(f"D1:{i + 1}",)) for i, c in enumerate(["I adopted a cat named Milo.", "Milo is orange."])]
    tools = MemoryTools(Retriever(recs, HashedBowEmbedder(256)), ToolsConfig())
    fmt = QwenSumerFormat(tok)
    sample = SumerSample("What colour is Milo?", "orange", tools, qid="q0")
    call = '<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>'
    turns = [call % ("search_memory", json.dumps({"query": "Milo colour"})),
             call % ("submit_answer", json.dumps({"answer": "orange"}))]

    class Scripted:  # the k-th generated turn is turns[k]; follow-ups continue the retained previous turn
        def __init__(self):
            self.config = type("C", (), {"window": 4096, "progress": False})()
            self.stats, self.queue, self.rid = {}, [], 0

        def submit(self, prompt, params, parent=None, retain=False):
            full = (list(parent.kv.tokens) if parent is not None else []) + list(prompt)
            ids = tok.encode(turns[(sum(t == tok.im_start_id for t in full) - 3) // 2]) + [tok.im_end_id]
            self.rid += 1
            kv = KVHandle(pages=(), n_cached=len(full + ids) - 1, tokens=full + ids) if retain else None
            self.queue.append(Completion(ids, [-0.5] * len(ids), "stop", prompt_len=len(full), request_id=self.rid, kv=kv))
            return self.rid

        def step(self):
            out, self.queue = self.queue, []
            return out

        def release(self, comp):
            comp.kv.released = True

        def abort(self, rids):
            self.queue = []

    return run_workflow(Scripted(), SumerWorkflow(fmt, RuleBasedJudge(), window=4096), [sample], progress=False).traces


def test_sumer_tool_calls_beside_their_results(tmp_path):
    traces = _sumer_traces()
    assert traces[0]["reward"] == 1.0 and len(traces[0]["tool_texts"]) == 1
    page = _page(_eval_dir(tmp_path / "sumer", traces, "sumer"))
    assert page.classes["model"] == 2 and page.classes["tool"] == 1
    text = page.traces[0]["text"]
    assert "search_memory" in text and "Milo is orange." in text and "reward 1" in text
    assert text.index("search_memory") < text.index("Milo is orange.") < text.index("submit_answer")


def test_locomo_predictions_per_conversation_escaped(tmp_path):
    qs = split_questions(load_locomo(LOCOMO), "memory_r1")["train"]
    out = tmp_path / "locomo"
    res = evaluate_locomo(qs, lambda q: "<script>alert(1)</script> Buddy" if q.index == 0 else "Porto", RuleBasedJudge(), out,
                    title="fixture", chart=False)
    run = load_run(out)
    assert run.kind == "locomo_eval" and len(run.predictions) == len(qs)
    html = write_report(out).read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; Buddy" in html
    page = Page(html)
    assert len(page.traces) == len(qs) and page.classes["group"] == 1          # one conversation: conv-26
    assert {"single-hop", "multi-hop", "open-domain", "temporal", "overall"} <= set(page.heads)
    row = page.cells[page.cells.index("J"):][:6]                              # the J row: metric + 5 columns
    assert row == ["J", *[f"{res['table'][c]['J']:.4g}" for c in ("single-hop", "multi-hop", "open-domain",
                                                                  "temporal", "overall")]]


@pytest.mark.e2e
def test_not_a_run_dir_errors(tmp_path):
    for bad, msg in ((tmp_path / "none", "no such directory"), (tmp_path, "not a memjax run directory")):
        try:
            load_run(bad)
            raise AssertionError("no error")
        except ReportError as e:
            assert msg in str(e) and "\n" not in str(e)
    (tmp_path / "results.json").write_text("{oops")
    r = subprocess.run([sys.executable, "-m", "memjax.report", str(tmp_path), str(tmp_path / "none")], cwd=ROOT,
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 2 and "not valid JSON" in lines[0] and "no such directory" in lines[1]
    assert all(x.startswith("memjax.report: error: ") for x in lines) and "Traceback" not in r.stderr


def test_trace_budget_keeps_the_page_openable(tmp_path, monkeypatch):
    from memjax.report import traces as views_mod

    tok = r1_tokenizer()
    samples = [make_r1_sample(R1TaskConfig(), 4, i) for i in range(10)]
    res = run_workflow(ScriptedEngine(tok, lambda text: "none"), TinyR1Workflow(tok), samples)
    out = _eval_dir(tmp_path / "r1", res.traces, "memory_r1_tiny")
    all_views, left = views_mod.trace_views(load_run(out))
    assert len(all_views) == 10 and left == 0
    monkeypatch.setattr(views_mod, "MAX_BYTES", sum(len(v.body) + len(v.text) for v in all_views[:3]))
    html = write_report(out).read_text()
    assert html.count('class="trace"') == 3 and "7 more traces not shown (first 3)" in html


LOCOMO10 = next((p / "shared" / "data" / "locomo" / "locomo10.json" for p in ROOT.parents[:2]
                 if (p / "shared" / "data" / "locomo" / "locomo10.json").is_file()), ROOT.parent / "shared" / "locomo10.json")


@pytest.mark.skipif(not LOCOMO10.is_file(), reason="LoCoMo (locomo10.json) not in ../shared/data/locomo")
def test_memory_r2_locomo_bank_diffs(tmp_path):
    """The LoCoMo Memory-R2 workflow (the system's own, on the scripted engine of its tests): per session the
    records the manager added / removed / rewrote, as the trace's bank_diffs, shown as a diff."""
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "systems" / "memory_r2"))
    from r2_fixtures import ScriptedEngine as R2Engine

    from memjax.systems import MemoryR2Section, MemoryR2System

    tok = Tokenizer.default()
    system = MemoryR2System(MemoryR2Section(locomo_path=str(LOCOMO10), embedder="hashed", answer_agent="overlap",
                                            eval_max_sessions=2, chunks_per_session=2, group_size=1,
                                            curriculum_sessions=(1, 2, 3)))
    sample = next(system.train_data(1, seed=0))[0]
    res = run_workflow(R2Engine(tok), system.workflow(R2Engine(tok), tok), [sample], group_size=1, seed=0)
    tr = res.traces[0]
    added = [x for d in tr["bank_diffs"] for x in d["added"]]
    assert tr["bank_diffs"] and added and len(added) - sum(len(d["removed"]) for d in tr["bank_diffs"]) == tr["memory_records"]
    page = _page(_eval_dir(tmp_path / "r2l", res.traces, "memory_r2"))
    text = page.traces[0]["text"]
    assert page.classes["session"] == len({d["session"] for d in tr["bank_diffs"]})
    assert page.classes["ins"] == len(added) + sum(len(d["updated"]) for d in tr["bank_diffs"])
    assert all(f"+ {x}" in text for x in added) and f"reward {tr['reward']:.3g}" in text
