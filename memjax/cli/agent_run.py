"""The two runs of `python -m memjax.run_agent` once its input is checked, and what they leave: record.json and the
offline trace page agent.html.

Owns `run_documents` (MemAgent: the system's own workflow -- the tiny system's for a tiny policy, MemAgent's with
the reference templates for a Qwen model -- wrapped by `Streaming`, which prints the memory after each chunk under a
rich progress bar; one trajectory per question, greedy), `run_conversation` (SUMER / Memory-R1 / Memory-R2: the
paper's registered LongMemEval predictor, whose workflow traces `collect_traces` gathers: searches and tool results,
memory operations and banks) and `write_outputs`.
Invariants: the record holds every question, its answer and the traces as the workflows wrote them; the page
escapes every string (memjax/report/traces.py render_body) and references no external resource.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from ..agents.workflow import Workflow, collect_traces, run_workflow
from ..core.outdir import write_atomic
from ..report.page import CSS, JS
from ..report.traces import render_body


class Streaming(Workflow):
    """A MemAgent workflow whose every memory update is also handed to `on_memory(turn, n_chunks, text)`."""

    def __init__(self, inner, on_memory):
        self.inner, self.on_memory = inner, on_memory
        self.pad_id = inner.pad_id

    def prepare(self, sample):
        return self.inner.prepare(sample)

    def start(self, traj, prepared):
        return self.inner.start(traj, prepared)

    def react(self, traj, request, completion):
        follow = self.inner.react(traj, request, completion)
        st = traj.state
        if not request.is_final:
            self.on_memory(st.turn, st.n_chunks, st.memories[-1])
        return follow

    def reward(self, traj):
        return self.inner.reward(traj)

    def trace(self, traj):
        return self.inner.trace(traj)

    def stats(self, trajs):
        return self.inner.stats(trajs)


def _memagent(args, tiny: bool, tok):
    """(engine, workflow, tokenizer) of MemAgent on the policy."""
    from ..engine import Engine, EngineConfig

    if tiny:
        from ..systems.memagent.tiny.system import TinySection, TinySystem
        from ..tiny.longmemeval import load_policy

        system = TinySystem(TinySection())
        model, tiny_tok = system.load_model(None)
        if args.model != "tiny":
            model = load_policy(args.model, lambda: model)
        engine = Engine(model, system.engine_config(None))
        return engine, system.workflow(engine, tok or tiny_tok, train=False), tok or tiny_tok
    from ..checkpoint import load_hf
    from ..systems.memagent.workflow import MemAgent, MemAgentConfig

    model = load_hf(args.model)
    cfg = MemAgentConfig(chunk_tokens=args.chunk_tokens, max_memory_tokens=args.memory_tokens,
                         max_final_tokens=args.memory_tokens, max_query_tokens=1024, temperature=0.0, group_size=1,
                         record_conversations=False)
    window = args.chunk_tokens + cfg.max_query_tokens + 2 * args.memory_tokens + 512
    engine = Engine(model, EngineConfig(max_slots=1, prefill_slots=1, window=window, page_size=16,
                                        prefill_chunk=min(2048, window), progress=False))
    return engine, MemAgent(engine, tok, cfg), tok


def run_documents(args, docs: list[tuple[str, str]], tiny: bool, tok, con: Console) -> dict:
    """MemAgent over the documents, one greedy trajectory per question, the memory streamed after each chunk."""
    engine, workflow, tok = _memagent(args, tiny, tok)
    text = "\n\n".join(t for _, t in docs)
    rows = []
    for q in args.question:
        con.rule(f"[bold]{q}")
        with Progress(TextColumn("reading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=con,
                      transient=True) as bar:
            task = bar.add_task("chunks", total=None)

            def show(turn: int, n: int, memory: str) -> None:
                bar.update(task, total=n, completed=turn)
                bar.console.print(f"[dim]chunk {turn}/{n}[/] memory: {memory}", highlight=False, markup=True)

            res = run_workflow(engine, Streaming(workflow, show), [{"context": text, "query": q, "answers": [""]}],
                               record=False, progress=False)
        t = res.traces[0]
        con.print(f"[bold green]answer:[/] {t['final']}", highlight=False)
        rows.append({"question": q, "answer": t["final"], "trace": t, "document": text})
    return {"system": "memagent" + ("_tiny" if tiny else ""), "model": args.model, "questions": rows}


def _show_trace(con: Console, t: dict) -> None:
    """The searches / operations of one trace, as lines."""
    if "turn_texts" in t:  # SUMER: each model turn (its calls) and the tool results after it
        for i, turn in enumerate(t["turn_texts"]):
            con.print(f"  [cyan]model {i + 1}:[/] {turn}", highlight=False)
            if i < len(t.get("tool_texts") or []):
                con.print(f"  [yellow]tool:[/] {t['tool_texts'][i]}", highlight=False)
    elif "sessions" in t and "outputs" in t:  # tiny Memory-R2: per session the facts and the ops
        for i, facts in enumerate(t["sessions"]):
            ops = t["outputs"][i] if i < len(t["outputs"]) else ""
            con.print(f"  [cyan]session {i + 1}:[/] {' | '.join(facts)}  [yellow]ops:[/] {ops}", highlight=False)
        if t.get("banks"):
            con.print(f"  [green]bank:[/] {t['banks'][-1]}", highlight=False)
    elif "bank_diffs" in t:  # Memory-R2 on a conversation: records added / removed / rewritten per session
        for d in t["bank_diffs"]:
            con.print(f"  [cyan]session {d.get('session')}:[/] +{len(d.get('added', []))} "
                      f"-{len(d.get('removed', []))} ~{len(d.get('updated', []))} records", highlight=False)
    else:
        brief = {k: v for k, v in t.items() if k not in ("sample", "rollout")}
        con.print(f"  {json.dumps(brief, ensure_ascii=False, default=str)[:400]}", highlight=False)


def run_conversation(args, questions: list, tiny: bool, con: Console) -> dict:
    """SUMER / Memory-R1 / Memory-R2 through the paper's registered LongMemEval predictor (module docstring)."""
    from .. import systems  # noqa: F401  (registers every paper's predictors)
    from ..checkpoint.source import ModelSource
    from ..evaluation.longmemeval import _PREDICTORS, LongMemEvalConfig

    name = f"{args.system}_tiny" if tiny else args.system
    policy = "" if args.model == "tiny" else args.model
    if tiny:
        cfg = LongMemEvalConfig(system=name, policy=policy, answer_policy=args.answer_model if name == "memory_r1_tiny"
                                else "", question_date=False, judge="exact")
    else:
        cfg = LongMemEvalConfig(system=name, model=ModelSource(hf_path=policy), answer_hf_path=args.answer_model,
                                question_date=False, judge="exact")
    with con.status(f"{name}: building the memory and answering {len(questions)} question(s)"):
        with collect_traces() as traces:
            predict, _ = _PREDICTORS[name](cfg, questions)
            outs = predict(list(questions))
    rows = []
    for q, o in zip(questions, outs):
        con.rule(f"[bold]{q.question}")
        mine = [t for t in traces if str(t.get("qid", t.get("question", ""))) in (q.question_id, q.question)
                or q.question in [x.get("question") for x in t.get("questions") or [] if isinstance(x, dict)]]
        for t in mine or []:
            _show_trace(con, t)
        answer = o.get("answer")
        why = f" ({o['unreadable']})" if o.get("unreadable") else ""
        con.print(f"[bold green]answer:[/] {answer}{why}" + (f"   [dim]gold: {q.answer}[/]" if q.answer else ""),
                  highlight=False)
        rows.append({"question": q.question, "answer": answer, "gold": q.answer or None,
                     **{k: v for k, v in o.items() if k != "answer"}, "traces": mine})
    shown = {id(t) for r in rows for t in r["traces"]}
    return {"system": name, "model": args.model, "questions": rows,
            "other_traces": [t for t in traces if id(t) not in shown]}


def _page(record: dict) -> str:
    blocks = []
    for i, row in enumerate(record["questions"]):
        traces = ([row["trace"]] if "trace" in row else []) + row.get("traces", [])
        if i == 0:
            traces += record.get("other_traces", [])
        body = "".join(f'<div class="trace" data-text="{html.escape(json.dumps(t, default=str).lower(), quote=True)}">'
                       f"<h4>trace {k + 1}</h4>{render_body(t, row.get('document'))}</div>"
                       for k, t in enumerate(traces))
        blocks.append(f'<details class="group" open><summary>{html.escape(row["question"])} → '
                      f'{html.escape(str(row["answer"]))}</summary>{body or "<p class=note>no trace</p>"}</details>')
    title = f"memjax run_agent: {record['system']}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head><body><header><h1>{html.escape(title)}</h1><p>model "
            f"{html.escape(str(record['model']))} · input {html.escape(', '.join(map(str, record.get('inputs', []))))}"
            f'</p></header><main><section id="traces"><h2>Questions and memory traces</h2>'
            f'<p><input id="q" type="search" placeholder="search traces"> <span id="trace-count"></span></p>'
            f"{''.join(blocks)}</section></main><script>{JS}</script></body></html>\n")


def write_outputs(out: Path, record: dict) -> Path:
    """record.json and agent.html in `out`; returns the page's path."""
    write_atomic(out / "record.json", json.dumps(record, indent=1, ensure_ascii=False, default=str) + "\n")
    page = out / "agent.html"
    write_atomic(page, _page(record))
    return page
