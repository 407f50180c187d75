"""Memory traces as HTML for the report: one view per trace, grouped per conversation, searchable.

Owns: `TraceView` and `trace_views(run)`, which turns what each system's workflow wrote (traces.jsonl, result.json's
held-out traces, LoCoMo predictions.jsonl) into views, recognised by the keys a trace carries: MemAgent
(`memories`), SUMER (`turn_texts`), Memory-R1 (`op`, `applied`, ...), Memory-R2 (`banks`, `bank_diffs`), LoCoMo
predictions; anything else is shown as a key/value table. What each view shows: docs/report.md, 'What the page
shows'.
Invariants: every string from a run goes through html.escape; `text` (what the search box matches) is the
lower-cased JSON of the trace plus its group and title; at most MAX_TRACES views and MAX_BYTES of trace HTML and
search text, in order (held-out traces first; the rest counted on the page, not shown).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from html import escape
from typing import Any

from .load import RunData

MAX_TRACES = 3000
MAX_BYTES = 24 << 20  # trace HTML + search text per page: a long MemAgent run stays a page a browser opens
OP_EVENTS = {"add": "ADD", "update": "UPDATE", "delete": "DELETE", "none": "NOOP", "noop": "NOOP", "skip": "NOOP",
             "NONE": "NOOP"}


@dataclass
class TraceView:
    group: str
    title: str
    reward: float | None
    body: str
    text: str


def _e(x: Any) -> str:
    return escape(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str))


def fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "—" if v is None else str(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def kv_table(d: dict, skip: tuple[str, ...] = ()) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(fmt(v)) if not isinstance(v, (dict, list)) else _e(v)}</td></tr>"
                   for k, v in d.items() if k not in skip)
    return f'<table class="kv">{rows}</table>'


def kv_line(d: dict) -> str:
    """Short fields on one line: <b>key</b> value · ..."""
    return '<p class="kvline">' + " · ".join(f"<b>{_e(k)}</b> {_e(fmt(v)) if not isinstance(v, (dict, list)) else _e(v)}"
                                             for k, v in d.items()) + "</p>"


def _memagent(t: dict, doc: str | None) -> str:
    mems = list(t.get("memories") or [])
    chunks = t.get("chunk_texts")
    if chunks is None and doc:
        words, n = doc.split(), max(int(t.get("chunks") or len(mems) or 1), 1)
        per = -(-len(words) // n)
        chunks = [" ".join(words[i * per:(i + 1) * per]) for i in range(n)]
    head = "<tr><th>#</th>" + ("<th>chunk</th>" if chunks else "") + "<th>memory after the chunk</th></tr>"
    rows = "".join(f"<tr><td>{i + 1}</td>" + (f"<td class=chunk>{_e(chunks[i] if i < len(chunks) else '')}</td>"
                                               if chunks else "") + f"<td class=mem>{_e(m)}</td></tr>"
                   for i, m in enumerate(mems))
    note = "" if chunks else '<p class="note">chunk text not stored in this trace</p>'
    tail = {k: t[k] for k in ("final", "answers", "scores") if k in t}
    return f'<table class="steps">{head}{rows}</table>{note}' + kv_line(tail)


def _sumer(t: dict) -> str:
    turns, tools = t.get("turn_texts") or [], t.get("tool_texts") or []
    rows = []
    for i, turn in enumerate(turns):
        rows.append(f'<div class="turn model"><span class="who">model {i + 1}</span><pre>{_e(turn)}</pre></div>')
        if i < len(tools):
            rows.append(f'<div class="turn tool"><span class="who">tool results</span><pre>{_e(tools[i])}</pre></div>')
    info = {k: t[k] for k in ("question", "gold", "answer", "end", "f1", "judge", "calls", "call_errors") if k in t}
    return kv_line(info) + "".join(rows)


def _event(op: str) -> str:
    word = (op or "").split()[0] if (op or "").split() else ""
    return OP_EVENTS.get(word, OP_EVENTS.get(word.lower(), word.upper() or "?"))


def _r1_tiny(t: dict) -> str:
    m = re.match(r"memory (.*?)\s*fact (.*?)\s*op\s*$", t.get("prompt", ""))
    bank, fact = (m.group(1), m.group(2)) if m else (t.get("prompt", ""), "")
    records = [r for r in re.split(r"\s*(?=\b\d+ )", bank) if r.strip()]
    ev, teacher = _event(t.get("output", "")), _event(t.get("op", ""))
    ok = "ok" if t.get("output") == t.get("op") else "bad"
    return (f'<p>fact: <b>{_e(fact)}</b> · bank before it:</p><ul class="bank">' + "".join(f"<li>{_e(r)}</li>" for r in records)
            + f'</ul><p class="event {ok}">event <span class="op op-{ev}">{_e(ev)}</span> <code>{_e(t.get("output"))}</code>'
            f' · teacher <span class="op op-{teacher}">{_e(teacher)}</span> <code>{_e(t.get("op"))}</code></p>'
            + kv_line({k: t[k] for k in ("case", "answer", "gold") if k in t}))


def _r1_locomo(t: dict) -> str:
    applied = t.get("applied") or {}
    evs = "".join(f'<span class="op op-{_event(k)}">{_e(_event(k))} × {_e(fmt(v))}</span> ' for k, v in applied.items())
    facts = "".join(f"<li>{_e(f)}</li>" for f in t.get("facts") or [])
    qa = list(zip(t.get("questions") or [], t.get("golds") or [], t.get("answers") or []))
    qrows = "".join(f"<tr><td>{_e(q)}</td><td>{_e(g)}</td><td>{_e(a)}</td></tr>" for q, g, a in qa)
    return (f'<p class="event">events: {evs or "none"}</p><p>facts:</p><ul>{facts}</ul>'
            f'<pre>{_e(t.get("output", ""))}</pre>'
            + (f'<table class="steps"><tr><th>question</th><th>gold</th><th>answer</th></tr>{qrows}</table>' if qa else "")
            + (f'<p>rejected: {_e(t["rejected"])}</p>' if t.get("rejected") else ""))


def _records(bank: str) -> list[str]:
    return [r.strip() for r in re.split(r"(?<=\.)\s+", bank or "") if r.strip()]


def _r2_tiny(t: dict) -> str:
    sessions, outputs, banks = t.get("sessions") or [], t.get("outputs") or [], t.get("banks")
    rewards, out, prev = t.get("global_rewards") or [], [], []
    for i, facts in enumerate(sessions):
        diff = ""
        if banks is not None and i < len(banks):
            now = _records(banks[i])
            lines = []
            for d in difflib.ndiff(prev, now):
                tag, body = d[:1], d[2:]
                if tag in "+-":
                    lines.append(f'<div class="{"ins" if tag == "+" else "del"}">{tag} {_e(body)}</div>')
                elif tag == " ":
                    lines.append(f'<div class="same">&nbsp; {_e(body)}</div>')
            diff = '<div class="diff">' + ("".join(lines) or '<div class="same">(empty bank)</div>') + "</div>"
            prev = now
        ops = outputs[i] if i < len(outputs) else ""
        r = f" · session reward {fmt(rewards[i])}" if i < len(rewards) else ""
        out.append(f'<div class="session"><p><b>session {i + 1}</b>{_e(r)}: facts '
                   + " ".join(f"<code>{_e(f)}</code>" for f in facts)
                   + f' → ops <code>{_e(ops)}</code> ('
                   + ", ".join(_e(_event(o)) for o in ops.split() if not o.isdigit()) + f")</p>{diff}</div>")
    if banks is None and "memory" in t:
        out.append(f'<p>final bank: {_e(t.get("memory", ""))}</p>')
    qs = t.get("questions") or []
    qrows = "".join(f"<tr><td>{_e(q.get('question'))}</td><td>{_e(q.get('gold'))}</td><td>{_e(q.get('answer'))}</td>"
                    f"<td>{_e(fmt(q.get('f1')))}</td></tr>" for q in qs)
    return "".join(out) + (f'<table class="steps"><tr><th>question</th><th>gold</th><th>answer</th><th>F1</th></tr>'
                           f"{qrows}</table>" if qs else "")


def _r2_locomo(t: dict) -> str:
    """Memory-R2 on LoCoMo: per session the records its manager calls added, removed and rewrote."""
    sessions: dict = {}
    for d in t.get("bank_diffs") or []:
        sessions.setdefault(d.get("session"), []).append(d)
    rewards, out = t.get("global_rewards") or [], []
    for i, (s, ds) in enumerate(sessions.items()):
        lines = [f'<div class="ins">+ {_e(x)}</div>' for d in ds for x in d.get("added", [])]
        lines += [f'<div class="del">- {_e(x)}</div>' for d in ds for x in d.get("removed", [])]
        lines += [f'<div class="del">- {_e(a)}</div><div class="ins">+ {_e(b)}</div>' for d in ds
                  for a, b in d.get("updated", [])]
        r = f" · session reward {fmt(rewards[i])}" if i < len(rewards) else ""
        out.append(f'<div class="session"><p><b>session {_e(s)}</b>{_e(r)}: {len(ds)} manager call(s)</p>'
                   f'<div class="diff">{"".join(lines) or "<div class=same>(no change)</div>"}</div></div>')
    info = {k: t[k] for k in ("conversation", "memory_records", "memory_words", "truncated", "ops") if k in t}
    return kv_line(info) + "".join(out) + _r2_tiny({"questions": t.get("questions") or []})


def _prediction(t: dict) -> str:
    return kv_line({k: t[k] for k in ("question", "gold", "prediction", "f1_set", "f1", "b1", "j", "judge_label",
                                       "category", "evidence", "memory_dia_ids", "error") if k in t})


def render_body(t: dict, doc: str | None = None) -> str:
    if "memories" in t:
        return _memagent(t, doc)
    if "turn_texts" in t or ("end" in t and "calls" in t):
        return _sumer(t)
    if "prompt" in t and "op" in t:
        return _r1_tiny(t)
    if "applied" in t:
        return _r1_locomo(t)
    if "sessions" in t and "outputs" in t:
        return _r2_tiny(t)
    if "bank_diffs" in t:
        return _r2_locomo(t)
    if "prediction" in t and "qid" in t:
        return _prediction(t)
    if "questions" in t and isinstance(t["questions"], list):
        return kv_table(t, skip=("questions",)) + _r2_tiny({"questions": t["questions"]})
    return kv_table(t)


def _reward(t: dict) -> float | None:
    for k in ("reward", "j", "f1_set"):
        v = t.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    s = t.get("scores")
    return float(s["sub_em"]) if isinstance(s, dict) and isinstance(s.get("sub_em"), (int, float)) else None


def _view(group: str, title: str, t: dict, doc: str | None = None) -> TraceView:
    text = f"{group} {title} " + json.dumps(t, ensure_ascii=False, default=str) + (f" {doc}" if doc else "")
    return TraceView(group, title, _reward(t), render_body(t, doc), text.lower())


def _doc(sample: Any) -> str | None:
    if isinstance(sample, dict):
        for k in ("context", "document"):
            if isinstance(sample.get(k), str):
                return sample[k]
    return None


def trace_views(run: RunData) -> tuple[list[TraceView], int]:
    """(views to show, how many traces were left out beyond MAX_TRACES)."""
    views: list[TraceView] = []
    res = run.result
    if run.kind == "train":
        heldout = res.get("heldout") or []
        for when in ("before", "after"):
            step = (res.get(when) or {}).get("step", "?")
            for t in res.get(f"traces_{when}") or []:
                i = t.get("sample", 0)
                doc = _doc(heldout[i]) if isinstance(i, int) and i < len(heldout) else None
                views.append(_view(f"held-out sample {i}", f"{when} RL (step {step}), rollout {t.get('rollout', 0)}",
                                   t, doc))
        for t in run.traces:
            views.append(_view(f"training step {t.get('step', '?')} · sample {t.get('sample', '?')}",
                               f"rollout {t.get('rollout', '?')}", t))
    elif run.kind == "locomo_eval":
        for t in run.predictions:
            views.append(_view(f"conversation {t.get('conversation', '?')}", f"{t.get('qid', '?')}", t))
    else:
        for t in run.traces:
            g = (f"N={t['num_docs']} · {t.get('id', t.get('sample', '?'))}" if "num_docs" in t
                 else f"conversation {t['conversation']}" if "conversation" in t else f"sample {t.get('sample', '?')}")
            views.append(_view(g, f"rollout {t.get('rollout', 0)}", t))
    kept, size = [], 0
    for v in views[:MAX_TRACES]:
        size += len(v.body) + len(v.text)
        if size > MAX_BYTES:
            break
        kept.append(v)
    return kept, len(views) - len(kept)
