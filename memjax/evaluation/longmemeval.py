"""LongMemEval evaluation harness: `LongMemEvalConfig` (what `python -m memjax.evaluate configs/<paper>/longmemeval.py`
runs), the system registry, and `evaluate_longmemeval` (predictions JSONL written as they finish, resumable; the
official judge; per-type table, chart, results files).

Owns: `LongMemEvalConfig`, `register_longmemeval_system`, `evaluate_longmemeval`, `run_longmemeval_eval`,
`hypotheses_predictor` (the official hypothesis file: JSONL of {question_id, hypothesis}).
Systems: "answers" (a hypothesis file made elsewhere) and those a paper's folder registers on import
(memjax/systems/<paper>/longmemeval_eval.py; the tiny trained policies, memjax/systems/<paper>/tiny/longmemeval_tiny.py,
whose `policy` is "" the shipped warm start, "random", or a tiny training run's out_dir/hf). A factory takes
(config, questions) and returns (batch predictor, title note); the predictor maps a list of `LmeQuestion` to one
dict per question, {"answer": str | None, "retrieved": [dia_id, ...]?}.
Invariants: a question is scored once its judge call gives a label; a re-run asks again only for the lines without
one; a predictor exception is recorded and counted, never raised; one process (no multi-process split). Files and
resume rules: docs/evaluation.md, LongMemEval, 'Files'.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoint.source import ModelSource
from ..core.compile_cache import check_compile_cache
from ..core.environment import describe as describe_environment
from ..core.outdir import write_atomic
from ..data.longmemeval import QUESTION_TYPES, LmeQuestion, load_longmemeval
from ..data.longmemeval_locomo import dia_id
from ..engine import EngineConfig
from .longmemeval_judge import (
    EngineLmeJudge,
    ExactLmeJudge,
    OpenAILmeJudge,
    RuleLmeJudge,
)
from .longmemeval_scores import chart, markdown, qa_table, retrieval_metrics

TINY_LME_SYSTEMS = ("memagent_tiny", "sumer_tiny", "memory_r1_tiny", "memory_r2_tiny")
LME_SYSTEMS = ("answers", "memory_r1", "memory_r2", "sumer", "memagent", *TINY_LME_SYSTEMS)
JUDGES = ("rule", "exact", "openai", "engine")
LmeBatchPredictor = Callable[[list[LmeQuestion]], list[dict[str, Any]]]
LmePredictorFactory = Callable[["LongMemEvalConfig", list[LmeQuestion]], tuple[LmeBatchPredictor, str]]
_PREDICTORS: dict[str, LmePredictorFactory] = {}


def register_longmemeval_system(name: str, factory: LmePredictorFactory) -> None:
    """Called by a paper's folder on import (this module never imports a paper's folder: tests/unit/test_layering.py)."""
    if name not in LME_SYSTEMS or name == "answers":
        raise ValueError(f"register_longmemeval_system: {name!r} is not a model system of {LME_SYSTEMS}")
    _PREDICTORS[name] = factory


def _engine() -> EngineConfig:
    return EngineConfig(max_slots=32, window=6144, page_size=64, prefill_slots=4, prefill_chunk=1024, progress=False)


@dataclass(frozen=True)
class LongMemEvalConfig:
    """`python -m memjax.evaluate configs/<paper>/longmemeval.py`: a system on a LongMemEval file, judged officially."""

    data_path: str = ""                  # longmemeval_s.json / _m / _oracle (the user's copy; never fetched)
    system: str = "answers"
    answers: str = ""                    # system="answers": JSONL of {question_id, hypothesis} (the official format)
    out_dir: str = "out/longmemeval"
    question_types: tuple[str, ...] = ()  # () = all
    limit: int | None = None             # first N questions (after the type filter)
    batch_size: int = 16                 # questions per predictor call
    question_date: bool = True           # the question text ends with its date (memjax.data.longmemeval_locomo)
    recall_k: tuple[int, ...] = (5, 10)
    judge: str = "openai"                # the official LLM judge (judge_url, judge_model) | "engine" (judge_hf_path on
    #                                      a memjax Engine) | "rule" / "exact": NOT LLM judges (tests, tiny vocabulary),
    #                                      their numbers are titled as such, never LongMemEval accuracy
    judge_url: str = "http://127.0.0.1:8000/v1"
    judge_model: str = "gpt-4o-2024-08-06"   # the official metric model (print_qa_metrics.py asserts it)
    judge_hf_path: str = ""
    judge_retries: int = 4
    rescore: bool = False                # out_dir holds scores of other inputs: score everything again (else refused)
    accept_failures: bool = False        # exit 0 although judge calls failed (those questions stay unscored, said)
    max_missing: float = 0.25            # system="answers": the largest fraction of questions without a hypothesis
    judge_timeout_s: float = 60.0
    # model systems: the policy `model` on `engine`; memory_r1's manager `manager_hf_path` ("" = the same model);
    # memory_r2's frozen answer agent `answer_hf_path` ("" = a copy of the policy's weights)
    model: ModelSource = field(default_factory=ModelSource)
    manager_hf_path: str = ""
    answer_hf_path: str = ""
    engine: EngineConfig = field(default_factory=_engine)
    # tiny systems (TINY_LME_SYSTEMS): "" = the shipped warm start, "random" = its shape with random weights (a
    # control), else an HF directory (a tiny training run's out_dir/hf); memory_r1_tiny: policy = the manager,
    # answer_policy = the answer agent
    policy: str = ""
    answer_policy: str = ""
    embedder: str = "wordllama"          # "wordllama" | "hashbow" (memory_r1 / memory_r2 / sumer retrieval)
    max_prompt_tokens: int = 4096
    max_response_tokens: int = 2048
    max_extract_tokens: int = 512
    max_turns: int = 10                  # sumer: tool rounds per question
    chunk_tokens: int = 5000             # memagent: tokens of haystack per memory update
    memory_tokens: int = 1024            # memagent: memory budget
    # persistent XLA compilation cache (memjax/core/compile_cache.py), as TrainConfig's: "auto" = JAX_COMPILATION_CACHE_DIR
    # if set, else on GPUs ~/.cache/memjax/xla (shared with training runs), none on CPU; "none"; a folder
    compile_cache: str = "auto"

    def __post_init__(self):
        check_compile_cache("LongMemEvalConfig", self.compile_cache)
        if self.system not in LME_SYSTEMS:
            raise ValueError(f"LongMemEvalConfig.system: one of {LME_SYSTEMS}, got {self.system!r}")
        if self.judge not in JUDGES:
            raise ValueError(f"LongMemEvalConfig.judge: one of {', '.join(JUDGES)}, got {self.judge!r}")
        tiny = self.system in TINY_LME_SYSTEMS
        for f in ("policy", "answer_policy"):
            if getattr(self, f) and not tiny:
                raise ValueError(f"LongMemEvalConfig.{f}: only the tiny systems ({', '.join(TINY_LME_SYSTEMS)}) "
                                 f"read it; system {self.system!r} takes model.hf_path")
        if self.answer_policy and self.system != "memory_r1_tiny":
            raise ValueError("LongMemEvalConfig.answer_policy: only memory_r1_tiny has an answer agent of its own")
        if tiny and self.model.hf_path:
            raise ValueError(f"LongMemEvalConfig.model.hf_path: system {self.system!r} runs its tiny task's model; "
                             "name its policy with policy=DIR (a tiny training run's out_dir/hf)")
        bad = [t for t in self.question_types if t not in QUESTION_TYPES]
        if bad:
            raise ValueError(f"LongMemEvalConfig.question_types: {bad[0]!r} is not one of {', '.join(QUESTION_TYPES)}")
        if self.limit is not None and self.limit <= 0:
            raise ValueError(f"LongMemEvalConfig.limit: must be positive, got {self.limit}")
        if not self.out_dir:
            raise ValueError("LongMemEvalConfig.out_dir must not be empty")
        if self.embedder not in ("wordllama", "hashbow"):
            raise ValueError(f"LongMemEvalConfig.embedder: 'wordllama' or 'hashbow', got {self.embedder!r}")
        if not self.recall_k or any(k < 1 for k in self.recall_k):
            raise ValueError(f"LongMemEvalConfig.recall_k: positive integers, got {self.recall_k}")
        for f in ("batch_size", "max_prompt_tokens", "max_response_tokens", "max_extract_tokens", "max_turns",
                  "chunk_tokens", "memory_tokens"):
            if getattr(self, f) < 1:
                raise ValueError(f"LongMemEvalConfig.{f}: must be >= 1, got {getattr(self, f)}")
        if not 0.0 <= self.max_missing <= 1.0:
            raise ValueError(f"LongMemEvalConfig.max_missing: a fraction in [0, 1], got {self.max_missing}")
        if self.judge_retries < 0 or not self.judge_timeout_s > 0:
            raise ValueError("LongMemEvalConfig: judge_retries must be >= 0 and judge_timeout_s > 0")
        if self.judge == "engine" and not self.judge_hf_path:
            raise ValueError("LongMemEvalConfig.judge_hf_path: judge=engine needs a Hugging Face model directory")


def select(cfg: LongMemEvalConfig) -> list[LmeQuestion]:
    qs = [q for q in load_longmemeval(cfg.data_path).questions
          if not cfg.question_types or q.question_type in cfg.question_types]
    return qs[: cfg.limit]


def hypotheses_predictor(path: str | os.PathLike) -> LmeBatchPredictor:
    """The official hypothesis file (JSONL of {question_id, hypothesis}); a question without a line -> None."""
    from .provenance import read_answers

    recs, _ = read_answers(path, "question_id", "hypothesis")
    if any("hypothesis" not in r for r in recs.values()):
        raise ValueError(f"{path}: a line without 'hypothesis' (the official format: {{question_id, hypothesis}})")
    table = {k: str(r["hypothesis"]) for k, r in recs.items()}
    return lambda qs: [{"answer": table.get(q.question_id)} for q in qs]


def answers_match(cfg: "LongMemEvalConfig", questions: list[LmeQuestion]) -> dict:
    """How the hypothesis file matches the selected questions (refused beyond max_missing)."""
    from .provenance import match_answers, read_answers

    table, info = read_answers(cfg.answers, "question_id", "hypothesis")
    every = [q.question_id for q in load_longmemeval(cfg.data_path).questions]
    return match_answers(cfg.answers, table, info, [q.question_id for q in questions], every, cfg.max_missing)


# judges whose numbers are not LongMemEval accuracy: their titles and console lines say so
NOT_ACCURACY = {"rule": "RULE JUDGE (not an LLM, tests only; not LongMemEval accuracy)",
                "exact": "EXACT-MATCH JUDGE (tiny vocabulary, not an LLM; not LongMemEval accuracy)"}


def result_line(cfg: "LongMemEvalConfig", res: dict) -> str:
    """The console's line on a finished run: accuracy only under an LLM judge."""
    acc = res["table"]["overall"]["accuracy"]
    what = f"{NOT_ACCURACY[cfg.judge]}: overall" if cfg.judge in NOT_ACCURACY else "LongMemEval accuracy: overall"
    return f"{what} {'none (no question judged)' if acc is None else f'{acc}%'} -> {cfg.out_dir}"


def failure(cfg: "LongMemEvalConfig", res: dict) -> str | None:
    """Why a finished run is not a result (exit 1): questions whose judge call failed (unless accepted), or every
    question unreadable by the policy's vocabulary; None when it is one."""
    c, unscored = res["counts"], res["table"]["overall"]["unscored"]
    if c.get("unreadable") and c["unreadable"] == res["table"]["overall"]["n"] + unscored:
        return (f"all {c['unreadable']} questions were unreadable by the policy's vocabulary (see 'unreadable' in "
                f"{cfg.out_dir}/predictions.jsonl): nothing was scored; use data in the policy's vocabulary")
    if unscored and not cfg.accept_failures:
        where = f" at {cfg.judge_url}" if cfg.judge == "openai" else ""
        return (f"{unscored} of {unscored + res['table']['overall']['n']} questions were not judged (judge "
                f"{judge_name(cfg)}{where}: {res.get('first_judge_error') or 'no reply'}); they are unscored, never a "
                "score: start the judge and run again (it asks only them), or --set accept_failures=true")
    return None


STORED = ("predictions.jsonl", "results.json", "results.md", "scores.png")


def judge_name(cfg: "LongMemEvalConfig") -> str:
    return {"rule": "rule", "exact": "exact", "openai": f"openai:{cfg.judge_model}",
            "engine": f"engine:{cfg.judge_hf_path}"}[cfg.judge]


def scored(cfg: "LongMemEvalConfig") -> dict:
    """What a run of cfg scores (memjax/evaluation/provenance.py)."""
    from .provenance import scored_inputs

    tiny = cfg.system in TINY_LME_SYSTEMS
    policy = {"policy": cfg.policy or "(shipped warm start)"} if tiny else {}
    policy.update({k: v for k, v in (("answer_policy", cfg.answer_policy), ("model.hf_path", cfg.model.hf_path),
                                      ("manager_hf_path", cfg.manager_hf_path), ("answer_hf_path", cfg.answer_hf_path),
                                      ("judge_hf_path", cfg.judge_hf_path)) if v})
    return scored_inputs(policy=policy, answers=cfg.answers if cfg.system == "answers" else "", data=cfg.data_path,
                         judge=judge_name(cfg), metrics="longmemeval-qa")


def make_judge(cfg: LongMemEvalConfig):
    if cfg.judge == "rule":
        return RuleLmeJudge()
    if cfg.judge == "exact":
        return ExactLmeJudge()
    if cfg.judge == "openai":
        return OpenAILmeJudge(cfg.judge_url, cfg.judge_model, api_key=os.environ.get("OPENAI_API_KEY"),
                              retries=cfg.judge_retries, timeout_s=cfg.judge_timeout_s)
    from ..engine import Engine

    model, tok = ModelSource(hf_path=cfg.judge_hf_path, dtype=cfg.model.dtype).load()
    return EngineLmeJudge(Engine(model, cfg.engine), tok, name=Path(cfg.judge_hf_path).name)


def _gold_sessions(q: LmeQuestion) -> list[str]:
    pos = {s.session_id: k for k, s in enumerate(q.sessions)}
    return [f"D{pos[s] + 1}" for s in q.answer_session_ids if s in pos]


def _read_done(path: Path, counts: dict) -> dict[str, dict]:
    """The last line per question; a torn last line (crash mid-write) is dropped from the file and counted."""
    if not path.is_file():
        return {}
    lines = path.read_text(encoding="utf-8").splitlines()
    done: dict[str, dict] = {}
    good = []
    for i, line in enumerate(lines):
        try:
            rec = json.loads(line)
            done[rec["question_id"]] = rec
            good.append(line)
        except (json.JSONDecodeError, KeyError, TypeError):
            if i != len(lines) - 1:
                raise ValueError(f"{path}:{i + 1}: not a predictions line (a corrupt file; move it away to start "
                                 "again)") from None
            counts["torn_lines"] += 1
    if counts["torn_lines"]:
        write_atomic(path, "".join(x + "\n" for x in good))
    return done


def _predict(chunk: list[LmeQuestion], predictor: LmeBatchPredictor, counts: dict) -> list[tuple[dict, str | None]]:
    try:
        outs = predictor(chunk)
        if len(outs) != len(chunk):
            raise RuntimeError(f"predictor returned {len(outs)} outputs for {len(chunk)} questions")
        return [(o if isinstance(o, dict) else {"answer": o}, None) for o in outs]
    except Exception as e:  # noqa: BLE001 -- one failed chunk is recorded and counted, the run goes on
        counts["predictor_errors"] += len(chunk)
        return [({"answer": None}, f"{type(e).__name__}: {e}") for _ in chunk]


def _judge(judge, recs: list[dict], counts: dict) -> None:
    verdicts = judge.judge([(r["question_type"], r["question"], r["gold"], r["hypothesis"] or "", r["abstention"])
                            for r in recs])
    for r, v in zip(recs, verdicts):
        r["label"], r["judge_reply"] = v.label, v.reply
        r.pop("judge_error", None)
        if v.label is None:
            r["judge_error"] = v.error
            counts["judge_failures"] += 1


def evaluate_longmemeval(questions: Sequence[LmeQuestion], predictor: LmeBatchPredictor, judge,
                         out_dir: str | os.PathLike, *, batch_size: int = 16, title: str = "LongMemEval",
                         recall_k: Sequence[int] = (5, 10), chart_png: bool = True, progress=None,
                         extra: dict | None = None, notes: Sequence[str] = ()) -> dict[str, Any]:
    """Predict and judge every question not yet judged in out_dir/predictions.jsonl; write the table and chart.
    `extra`: more results.json keys; `notes`: lines under results.md's title."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    counts = {"questions": len(questions), "resumed": 0, "predicted": 0, "rejudged": 0, "no_answer": 0,
              "predictor_errors": 0, "judge_failures": 0, "torn_lines": 0}
    ids = [q.question_id for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError("evaluate_longmemeval: a question_id is listed twice")
    path = out / "predictions.jsonl"
    done = _read_done(path, counts)
    counts["resumed"] = sum(1 for i in ids if i in done and done[i].get("label") is not None)
    rejudge = [done[i] for i in ids if i in done and done[i].get("label") is None]
    todo = [q for q in questions if q.question_id not in done]
    t0 = time.perf_counter()
    with path.open("a", encoding="utf-8") as fh:
        def write(recs):
            for r in recs:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
                done[r["question_id"]] = r
            fh.flush()
            os.fsync(fh.fileno())

        for s in range(0, len(rejudge), batch_size):
            chunk = [dict(r) for r in rejudge[s: s + batch_size]]
            _judge(judge, chunk, counts)
            counts["rejudged"] += len(chunk)
            write(chunk)
        for s in range(0, len(todo), batch_size):
            from ..parallel.lifecycle import stop_point

            stop_point(f"before LongMemEval questions {s + 1}-{min(len(todo), s + batch_size)} of {len(todo)}")
            chunk = todo[s: s + batch_size]
            recs = []
            for q, (o, err) in zip(chunk, _predict(chunk, predictor, counts)):
                answer = o.get("answer")
                rec: dict[str, Any] = {"question_id": q.question_id, "conversation": q.question_id,
                                       "question_type": q.question_type, "abstention": q.abstention,
                                       "question": q.question, "question_date": q.question_date, "gold": q.answer,
                                       "hypothesis": None if answer is None else str(answer)}
                counts["no_answer"] += answer is None
                if err is not None:
                    rec["error"] = err
                for k in ("truncated", "boxed", "unreadable"):   # what a system says about how its answer came about
                    if k in o:
                        rec[k] = o[k]
                if o.get("retrieved") is not None:
                    rec["retrieved"] = list(o["retrieved"])
                    if not q.abstention:   # the official retrieval metrics leave abstention questions out
                        turns = [dia_id(si, ti) for si, ti in q.answer_turns()]
                        rec["recall"] = retrieval_metrics(rec["retrieved"], turns, _gold_sessions(q), recall_k)
                recs.append(rec)
            _judge(judge, recs, counts)
            counts["predicted"] += len(recs)
            write(recs)
            n = sum(1 for i in ids if i in done)
            log(f"LongMemEval: {n}/{len(ids)} questions ({time.perf_counter() - t0:.1f}s)")
    records = [done[i] for i in ids if i in done]
    counts["unreadable"] = sum(1 for r in records if r.get("unreadable"))
    table = qa_table(records)
    errs = [r["judge_error"] for r in records if r.get("label") is None and r.get("judge_error")]
    result = {"title": title, "judge": getattr(judge, "name", type(judge).__name__), "benchmark": "longmemeval",
              "table": table, "counts": counts, **({"first_judge_error": str(errs[0])[:200]} if errs else {}),
              "environment": describe_environment(devices=None), **(extra or {})}
    write_atomic(out / "results.json", json.dumps(result, indent=1))
    md = markdown(table, f"{title} (judge: {result['judge']})")
    if notes:
        head, _, rest = md.partition("\n\n")
        md = head + "\n\n" + "".join(f"{n}\n\n" for n in notes) + rest
    write_atomic(out / "results.md", md)
    if chart_png:
        chart(table, out / "scores.png", title)
    return result


def _check_inputs(cfg: LongMemEvalConfig) -> list[LmeQuestion]:
    if not cfg.data_path or not Path(cfg.data_path).is_file():
        raise FileNotFoundError(f"data_path={cfg.data_path!r}: LongMemEval file not found "
                                "(--set data_path=.../longmemeval_s.json)")
    if cfg.system == "answers" and (not cfg.answers or not Path(cfg.answers).is_file()):
        raise FileNotFoundError(f"answers={cfg.answers!r}: hypothesis JSONL not found (--set answers=...)")
    for f in ("policy", "answer_policy"):
        p = getattr(cfg, f)
        if p not in ("", "random") and not (Path(p) / "config.json").is_file():
            raise FileNotFoundError(f"{f}={p}: not a Hugging Face model directory (no config.json); a tiny training "
                                    "run writes one as out_dir/hf")
    qs = select(cfg)
    if cfg.system == "answers":
        answers_match(cfg, qs)
    return qs


def check_lines(cfg: LongMemEvalConfig) -> list[str]:
    """`--check`: read the data, select the questions, say what would run (nothing loaded or written)."""
    qs = _check_inputs(cfg)
    judge = {"rule": "rule (not an LLM: tests only)", "exact": "exact match (tiny vocabulary; not an LLM)",
             "openai": f"{cfg.judge_model} at {cfg.judge_url}",
             "engine": f"engine {cfg.judge_hf_path}"}[cfg.judge]
    return [f"python -m memjax.evaluate: LongMemEval, system {cfg.system!r}, {len(qs)} questions "
            f"({sum(q.abstention for q in qs)} abstention), judge {judge}", f"data_path: {cfg.data_path}",
            *([f"answers: {cfg.answers}"] if cfg.system == "answers" else []),
            *([f"policy: {cfg.policy or 'the shipped warm start'}"] if cfg.system in TINY_LME_SYSTEMS else []),
            *([f"answer_policy: {cfg.answer_policy or 'the shipped warm start'}"]
              if cfg.system == "memory_r1_tiny" else []), f"out_dir: {cfg.out_dir}"]


def run_longmemeval_eval(cfg: LongMemEvalConfig) -> dict:
    """Everything `python -m memjax.evaluate` does for a LongMemEvalConfig (one process)."""
    import jax

    if jax.process_count() > 1:
        raise ValueError("LongMemEval evaluation runs in one process; start it without memjax.launch --nproc")
    from .provenance import claim_scores, match_line

    questions = _check_inputs(cfg)
    title = f"LongMemEval {Path(cfg.data_path).name} ({cfg.system})"
    if cfg.judge in NOT_ACCURACY:
        title = f"{NOT_ACCURACY[cfg.judge]}: {title}"
    extra: dict[str, Any] = {"inputs": scored(cfg)}
    notes: list[str] = []
    if cfg.system == "answers":
        extra["answers_match"] = m = answers_match(cfg, questions)
        notes.append(match_line(m))
        print(notes[-1], file=sys.stderr, flush=True)
    from ..core.outdir import claim_kind

    claim_kind(cfg.out_dir, "longmemeval", "LongMemEval scoring")
    claim_scores(cfg.out_dir, extra["inputs"], rescore=cfg.rescore, stored=STORED)
    claim_kind(cfg.out_dir, "longmemeval", "LongMemEval scoring", mark=True)
    if cfg.system == "answers":
        predictor, note = hypotheses_predictor(cfg.answers), ""
    else:
        if cfg.system not in _PREDICTORS:
            raise ValueError(f"LongMemEval system {cfg.system!r}: no predictor registered (importing memjax.systems "
                             "registers every paper's; python -m memjax.evaluate does)")
        predictor, note = _PREDICTORS[cfg.system](cfg, questions)
    return evaluate_longmemeval(questions, predictor, make_judge(cfg), cfg.out_dir, batch_size=cfg.batch_size,
                                title=title + note, recall_k=cfg.recall_k, extra=extra, notes=notes)
