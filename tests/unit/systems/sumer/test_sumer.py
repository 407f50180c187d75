"""SumerWorkflow episode rules on the Qwen2.5 format, driven by run_workflow over a scripted engine (each
turn's output is given as text; the engine checks that every follow-up is a continuation of the retained
previous turn): submit + reward J x F1, the 5-call limit, malformed / unknown / bad calls as error results,
no tool call, max turns, context overflow, masks and the row layout; and the search tool itself (filters,
+-2 windows within a session, keyword cap)."""

import json

import numpy as np
import pytest

from memjax import Tokenizer
from memjax.agents import run_workflow
from memjax.systems.sumer.workflow import QwenSumerFormat, SumerConfig, SumerSample, SumerWorkflow
from memjax.systems.sumer.tools import MemoryTools, ToolsConfig, render_windows
from memjax.agents.toolcall import ToolCall
from memjax.engine import Completion
from memjax.engine.config import KVHandle
from memjax.memory.bank import MemoryRecord
from memjax.memory.embedders import HashedBowEmbedder
from memjax.memory.retrieval import Retriever
from memjax.rewards.locomo import RuleBasedJudge

TOK = Tokenizer.default()


def records():
    text = {1: ["I adopted a cat named Milo.", "Nice! What colour is Milo?", "Milo is orange.", "Cute.",
                "See you soon."],
            2: ["I moved to Lisbon last week.", "How is Lisbon?", "Sunny and loud.", "Enjoy!"]}
    out = []
    for s, lines in text.items():
        for t, line in enumerate(lines):
            out.append(MemoryRecord(id=f"D{s}:{t + 1}", content=line, conversation="c", speaker="Ann" if t % 2 == 0
                                    else "Bob", session=s, session_time=f"day {s}", dia_ids=(f"D{s}:{t + 1}",)))
    return out


TOOLS = MemoryTools(Retriever(records(), HashedBowEmbedder(256)), ToolsConfig())


def call(name, **args):
    return '<tool_call>\n{"name": "' + name + '", "arguments": ' + json.dumps(args) + "}\n</tool_call>"


class Scripted:
    """An engine stand-in: outputs come from `script[question index][turn]` (text, finish) in order."""

    def __init__(self, scripts, window=4096):
        self.scripts, self.stats, self.rid, self.queue = scripts, {}, 0, []
        self.config = type("C", (), {"window": window, "progress": False})()
        self.released = 0

    def submit(self, prompt, params, parent=None, retain=False):
        history = list(parent.kv.tokens) if parent is not None else []
        assert parent is None or not parent.kv.released  # continuation of a live retained turn
        full = history + list(prompt)
        q = next(i for i, s in enumerate(self.scripts) if s["prompt"] == full[: len(s["prompt"])])
        turn = (sum(1 for t in full if t == TOK.im_start_id) - 3) // 2  # system, user, assistant; +2 per round
        text, finish = self.scripts[q]["turns"][turn]
        ids = TOK.encode(text) + ([TOK.im_end_id] if finish == "stop" else [])
        ids = ids[: params.max_tokens]
        self.rid += 1
        kv = KVHandle(pages=(), n_cached=len(full + ids) - 1, tokens=full + ids) if retain else None
        self.queue.append(Completion(ids, [-0.5] * len(ids), finish, prompt_len=len(full), request_id=self.rid,
                                     kv=kv))
        return self.rid

    def step(self):
        out, self.queue = self.queue, []
        return out

    def release(self, comp):
        if not comp.kv.released:
            comp.kv.released = True
            self.released += 1

    def abort(self, rids):
        self.queue = []


def run(turn_lists, cfg=SumerConfig(), window=4096, gold="orange", evidence=()):
    fmt = QwenSumerFormat(TOK)
    samples = [SumerSample(f"What colour is Milo? ({i})", gold, TOOLS, qid=str(i), evidence=evidence)
               for i in range(len(turn_lists))]
    wf = SumerWorkflow(fmt, RuleBasedJudge(), cfg, window=window)
    scripts = [{"prompt": fmt.prompt(s.question), "turns": t} for s, t in zip(samples, turn_lists)]
    eng = Scripted(scripts, window)
    res = run_workflow(eng, wf, samples, progress=False)
    return res, eng, fmt


def test_submit_reward_masks_and_row_layout():
    res, eng, fmt = run([
        [("Let me search. " + call("search_memory", query="Milo colour", mode="semantic"), "stop"),
         (call("submit_answer", answer="Milo is orange"), "stop")],
        [(call("submit_answer", answer="orange"), "stop")],
        [(call("submit_answer", answer="green"), "stop")],
    ])
    tr = res.traces
    assert [t["end"] for t in tr] == ["submitted"] * 3
    assert res.rewards == pytest.approx([2 * (1 / 3) / (1 / 3 + 1), 1.0, 0.0])  # J=1 (rule judge f1>=0.5 fails
    # for "Milo is orange": set F1 = 0.5 -> J=1), F1 0.5
    b = res.batch
    assert b.num_rows == 3 and eng.released == 4  # every retained turn given back
    p, n = int(b.prompt_len[0]), int(b.lengths[0])
    row = b.input_ids[0, :n].tolist()
    gen1 = TOK.encode("Let me search. " + call("search_memory", query="Milo colour", mode="semantic")) + [TOK.im_end_id]
    result = render_windows(TOOLS.search("Milo colour", mode="semantic"))
    tool = fmt.tool_turn([result])
    gen2 = TOK.encode(call("submit_answer", answer="Milo is orange")) + [TOK.im_end_id]
    assert row == fmt.prompt("What colour is Milo? (0)") + gen1 + tool + gen2
    assert b.loss_mask[0, :n].tolist() == [0] * p + [1] * len(gen1) + [0] * len(tool) + [1] * len(gen2)
    assert (b.old_logp[0, p:n][b.loss_mask[0, p:n] == 0] == 0).all()
    assert (b.old_logp[0, p:n][b.loss_mask[0, p:n] == 1] == -0.5).all()
    assert "Milo is orange." in result and "--- session 1 (day 1) ---" in result


def test_call_limit_errors_and_episode_ends():
    many = "".join(call("search_memory", query="Milo", mode="keyword") for _ in range(7))
    bad = ("<tool_call>{not json}</tool_call>" + call("delete_memory", id=3)
           + call("search_memory", query="x", mode="fuzzy") + call("search_memory", query="Milo", speaker="Zed"))
    res, eng, fmt = run([
        [(many, "stop"), (call("submit_answer", answer="orange"), "stop")],
        [("I think it is orange.", "stop")],  # no tool call
        [(call("search_memory", query="Milo"), "stop")] * 3,  # never submits: max_turns
        [(bad, "stop"), (call("submit_answer", answer="orange"), "stop")],
    ], cfg=SumerConfig(max_turns=3))
    tr = res.traces
    assert [t["end"] for t in tr] == ["submitted", "no_tool_call", "max_turns", "submitted"]
    assert res.rewards == [1.0, -1.0, -1.0, 1.0]
    assert tr[0]["calls"] == 8 and tr[0]["excess_calls"] == 2 and tr[2]["turns"] == 3
    assert tr[3]["call_errors"] == 4
    text = TOK.decode(res.batch.input_ids[0, : int(res.batch.lengths[0])].tolist())
    assert text.count("Error: at most 5 tool calls per turn") == 2 and text.count("Found 3 matching memories") == 5
    text = TOK.decode(res.batch.input_ids[3, : int(res.batch.lengths[3])].tolist())
    for msg in ("not valid JSON", "unknown tool 'delete_memory'", "must be one of", "unknown speaker 'Zed'"):
        assert msg in text
    assert res.stats["end_submitted"] == 0.5 and res.stats["mean_excess_calls"] == 0.5


def test_context_overflow_and_cut_turns():
    fmt = QwenSumerFormat(TOK)
    n = len(fmt.prompt("What colour is Milo? (0)"))
    long_search = call("search_memory", query="Milo", mode="keyword")
    res, _, _ = run([[(long_search, "stop")] * 5,
                     [(long_search, "length"), (call("submit_answer", answer="orange"), "stop")]],
                    window=n + 160, cfg=SumerConfig(max_turn_tokens=64))
    assert res.traces[0]["end"] == "context_overflow" and res.rewards[0] == -1.0
    assert int(res.batch.lengths.max()) < n + 160
    res, _, _ = run([[(long_search, "length"), (call("submit_answer", answer="orange"), "stop")]])
    b = res.batch
    row = b.input_ids[0, : int(b.lengths[0])].tolist()
    assert res.rewards == [1.0] and row.count(TOK.im_end_id) >= 3  # the cut turn got its <|im_end|> (masked)
    i = row.index(TOK.im_end_id, int(b.prompt_len[0]))
    assert b.loss_mask[0, i] == 0


def test_search_tool_filters_windows_and_cap():
    r = TOOLS.search("Milo", mode="keyword")
    assert r.matched == 3 and [m.id for w in r.windows for m in w] == ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"]
    r = TOOLS.search("Lisbon", mode="keyword", speaker="bob")
    assert [m.id for w in r.windows for m in w] == ["D2:1", "D2:2", "D2:3", "D2:4"]  # stops at the session
    r = TOOLS.search("See you soon", mode="keyword")  # last turn of session 1: no window into session 2
    assert [m.id for w in r.windows for m in w] == ["D1:3", "D1:4", "D1:5"]
    cross = MemoryTools(TOOLS.retriever, ToolsConfig(cross_sessions=True)).search("See you soon", mode="keyword")
    assert [m.id for w in cross.windows for m in w] == ["D1:3", "D1:4", "D1:5", "D2:1", "D2:2"]
    capped = MemoryTools(TOOLS.retriever, ToolsConfig(keyword_max_hits=1, context_turns=0)).search("i", mode="keyword")
    assert capped.shown == 1 and capped.matched > 1 and "narrow the search" in render_windows(capped)
    assert TOOLS.search("Milo", session=7).kind == "error" and TOOLS.search("", mode="keyword").kind == "error"
    assert TOOLS.execute(ToolCall("submit_answer", {"answer": "x"})).answer == "x"
    assert TOOLS.execute(ToolCall("search_memory", {"qery": "x"})).kind == "error"  # unchecked args: no raise
    hits = TOOLS.search("cat adopted", mode="semantic", session=1)
    assert hits.kind == "hits" and hits.windows and all(m.session == 1 for w in hits.windows for m in w)
    assert np.isfinite(hits.matched)


def test_search_hit_metrics_over_hand_built_episodes():
    """Evidence D1:3 ("Milo is orange."): episode 0 searches twice (one search shows D1:3, one only session 2),
    episode 1 searches once in session 2 only, episode 2 submits without searching; a failed search (unknown
    session) is an error, not an executed search."""
    kw = dict(mode="keyword")
    res, _, _ = run([
        [(call("search_memory", query="orange", **kw) + call("search_memory", query="Lisbon", **kw), "stop"),
         (call("submit_answer", answer="orange"), "stop")],
        [(call("search_memory", query="Lisbon", session=2, **kw) + call("search_memory", query="Milo", session=9,
                                                                         **kw), "stop"),
         (call("submit_answer", answer="green"), "stop")],
        [(call("submit_answer", answer="orange"), "stop")],
    ], evidence=("D1:3",))
    assert [(t["searches"], t["search_hits"]) for t in res.traces] == [(2, 1), (1, 0), (0, 0)]
    st = res.stats
    assert st["mean_searches"] == pytest.approx(1.0)
    assert st["search_hit_rate"] == pytest.approx(1 / 3)
    assert st["evidence_found"] == pytest.approx(1 / 3)
    assert st["mean_evidence_searches"] == pytest.approx(1 / 3)
    assert st["mean_call_errors"] == pytest.approx(1 / 3)
    assert st["filtered_search_frac"] == pytest.approx(1 / 3)  # 1 of 3 executed searches had a filter
    # shown: "orange" -> D1:1-5 (5), "Lisbon" -> D2:1-4 (4, twice)
    assert st["records_per_search"] == pytest.approx((5 + 4 + 4) / 3)
    res, _, _ = run([[(call("search_memory", query="orange", **kw), "stop"), (call("submit_answer", answer="x"),
                                                                              "stop")]])
    assert "search_hit_rate" not in res.stats and "evidence_found" not in res.stats  # no evidence: no hit metrics
