"""LoCoMo evaluation harness: predictions JSONL (incremental, resumable), the score table and a bar chart.

Owns: `LocomoEvalConfig`, `evaluate_locomo(questions, predictor, judge, out_dir, ...)`, `score_table`, and the CLI
`python -m memjax.evaluation.locomo DATA.json --split sumer --part validation --answers ANSWERS.jsonl --out DIR`
that scores answers produced elsewhere. Systems (SUMER, Memory-R1, Memory-R2) call `evaluate_locomo` with their own
predictor; `python -m memjax.evaluate configs/locomo_<system>.py` builds that predictor and calls it. Registered
systems (`LocomoEvalConfig.system`): "answers" (a predictions JSONL made elsewhere) and "memory_r1"
(memjax/systems/memory_r1/locomo_eval.py: memory construction with the manager model, then the answer agent; `distill`
switches memory distillation off for the ablation).

Per question the predictor returns the answer text, or a dict {"answer": str, "memory_dia_ids": [...]} (the
dia_ids of the memory bank the answer was read from, for M-Fail), or None (no answer: scored 0, counted).
A `batch_predictor` (list of questions -> outputs, called on chunks of `batch_size`) lets a system batch its engine
calls; the judge is called once per chunk. A predictor exception is recorded on the affected lines (`error`),
scored 0 and counted; the run goes on.

Files in out_dir:
- predictions.jsonl: one line per finished question (qid, conversation, category, question, gold, prediction,
  f1, f1_set, b1, j, judge label/source, memory_dia_ids?, error?), flushed as each question (chunk) finishes.
  A re-run skips the qids already there (resume); a truncated last line (crash mid-write) is dropped and counted;
- results.json / results.md: per category (papers' order: single-hop, multi-hop, open-domain, temporal) and
  overall: count, F1 (token-set by default, as SUMER and Memory-R2's code; `f1="multiset"` for SQuAD F1), B1, J
  and M-Fail where memory dia_ids were given; all in percent like the papers;
- scores.png: grouped bars of F1/B1/J per category;
- report.html (the CLI, through memjax.report): tables and every prediction per conversation, searchable.
Several processes (`python -m memjax.launch --nproc N -- memjax.evaluate ...`): the conversations are dealt over
the processes (memjax/parallel/split.py `deal_groups`: a conversation's questions, and its memory bank, stay on
one process); each predicts and judges its share in chunks, the chunks' records are gathered after each round and
process 0 alone writes predictions.jsonl, results.json / results.md and the chart. The table equals the
one-process table (records in question order); predictions.jsonl lines are in round order.
Invariants: category 5 is refused (never scored); a qid appears at most once in predictions.jsonl.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax

from ..data.locomo import CATEGORY_NAMES, Question
from ..engine.config import EngineConfig
from ..modelsource import ModelSource
from ..parallel.split import deal_groups, gather_objects
from ..rewards.locomo import RuleBasedJudge, m_fail, token_set_f1
from ..rewards.text import bleu1, token_f1_multiset
from ..rewards.judge_profiles import get_judge_profile
from .paper_tables import paper_markdown
from .profiles import get_profile

ORDER = (4, 1, 3, 2)    # single-hop, multi-hop, open-domain, temporal (SUMER / Memory-R2 table order)
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


def _pct(xs: Sequence[float | None]) -> float | None:
    """Mean in percent of the values that are not None (a J dropped by the judge profile is None)."""
    xs = [x for x in xs if x is not None]
    return None if not xs else round(100.0 * sum(xs) / len(xs), 2)


def score_table(records: Iterable[dict], *, f1: str = "set", metrics: str = "memjax") -> dict[str, dict[str, Any]]:
    """{category name | "overall": {n, F1, B1, J, M-Fail}} in percent; M-Fail None where no memory was given.

    F1/B1 come from the answer metric profile `metrics` (memjax.evaluation.profiles), recomputed from each record's
    prediction and gold; the `memjax` profile reads the stored values (`f1` picks its set or multiset F1).
    """
    if f1 not in ("set", "multiset"):
        raise ValueError(f"score_table.f1: 'set' or 'multiset', got {f1!r}")
    prof = get_profile(metrics, "answer")
    key = "f1_set" if f1 == "set" else "f1"
    if metrics != "memjax":
        records = [{**r, key: prof.f1(r["prediction"], r["gold"], r["category"]),
                    "b1": None if prof.bleu1 is None else prof.bleu1(r["prediction"], r["gold"])} for r in records]
    groups: dict[str, list[dict]] = {CATEGORY_NAMES[c]: [] for c in ORDER}
    recs = list(records)
    for r in recs:
        groups[CATEGORY_NAMES[r["category"]]].append(r)
    groups["overall"] = recs
    table = {}
    for name, rs in groups.items():
        with_mem = [r for r in rs if r.get("memory_dia_ids") is not None]
        mf = None
        if with_mem:
            ratios = [m_fail([r["evidence"]], r["memory_dia_ids"]) for r in with_mem]
            ev = [len(r["evidence"]) for r in with_mem]
            missing = sum(x * n for x, n in zip(ratios, ev) if x is not None)
            mf = None if sum(ev) == 0 else round(100.0 * missing / sum(ev), 2)
        b1 = None if prof.bleu1 is None else _pct([r["b1"] for r in rs])     # LoCoMo's own evaluation has no BLEU
        table[name] = {"n": len(rs), "F1": _pct([r[key] for r in rs]), "B1": b1,
                       "J": _pct([r["j"] for r in rs]), "M-Fail": mf}
    return table


def _markdown(table: dict, title: str, f1: str, metrics: str = "memjax", fails: dict | None = None) -> str:
    cols = list(table)
    head = "| metric | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols) + "\n"
    rows = []
    for m in ("n", "F1", "B1", "J", "M-Fail"):
        cells = ["—" if table[c][m] is None else (str(table[c][m]) if m == "n" else f"{table[c][m]:.2f}")
                 for c in cols]
        rows.append(f"| {m} | " + " | ".join(cells) + " |")
    note = (f"\nF1 is over token {'sets' if f1 == 'set' else 'multisets'} of SQuAD-normalised answers; values in %.\n"
            if metrics == "memjax" else f"\nAnswer metrics profile: `{metrics}` (memjax.evaluation.profiles); values in %.\n")
    warn = f"**{failure_line(fails)}**\n\n" if fails and fails["items"] else ""
    return f"# {title}\n\n" + warn + head + "\n".join(rows) + "\n" + note


def _chart(table: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = list(table)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.26
    for i, m in enumerate(("F1", "B1", "J")):
        vals = [table[c][m] or 0.0 for c in cols]
        ax.bar([x + (i - 1) * width for x in range(len(cols))], vals, width, label=m)
    ax.set_xticks(range(len(cols)), [f"{c}\n(n={table[c]['n']})" for c in cols])
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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


def failed(rec: dict) -> bool:
    """A record whose score is not one: the judge request failed or its reply had no label (and the profile did
    not drop it), or the predictor raised."""
    return "error" in rec or rec.get("judge_source") == "error" or (rec.get("judge_source") == "none"
                                                                     and rec.get("j") is not None)


def failures(records: Sequence[dict]) -> dict[str, int]:
    """{items, judge_errors, judge_unparsed, predictor_errors} over the table's records (a resume included)."""
    return {"items": sum(failed(r) for r in records),
            "judge_errors": sum(r.get("judge_source") == "error" for r in records),
            "judge_unparsed": sum(r.get("judge_source") == "none" and r.get("j") is not None for r in records),
            "predictor_errors": sum("error" in r for r in records), "of": len(records)}


def failure_line(fails: dict) -> str:
    return (f"WARNING: {fails['items']} of {fails['of']} items failed ({fails['judge_errors']} judge errors, "
            f"{fails['judge_unparsed']} unparsable judge replies, {fails['predictor_errors']} predictor errors): they "
            "are left out of J or scored 0 and are not results; run again into the same out dir to retry them")


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
                    f1: str = "set", chart: bool = True, metrics: str = "memjax") -> dict[str, Any]:
    """Predict, score and judge every question not yet in out_dir/predictions.jsonl; write the table and chart.

    Exactly one of `predictor` (one question -> output) or `batch_predictor` (list of questions -> outputs, called
    on chunks of `batch_size` so a system can batch its engine calls) is given; the judge sees each chunk at once
    and the chunk's lines are written as soon as it is judged.
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
              "judge_profile": jp, "f1": f1, "metrics_profile": metrics, "table": table, "counts": vars(counts)}
    if not primary:
        return result
    (out / "results.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    judge_title = result["judge"] + (f", judge profile {jp}" if jp else "")
    (out / "results.md").write_text(_markdown(table, f"{title} (judge: {judge_title}; answer metrics: {metrics})",
                                              f1, metrics, fails), encoding="utf-8")
    laid_out = paper_markdown(table, metrics)   # the paper's own table layout, its published rows beside
    if laid_out:
        (out / "paper_table.md").write_text(laid_out, encoding="utf-8")
    if chart:
        _chart(table, out / "scores.png", title)
    return result


LOCOMO_SYSTEMS = ("answers", "memory_r1")  # names LocomoEvalConfig accepts; a paper's folder registers its predictor
# (config, this process's questions) -> (batch predictor, title suffix); "memory_r1": memjax/systems/memory_r1/locomo_eval.py
LocomoPredictorFactory = Callable[["LocomoEvalConfig", list[Question]], tuple[BatchPredictor, str]]
_PREDICTORS: dict[str, LocomoPredictorFactory] = {}


def register_locomo_system(name: str, factory: LocomoPredictorFactory) -> None:
    """Called by a paper's folder on import (this module never imports a paper's folder: tests/test_layering.py)."""
    if name not in LOCOMO_SYSTEMS or name == "answers":
        raise ValueError(f"register_locomo_system: {name!r} is not a model system of LOCOMO_SYSTEMS {LOCOMO_SYSTEMS}")
    _PREDICTORS[name] = factory


def _eval_engine() -> EngineConfig:
    return EngineConfig(max_slots=32, window=6144, page_size=64, prefill_slots=4, prefill_chunk=1024, progress=False)


@dataclass(frozen=True)
class LocomoEvalConfig:
    """`python -m memjax.evaluate configs/locomo_<system>.py`: score a system on a named LoCoMo split."""

    data_path: str = ""                  # locomo10.json (CC BY-NC: the user's copy; never shipped)
    system: str = "answers"              # "answers": score a predictions JSONL made elsewhere (`answers`)
    answers: str = ""                    # JSONL of {qid, answer, memory_dia_ids?} for system="answers"
    split: str = "sumer"
    part: str = "validation"
    out_dir: str = "runs/locomo_eval"
    judge: str = "rule"                  # "rule" (tests only) | "openai"
    judge_url: str = "http://127.0.0.1:8000/v1"
    judge_model: str = "gpt-oss-120b"
    judge_profile: str = "memory_r1"     # judge prompt + parser (memjax.rewards.judge_profiles)
    f1: str = "set"                      # only for metrics="memjax": its set or multiset F1
    metrics: str = "memory_r2"           # answer metrics (memjax.evaluation.profiles)
    limit: int | None = None
    accept_failures: bool = False        # exit 0 although items failed (judge errors, predictor errors): said anyway
    batch_size: int = 64                 # questions per predictor call (a model system batches its engine calls)
    # system="memory_r1" (memjax/systems/memory_r1/locomo_eval.py): answer agent `model`, manager `manager_hf_path`
    # ("" = the same model), construction then greedy answering on `engine`
    model: ModelSource = field(default_factory=ModelSource)
    manager_hf_path: str = ""
    engine: EngineConfig = field(default_factory=_eval_engine)
    distill: bool = True                 # False: the no-memory-distillation ablation prompt
    embedder: str = "wordllama"          # "wordllama" | "hashbow"
    max_prompt_tokens: int = 4096
    max_response_tokens: int = 2048
    max_extract_tokens: int = 512

    def __post_init__(self):
        if self.system not in LOCOMO_SYSTEMS:
            raise ValueError(f"LocomoEvalConfig.system: one of {LOCOMO_SYSTEMS}, got {self.system!r}")
        if self.judge not in ("rule", "openai"):
            raise ValueError(f"LocomoEvalConfig.judge: 'rule' or 'openai', got {self.judge!r}")
        if self.f1 not in ("set", "multiset"):
            raise ValueError(f"LocomoEvalConfig.f1: 'set' or 'multiset', got {self.f1!r}")
        try:
            get_profile(self.metrics, "answer")
            get_judge_profile(self.judge_profile)
        except ValueError as e:
            raise ValueError(f"LocomoEvalConfig.{e}") from None
        if self.limit is not None and self.limit <= 0:
            raise ValueError(f"LocomoEvalConfig.limit: must be positive, got {self.limit}")
        if not self.out_dir:
            raise ValueError("LocomoEvalConfig.out_dir must not be empty")
        if self.batch_size < 1:
            raise ValueError(f"LocomoEvalConfig.batch_size: must be >= 1, got {self.batch_size}")
        if self.embedder not in ("wordllama", "hashbow"):
            raise ValueError(f"LocomoEvalConfig.embedder: 'wordllama' or 'hashbow', got {self.embedder!r}")
        for f in ("max_prompt_tokens", "max_response_tokens", "max_extract_tokens"):
            if getattr(self, f) <= 0:
                raise ValueError(f"LocomoEvalConfig.{f}: must be positive, got {getattr(self, f)}")


def run_locomo_eval(cfg: LocomoEvalConfig) -> dict:
    """Everything `python -m memjax.evaluate` does for a LocomoEvalConfig: check the inputs, then score the
    configured system's predictions on the split part (incremental, resumable; see evaluate_locomo)."""
    questions = locomo_inputs(cfg)
    title = f"LoCoMo {cfg.split}/{cfg.part} ({cfg.system})"
    if cfg.system != "answers":
        if cfg.system not in _PREDICTORS:
            raise ValueError(f"LoCoMo system {cfg.system!r}: no predictor registered (importing memjax.systems registers "
                             "every paper's; python -m memjax.evaluate does)")
        judge = make_judge(cfg)
        predictor, note = _PREDICTORS[cfg.system](cfg, _mine(questions))
        return evaluate_locomo(questions, None, judge, cfg.out_dir, batch_size=cfg.batch_size, f1=cfg.f1,
                               metrics=cfg.metrics, batch_predictor=predictor, title=title + note)
    return evaluate_locomo(questions, answers_predictor(cfg.answers), make_judge(cfg), cfg.out_dir, title=title,
                           f1=cfg.f1, metrics=cfg.metrics)


def _mine(questions: list[Question]) -> list[Question]:
    """The questions of the conversations this process answers (evaluate_locomo deals them the same way)."""
    return [q for q, m in zip(questions, deal_groups([q.conversation for q in questions])) if m]


def make_judge(cfg: LocomoEvalConfig):
    if cfg.judge == "rule":
        return RuleBasedJudge()
    from ..rewards.locomo import OpenAIJudge

    return OpenAIJudge(cfg.judge_url, cfg.judge_model, api_key=os.environ.get("OPENAI_API_KEY"),
                       profile=cfg.judge_profile)


def split_part(cfg: LocomoEvalConfig) -> list[Question]:
    from ..data.locomo import load_locomo
    from ..data.locomo_splits import split_questions

    parts = split_questions(load_locomo(cfg.data_path), cfg.split)
    if cfg.part not in parts:
        raise KeyError(f"split {cfg.split} has no part {cfg.part!r}; parts: {', '.join(parts)}")
    if not parts[cfg.part]:
        raise ValueError(f"data_path={cfg.data_path}: split {cfg.split}/{cfg.part} has no questions in this file "
                         f"(parts: {', '.join(f'{k} {len(v)}' for k, v in parts.items())}); choose another split or "
                         "part (--set split=... / --set part=...)")
    return parts[cfg.part][: cfg.limit]


def locomo_inputs(cfg: LocomoEvalConfig) -> list[Question]:
    """The inputs a run needs, checked before anything is written: the data file, the answers file, the split's
    questions (an empty split is an error)."""
    if not cfg.data_path or not Path(cfg.data_path).is_file():
        raise FileNotFoundError(f"data_path={cfg.data_path!r}: LoCoMo file not found (--set data_path=.../locomo10.json)")
    if cfg.system == "answers" and (not cfg.answers or not Path(cfg.answers).is_file()):
        raise FileNotFoundError(f"answers={cfg.answers!r}: predictions JSONL not found (--set answers=...)")
    if cfg.system == "answers":
        answers_predictor(cfg.answers)
    return split_part(cfg)


def answers_predictor(path: str | os.PathLike) -> Predictor:
    """A predictor reading {"qid", "answer", "memory_dia_ids"?} lines produced elsewhere (missing qid -> None)."""
    table: dict[str, dict] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            table[str(rec["qid"])] = rec
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"{path}:{n}: not a JSON object with 'qid'") from None
    return lambda q: table.get(q.qid)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m memjax.evaluation.locomo", description=__doc__.splitlines()[0])
    ap.add_argument("data_path")
    ap.add_argument("--split", default="sumer")
    ap.add_argument("--part", default="validation")
    ap.add_argument("--answers", required=True, help="JSONL of {qid, answer, memory_dia_ids?}")
    ap.add_argument("--out", default="runs/locomo_eval")
    ap.add_argument("--judge", default="rule", choices=("rule", "openai"))
    ap.add_argument("--judge-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--judge-model", default="gpt-oss-120b")
    ap.add_argument("--f1", default="set", choices=("set", "multiset"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--accept-failures", action="store_true", help="exit 0 although some items failed (judge "
                    "unreachable, unparsable reply, predictor error); they are still counted at the top of every output")
    ap.add_argument("--check", action="store_true", help="validate the arguments, read the data and the answers, "
                    "resolve the split, print what would be scored and exit 0 (no judge called, nothing written)")
    a = ap.parse_args(argv)
    try:
        cfg = LocomoEvalConfig(data_path=a.data_path, answers=a.answers, split=a.split, part=a.part, out_dir=a.out,
                               judge=a.judge, judge_url=a.judge_url, judge_model=a.judge_model, f1=a.f1, limit=a.limit,
                               accept_failures=a.accept_failures)
        if a.check:
            for what, path in (("data_path", cfg.data_path), ("answers", cfg.answers)):
                if not Path(path).is_file():
                    raise FileNotFoundError(f"{what}={path!r}: file not found")
            predict, questions = answers_predictor(cfg.answers), locomo_inputs(cfg)
            from ..runio import out_dir_writable

            out_dir_writable(cfg.out_dir, "--out")
            answered = sum(predict(q) is not None for q in questions)
            judge = f"{cfg.judge} ({cfg.judge_model} at {cfg.judge_url})" if cfg.judge == "openai" else cfg.judge
            print(f"LoCoMo {cfg.split}/{cfg.part}: {len(questions)} questions, {answered} answered in {cfg.answers}; "
                  f"judge {judge}")
            print(f"out_dir: {cfg.out_dir}\ncheck: ok (nothing loaded or written)")
            return 0
        res = run_locomo_eval(cfg)
    except (ValueError, KeyError, OSError) as e:
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    from ..report import write_report

    if res["failed"]["items"]:  # the first line a user sees
        print(failure_line(res["failed"]), file=sys.stderr, flush=True)
    print(json.dumps({"failed": res["failed"], "out_dir": cfg.out_dir, "overall": res["table"]["overall"],
                      "counts": res["counts"], "report": str(write_report(cfg.out_dir))}))
    return failure_exit(res, cfg)


def failure_exit(res: dict, cfg: LocomoEvalConfig) -> int:
    """The exit status: 1 if any item failed (said on stderr), unless the user accepts them."""
    import sys

    if not res["failed"]["items"]:
        return 0
    if cfg.accept_failures:
        print("accepted (accept_failures): exit 0", file=sys.stderr)
        return 0
    print("exit 1: pass --accept-failures (memjax.evaluate: --set accept_failures=true) to accept them",
          file=sys.stderr)
    return 1


if __name__ == "__main__":  # the importable module's main: LocomoEvalConfig is the class configs import
    from memjax.evaluation.locomo import main as _main

    raise SystemExit(_main())
