"""The report page: one self-contained HTML file (inline CSS, inline JS, inline SVG/PNG; nothing fetched).

Owns: `render(run) -> str` (sections: summary, config, curves, evaluation tables, memory traces, the run's own
images) and `write_report(out_dir) -> Path` (writes out_dir/report.html atomically).
The traces carry a search box: the inline script hides every trace whose text lacks the query and every
conversation left empty, shows "K of N traces", and applies `?q=...` from the page's address on load (so a
headless browser can check the filter). Invariants: every run-supplied string is escaped (html.escape); the page
references no external resource (no http(s) URL in a src/href); element ids used by tests: #curves, #evals,
#traces, #q, #trace-count, #config, #phases (training runs).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
from html import escape
from pathlib import Path

from ..core.environment import line as env_line
from ..core.outdir import write_atomic
from .load import RunData, load_run
from .phases import phases_html
from .plots import curve_svg, panels_for
from .traces import fmt, trace_views

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1f3a5f;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;opacity:.85}nav a{color:#cfe0ff;margin-right:14px}
main{padding:8px 24px 40px;max-width:1400px}section{background:#fff;border:1px solid #dde1e7;border-radius:6px;
padding:10px 16px;margin:14px 0}h2{font-size:17px;margin:6px 0 10px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #dde1e7;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f0f2f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pos{color:#0a7a2f}.neg{color:#b3261e}.grid{display:flex;flex-wrap:wrap;gap:8px}.grid svg{width:392px;height:auto;
border:1px solid #eee}.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#f0f4fa;border-radius:6px;
padding:6px 12px}.card b{display:block;font-size:18px}#q{width:360px;padding:5px 8px;font-size:14px}
details.group{border-top:1px solid #e5e7eb;padding:4px 0}summary{cursor:pointer;font-weight:600}
.trace{margin:6px 0 10px 18px;padding:6px 10px;border-left:3px solid #9db3d6;background:#fafbfd}
.trace h4{margin:0 0 4px;font-size:13px}.reward{float:right;background:#e8eefb;border-radius:4px;padding:0 6px}
td.chunk{max-width:520px;color:#445}td.mem{max-width:520px;font-family:monospace}
pre{white-space:pre-wrap;margin:2px 0;font-size:12px}.turn{margin:3px 0}.who{font-size:11px;color:#667}
.tool pre{background:#f3f7ee}.model pre{background:#eef3fb}.diff{font-family:monospace;font-size:12px;margin:2px 0 8px}
.ins{background:#e6ffec;color:#0a5c23}.del{background:#ffebe9;color:#8c1d18}.same{color:#778}
.op{display:inline-block;border-radius:3px;padding:0 5px;font-weight:600;font-size:12px;background:#ddd}
.op-ADD{background:#d2f4dc}.op-UPDATE{background:#fff1c2}.op-DELETE{background:#ffd7d4}.op-NOOP{background:#e4e6ea}
.scroll{overflow-x:auto}.kvline{margin:3px 0}.kvline b{color:#556;font-weight:600}.event.bad{opacity:.8}.note{color:#888;font-size:12px}.warning{background:#fde8e8;border:1px solid #c33;color:#900;padding:8px}table.kv th{width:180px}img{max-width:640px}
"""

JS = """
(function(){
  var box=document.getElementById('q'); if(!box) return;
  function apply(){
    var q=box.value.trim().toLowerCase(), shown=0, total=0;
    document.querySelectorAll('.trace').forEach(function(t){
      total++; var hit=!q||t.getAttribute('data-text').indexOf(q)>=0; t.hidden=!hit; if(hit) shown++;});
    document.querySelectorAll('details.group').forEach(function(g){
      var any=g.querySelector('.trace:not([hidden])'); g.hidden=!any; if(q&&any) g.open=true;});
    document.getElementById('trace-count').textContent=shown+' of '+total+' traces';
  }
  var q=new URLSearchParams(location.search).get('q'); if(q) box.value=q;
  box.addEventListener('input', apply); apply(); document.body.setAttribute('data-ready','1');
})();
"""

KIND_TITLES = {"train": "training run", "system_eval": "held-out evaluation", "length_eval": "MemAgent evaluation "
               "vs document length", "locomo_eval": "LoCoMo evaluation"}


def _e(x) -> str:
    return escape(str(x))


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def table(headers, rows, cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{cls}"><tr>{head}</tr>{body}</table></div>'


def _cell(c) -> str:
    if isinstance(c, tuple):  # (value, css class) for deltas
        return f'<td class="num {c[1]}">{_e(c[0])}</td>'
    return f'<td class="num">{_e(fmt(c))}</td>' if _num(c) or c is None else f"<td>{_e(c)}</td>"


def delta(a, b):
    if not (_num(a) and _num(b)) or not (math.isfinite(a) and math.isfinite(b)):
        return "—"
    d = b - a
    return (f"{d:+.4g}", "pos" if d > 0 else "neg" if d < 0 else "")


def _flatten(d, prefix="") -> list[tuple[str, object]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out += _flatten(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v if not isinstance(v, (list, dict)) else json.dumps(v, default=str)))
    return out


def _curves(run: RunData) -> str:
    figs = []
    if run.metrics:
        keys = list(dict.fromkeys(k for m in run.metrics for k in m if k != "step"))
        steps = [m.get("step", i + 1) for i, m in enumerate(run.metrics)]
        for title, ks in panels_for(keys):
            figs.append(curve_svg(title, steps, {k: [m.get(k) for m in run.metrics] for k in ks}))
    if len(run.evals) > 1:
        ks = [k for k in run.evals[0] if k != "step" and _num(run.evals[0][k])]
        if ks:
            figs.append(curve_svg("held-out evaluation", [e.get("step", i) for i, e in enumerate(run.evals)],
                                  {k: [e.get(k) for e in run.evals] for k in ks[:8]}, marker="s-"))
    if run.kind == "length_eval" and run.result.get("rows"):
        rows = run.result["rows"]
        series = {"MemAgent sub-EM": [r.get("sub_em") for r in rows]}
        if any(r.get("baseline_sub_em") is not None for r in rows):
            series["full context sub-EM"] = [r.get("baseline_sub_em") for r in rows]
        for key, name in (("paper_7b", "paper RL-MemAgent-7B"), ("paper_14b", "paper RL-MemAgent-14B")):
            if any(r.get(key) is not None for r in rows):  # the paper's accuracy (%) on the same 0-1 scale
                series[name] = [None if r.get(key) is None else r[key] / 100 for r in rows]
        figs.append(curve_svg("accuracy vs length", [r.get("num_docs") for r in rows], series,
                              xlabel="documents (N)", marker="o-"))
    if not figs:
        return '<p class="note">no per-step metrics in this run (no metrics.jsonl)</p>'
    other = ""
    if run.metrics:
        last = run.metrics[-1]
        other = ("<details><summary>every logged metric at the last step</summary>"
                 + table(["metric", "value"], [(k, v) for k, v in last.items()]) + "</details>")
    return f'<div class="grid">{"".join(figs)}</div>{other}'


def _evals(run: RunData) -> str:
    res, parts = run.result, []
    if run.kind == "train":
        b, a = res.get("before") or {}, res.get("after") or {}
        if not (b or a) and run.evals:
            b, a = run.evals[0], run.evals[-1]  # an unfinished run: its latest evaluation (the page says so)
        ks = [k for k in dict.fromkeys([*b, *a]) if k != "step"]
        if ks:
            parts.append(f"<h3>held-out before (step {_e(b.get('step', '?'))}) and after (step {_e(a.get('step', '?'))})</h3>"
                         + table(["metric", "before", "after", "Δ"], [(k, b.get(k), a.get(k), delta(b.get(k), a.get(k)))
                                                                    for k in ks], "evals"))
        if run.evals:
            cols = list(dict.fromkeys(k for e in run.evals for k in e))
            parts.append("<h3>every held-out evaluation</h3>" + table(cols, [[e.get(c) for c in cols] for e in run.evals],
                                                                     "evals"))
        if res.get("stage_best"):
            parts.append("<h3>curriculum stages: best evaluated</h3>" + table(
                ["stage", "value"], [(k, json.dumps(v, default=str)) for k, v in res["stage_best"].items()]))
    elif run.kind == "system_eval":
        m = res.get("metrics") or {}
        parts.append(table(["metric", "value"], list(m.items()), "evals"))
    elif run.kind == "length_eval":
        rows = res.get("rows") or []
        heads = ["N docs", "mean tokens", "samples", "sub-EM", "EM", "F1", "missing \\boxed", "full-context sub-EM",
                 "Δ MemAgent − full context", "seconds", "paper length", "paper RL-MemAgent-7B (%)",
                 "paper RL-MemAgent-14B (%)"]
        parts.append(table(heads, [[r.get("num_docs"), r.get("mean_tokens"), r.get("samples"), r.get("sub_em"),
                                    r.get("em"), r.get("f1"), r.get("missing"), r.get("baseline_sub_em"),
                                    delta(r.get("baseline_sub_em"), r.get("sub_em")), r.get("seconds"),
                                    r.get("paper_tokens"), r.get("paper_7b"), r.get("paper_14b")] for r in rows],
                           "evals"))
        if res.get("paper"):
            parts.append(f'<p class="note">paper: {_e(res["paper"])}; its accuracy is set beside sub-EM</p>')
        if not res.get("complete", True):
            parts.append('<p class="note">incomplete: the run stopped before its last length</p>')
    elif run.kind == "locomo_eval":
        t = res.get("table") or {}
        cols = list(t)
        metrics = list(dict.fromkeys(m for c in t.values() for m in c))
        f1 = "" if res.get("benchmark") == "longmemeval" else (  # LongMemEval: accuracy and recall, no F1
            f", F1 over token {'sets' if res.get('f1', 'set') == 'set' else 'multisets'}")
        parts.append(f"<h3>{_e(res.get('title', 'LoCoMo'))} — judge {_e(res.get('judge', '?'))}{f1} (%)</h3>"
                     + table(["metric", *cols], [[m, *[t[c].get(m) for c in cols]] for m in metrics], "evals"))
        if res.get("counts"):
            parts.append("<h3>counts</h3>" + table(list(res["counts"]), [list(res["counts"].values())]))
    if not parts:
        return '<p class="note">no evaluation in this run</p>'
    return "".join(parts)


def _traces(run: RunData) -> str:
    views, left = trace_views(run)
    if not views:
        return '<p class="note">no traces in this run</p>'
    groups: dict[str, list] = {}
    for v in views:
        groups.setdefault(v.group, []).append(v)
    html = ['<p><input id="q" type="search" placeholder="search traces (memory, question, answer, op, ...)"> '
            f'<span id="trace-count">{len(views)} traces</span></p>']
    if run.banks:
        html.append('<details class="banks"><summary>final memory banks (banks/)</summary>' + "".join(
            f"<h4>{_e(c)}</h4><pre>{escape(json.dumps(b, indent=1, ensure_ascii=False)[:20000])}</pre>"
            for c, b in run.banks.items()) + "</details>")
    for i, (g, vs) in enumerate(groups.items()):
        rs = [v.reward for v in vs if v.reward is not None]
        mean = f" · mean reward {sum(rs) / len(rs):.3g}" if rs else ""
        html.append(f'<details class="group"{" open" if i < 3 else ""}><summary>{_e(g)} ({len(vs)} traces{_e(mean)})'
                    "</summary>")
        for v in vs:
            r = "" if v.reward is None else f'<span class="reward">reward {v.reward:.3g}</span>'
            html.append(f'<div class="trace" data-text="{escape(v.text, quote=True)}"><h4>{r}{_e(v.title)}</h4>'
                        f"{v.body}</div>")
        html.append("</details>")
    if left:
        html.append(f'<p class="note">{left} more traces not shown (first {len(views)})</p>')
    return "".join(html)


def unfinished(run: RunData) -> int:
    """A training run without result.json: the last step it logged (0: a finished run, or not a training run)."""
    if run.kind != "train" or run.result:
        return 0
    return max([int(m.get("step", 0)) for m in run.metrics] + [int(e.get("step", 0)) for e in run.evals] + [0]) or -1


def _summary(run: RunData) -> str:
    cards = [("run", KIND_TITLES[run.kind])] + ([("system", run.system)] if run.system else [])
    for key, name in (("model_run", "model run"), ("code", "code digest")):
        if run.result.get(key):
            cards.append((name, str(run.result[key])[:64 if key == "model_run" else 12]))
    if run.environment:  # versions, devices, processor (memjax/core/environment.py)
        cards.append(("ran on", env_line(run.environment)))
    if run.metrics:
        rw = [m.get("reward") for m in run.metrics if _num(m.get("reward"))]
        cards.append(("steps", run.metrics[-1].get("step", len(run.metrics))))
        if rw:
            cards.append(("reward first → last", f"{rw[0]:.3g} → {rw[-1]:.3g}"))
    if _num(run.result.get("seconds")):
        cards.append(("seconds", f"{run.result['seconds']:.0f}"))
    if run.torn_lines:
        cards.append(("torn JSONL lines skipped", run.torn_lines))
    fails = run.result.get("failed") if isinstance(run.result.get("failed"), dict) else {}
    warn = ""
    if unfinished(run):  # a stopped or running training run: its last evaluation is not the run's result
        warn = (f'<p class="warning" id="unfinished"><b>This training run has not finished</b> (no result.json): '
                f'the numbers are those of step {_e(unfinished(run))}, the last it logged, not its result. Run its '
                "command again to resume it.</p>")
    if fails.get("items"):  # a failure is never shown as a score: first thing on the page
        warn = (f'<p class="warning" id="failed"><b>{_e(fails["items"])} of {_e(fails.get("of", "?"))} items failed'
                f'</b> ({_e(fails.get("judge_errors", 0))} judge errors, {_e(fails.get("judge_unparsed", 0))} '
                f'unparsable judge replies, {_e(fails.get("predictor_errors", 0))} predictor errors): left out of J '
                "or scored 0; they are not results. Run the evaluation again into this directory to retry them.</p>")
    return warn + '<div class="cards">' + "".join(f'<div class="card">{_e(k)}<b>{_e(v)}</b></div>' for k, v in cards) + "</div>"


def _images(run: RunData) -> str:
    out = []
    for p in run.images:
        data = base64.b64encode(p.read_bytes()).decode()
        out.append(f'<figure><img alt="{_e(p.name)}" src="data:image/png;base64,{data}"><figcaption>{_e(p.name)}'
                   "</figcaption></figure>")
    return "".join(out)


def render(run: RunData) -> str:
    title = f"memjax report: {KIND_TITLES[run.kind]}" + (f" — {run.system}" if run.system else "")
    cfg = _flatten(run.config) if run.config else []
    cfg_html = table(["field", "value"], cfg) if cfg else '<p class="note">no config stored in this run directory</p>'
    imgs = _images(run)
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sections = [("summary", "Summary", _summary(run)), ("curves", "Curves", _curves(run)),
                ("evals", "Evaluation", _evals(run)), ("traces", "Memory traces", _traces(run)),
                *([("phases", "Cost per phase", phases_html(run.metrics))] if run.kind == "train" else []),
                ("config", "Config", cfg_html)]
    if imgs:
        sections.append(("images", "Images the run wrote", imgs))
    nav = "".join(f'<a href="#{sid}">{_e(name)}</a>' for sid, name, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{_e(name)}</h2>{html}</section>' for sid, name, html in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{CSS}</style></head><body data-kind=\"{_e(run.kind)}\"><header><h1>{_e(title)}</h1>"
            f"<p>{_e(run.path)} · written {_e(when)}</p><nav>{nav}</nav></header><main>{body}</main>"
            f"<script>{JS}</script></body></html>\n")


def write_report(out_dir: str | Path) -> Path:
    """Read the run in out_dir and write out_dir/report.html; returns its path (ReportError if not a run dir)."""
    run = load_run(out_dir)
    path = run.path / "report.html"
    write_atomic(path, render(run))
    return path
