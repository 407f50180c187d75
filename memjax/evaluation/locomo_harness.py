"""One LoCoMo evaluation over a list of questions: predict, judge and score each, into an out dir that a re-run
resumes; the table and chart at the end.

Owns `evaluate_locomo(questions, predictor, judge, out_dir, ...)` with the predictor types `Predictor` and
`BatchPredictor`, `RunCounts` (what the run counted) and `judge_id(judge)`. Systems (SUMER, Memory-R1, Memory-R2)
call `evaluate_locomo` with their own predictor; memjax/evaluation/locomo.py's config and CLI build one.
A `batch_predictor` (questions -> outputs, called on chunks of `batch_size`) lets a system batch its engine calls;
the judge is called once per chunk. The files it writes, what a predictor returns and how several processes
share the run: docs/evaluation.md, 'Files'.
Invariants: predictions.jsonl is flushed per chunk and a re-run resumes from it (a torn last line dropped and
counted; a resume under another judge is refused); a predictor exception is recorded, scored 0 and counted, never
raised; category 5 is refused (never scored); a qid appears at most once in predictions.jsonl; with several
processes process 0 alone writes, and the table equals the one-process table (records in question order).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from ..core.environment import describe as describe_environment
from ..core.outdir import write_atomic
from ..data.locomo import Question
from ..parallel.lifecycle import stop_point
from ..parallel.split import deal_groups, gather_objects
from ..rewards.locomo import token_set_f1
from ..rewards.text import bleu1, token_f1_multiset
from .locomo_table import failed, failures, score_table, table_chart, table_markdown
from .paper_tables import paper_markdown

Predictor = Callable[[Question], Any]
BatchPredictor = Callable[[list[Question]], Sequence[Any]]


@dataclass
class RunCounts:
    scored: int = 0
    resumed: int = 0
    no_answer: int = 0
    predictor_errors: int = 0
    judge_unparsed: int = 0
    judge_errors: int = 0
    judge_dropped: int = 0      # replies without a label left out of J (judge profile memory_r2)
    torn_lines: int = 0
    rejudged: int = 0           # a resume's items whose judging had failed, judged again


def _read_done(path: Path, counts: RunCounts, rewrite: bool = True) -> dict[str, dict]:
    done: dict[str, dict] = {}
    if not path.exists():
        return done
    good = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            done[rec["qid"]] = rec
            good.append(line)
        except (json.JSONDecodeError, KeyError, TypeError):
            counts.torn_lines += 1
    if counts.torn_lines and rewrite:   # rewrite without the torn line so the file stays valid JSONL
        path.write_text("".join(g + "\n" for g in good), encoding="utf-8")
    return done


def _unpack(out: Any) -> tuple[str | None, list[str] | None]:
    if isinstance(out, dict):
        ans = out.get("answer")
        dia = out.get("memory_dia_ids")
        return (ans if isinstance(ans, str) else None), (None if dia is None else [str(d) for d in dia])
    return (out if isinstance(out, str) else None), None


def _predict_chunk(chunk: list[Question], predictor: Predictor | None, batch_predictor: BatchPredictor | None,
                   counts: RunCounts) -> list[tuple[Any, str | None]]:
    """(raw output, error) per question; a failing batch falls back to nothing (every question errors, counted)."""
    if batch_predictor is not None:
        try:
            outs = list(batch_predictor(chunk))
            if len(outs) != len(chunk):
                raise ValueError(f"batch predictor returned {len(outs)} answers for {len(chunk)} questions")
            return [(o, None) for o in outs]
        except Exception as e:           # a system bug must not lose the run: recorded, scored 0, counted
            counts.predictor_errors += len(chunk)
            return [(None, f"{type(e).__name__}: {e}")] * len(chunk)
    res = []
    for q in chunk:
        try:
            res.append((predictor(q), None))
        except Exception as e:           # as above, per question
            counts.predictor_errors += 1
            res.append((None, f"{type(e).__name__}: {e}"))
    return res


def _score_chunk(chunk: list[Question], predictor, batch_predictor, judge, counts: RunCounts,
                 stored: dict[str, dict] | None = None) -> list[dict]:
    """Predict, judge and score one chunk of questions: its predictions.jsonl records, in order. `stored`: records
    of questions whose judging failed before (a resume): their predictions are judged again, not re-predicted."""
    stored = stored or {}
    fresh = [q for q in chunk if q.qid not in stored]
    got = iter(_predict_chunk(fresh, predictor, batch_predictor, counts) if fresh else [])
    outs = [((stored[q.qid].get("prediction") if stored[q.qid].get("memory_dia_ids") is None else
              {"answer": stored[q.qid].get("prediction"), "memory_dia_ids": stored[q.qid]["memory_dia_ids"]}), None)
            if q.qid in stored else next(got) for q in chunk]
    unpacked = [_unpack(o) for o, _ in outs]
    verdicts = judge.judge([(q.question, q.answer, a or "") for q, (a, _) in zip(chunk, unpacked)])
    recs = []
    for q, (answer, dia), (_, err), verdict in zip(chunk, unpacked, outs, verdicts):
        rec: dict[str, Any] = {"qid": q.qid, "conversation": q.conversation, "category": q.category,
                               "question": q.question, "gold": q.answer, "evidence": list(q.evidence)}
        if err is not None:
            rec["error"] = err
        counts.no_answer += answer is None
        counts.judge_unparsed += verdict.source == "none"
        counts.judge_errors += verdict.source == "error"
        counts.judge_dropped += verdict.dropped
        rec.update(prediction=answer, f1=token_f1_multiset(answer, [q.answer]),
                   f1_set=token_set_f1(answer, q.answer), b1=bleu1(answer, [q.answer]),
                   j=None if verdict.dropped or verdict.source == "error" else float(verdict.correct),
                   judge_label=verdict.label, judge_source=verdict.source, judge=judge_id(judge))
        if verdict.source == "error":  # a failure, never a score: out of J, counted, re-judged by a resume
            rec["judge_error"] = verdict.reply[:300]
        if dia is not None:
            rec["memory_dia_ids"] = dia
        recs.append(rec)
        counts.scored += 1
    return recs


def judge_id(judge) -> str:
    """The judge as its records name it: its name and, for a profiled judge, the profile."""
    jp = getattr(getattr(judge, "profile", None), "name", None)
    return getattr(judge, "name", type(judge).__name__) + (f"/{jp}" if jp else "")


def _same_judge(done: dict[str, dict], judge, out: Path) -> None:
    """A resume never files cached verdicts under another judge or judge profile."""
    now = judge_id(judge)
    other = {r.get("judge") for r in done.values() if r.get("judge") and r.get("judge") != now}
    if not other and done and any("judge" not in r for r in done.values()):   # lines written before records named
        prev = {}                                                              # their judge: results.json does
        with contextlib.suppress(OSError, ValueError):
            prev = json.loads((out / "results.json").read_text(encoding="utf-8"))
        if prev.get("judge"):
            was = prev["judge"] + (f"/{prev['judge_profile']}" if prev.get("judge_profile") else "")
            other = {was} - {now}
    if other:
        raise ValueError(f"out_dir={out}: its {len(done)} predictions were judged by {', '.join(sorted(other))}, "
                         f"this run's judge is {now}; use a new out dir (a resume keeps one judge)")


def evaluate_locomo(questions: Sequence[Question], predictor: Predictor | None, judge, out_dir: str | os.PathLike,
                    *, batch_predictor: BatchPredictor | None = None, batch_size: int = 1, title: str = "LoCoMo",
                    f1: str = "set", chart: bool = True, metrics: str = "memjax", extra: dict | None = None,
                    notes: Sequence[str] = ()) -> dict[str, Any]:
    """Predict, score and judge every question not yet in out_dir/predictions.jsonl; write the table and chart.

    Exactly one of `predictor` (one question -> output) or `batch_predictor` (list of questions -> outputs, called
    on chunks of `batch_size` so a system can batch its engine calls) is given; the judge sees each chunk at once
    and the chunk's lines are written as soon as it is judged. `extra`: more results.json keys (what was scored, how
    the answers matched); `notes`: lines under results.md's title.
    """
    if (predictor is None) == (batch_predictor is None):
        raise ValueError("evaluate_locomo: give exactly one of predictor or batch_predictor")
    if batch_size < 1:
        raise ValueError(f"evaluate_locomo.batch_size: must be >= 1, got {batch_size}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = RunCounts()
    pred_path = out / "predictions.jsonl"
    primary = jax.process_index() == 0     # several processes: each its share of the conversations, 0 writes
    done = _read_done(pred_path, counts, rewrite=primary)
    done = gather_objects([done])[0]       # every process resumes from process 0's reading of the file
    _same_judge(done, judge, out)
    retry = {k: r for k, r in done.items() if failed(r)}     # judged again (a predictor error: predicted again)
    if retry:
        done = {k: r for k, r in done.items() if k not in retry}
        if primary:  # the file keeps one line per qid: the failed lines go, their new ones are appended
            pred_path.write_text("".join(json.dumps(r) + "\n" for r in done.values()), encoding="utf-8")
    rejudge = {k: r for k, r in retry.items() if "error" not in r}
    counts.resumed, counts.rejudged = len(done), len(rejudge)
    seen = set()
    for q in questions:
        if q.category == 5:
            raise ValueError(f"evaluate_locomo: {q.qid} is category 5 (adversarial), which is never scored")
        if q.qid in seen:
            raise ValueError(f"evaluate_locomo: {q.qid} listed twice")
        seen.add(q.qid)
    keys, n = [q.conversation for q in questions], jax.process_count()
    shares = [[q for q, m in zip(questions, deal_groups(keys, p, n)) if m and q.qid not in done] for p in range(n)]
    todo = shares[jax.process_index()]
    rounds = max(-(-len(t) // batch_size) for t in shares)    # every process takes part in every exchange
    with (pred_path.open("a", encoding="utf-8") if primary else contextlib.nullcontext()) as fh:
        for s in range(0, rounds * batch_size, batch_size):
            stop_point(f"before LoCoMo round {s // batch_size + 1} of {rounds}")  # every process, every round
            chunk = todo[s: s + batch_size]
            recs = _score_chunk(chunk, predictor, batch_predictor, judge, counts, rejudge) if chunk else []
            for rec in gather_objects(recs):
                if primary:
                    fh.write(json.dumps(rec) + "\n")
                done[rec["qid"]] = rec
            if primary:
                fh.flush()
    if n > 1:   # the run's counters: every process's own, summed (resumed / torn lines: process 0's reading)
        for c in gather_objects([vars(counts)])[1:]:
            for k in ("scored", "no_answer", "predictor_errors", "judge_unparsed", "judge_errors", "judge_dropped"):
                setattr(counts, k, getattr(counts, k) + c[k])
    records = [done[q.qid] for q in questions if q.qid in done]
    table = score_table(records, f1=f1, metrics=metrics)
    jp = getattr(getattr(judge, "profile", None), "name", None)    # None: a judge without a profile (rule-based)
    fails = failures(records)
    result = {"failed": fails, "title": title, "judge": getattr(judge, "name", type(judge).__name__),
              "judge_profile": jp, "f1": f1, "metrics_profile": metrics, "table": table, "counts": vars(counts),
              "environment": describe_environment(devices=None), **(extra or {})}
    if not primary:
        return result
    write_atomic(out / "results.json", json.dumps(result, indent=1))
    judge_title = result["judge"] + (f", judge profile {jp}" if jp else "")
    md = table_markdown(table, f"{title} (judge: {judge_title}; answer metrics: {metrics})", f1, metrics, fails, notes)
    (out / "results.md").write_text(md, encoding="utf-8")
    laid_out = paper_markdown(table, metrics)   # the paper's own table layout, its published rows beside
    if laid_out:
        (out / "paper_table.md").write_text(laid_out, encoding="utf-8")
    if chart:
        table_chart(table, out / "scores.png", title)
    return result
