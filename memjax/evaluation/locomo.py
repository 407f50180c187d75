"""LoCoMo evaluation harness: config, command line and system registry of the LoCoMo evaluation.

Owns: `LocomoEvalConfig` (a named split part, the system whose answers are scored, the judge and the metric
profiles), `run_locomo_eval(cfg)` (what `python -m memjax.evaluate` runs for it), the registry of model systems
(`LOCOMO_SYSTEMS`, `register_locomo_system`: "answers", a predictions JSONL made elsewhere, and "memory_r1",
registered by memjax/systems/memory_r1/locomo_eval.py), the inputs' checks (`locomo_inputs`, `split_part`,
`answers_predictor`, `make_judge`), and the CLI `python -m memjax.evaluation.locomo` that scores answers produced
elsewhere (`--check`: inputs checked, nothing written; exit status `failure_exit`: 1 when items failed unless
accepted; it also writes report.html). Commands: docs/evaluation.md, 'LoCoMo'.
The run itself is memjax/evaluation/locomo_harness.py's `evaluate_locomo`; the table
memjax/evaluation/locomo_table.py's `score_table`.
Invariants: a config is checked whole when made (one ValueError line naming the field); the inputs are checked
before anything is written; this module never imports a paper's folder (a paper registers its predictor).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..checkpoint.source import ModelSource
from ..core.compile_cache import check_compile_cache
from ..data.locomo import Question
from ..engine.config import EngineConfig
from ..parallel.split import deal_groups
from ..rewards.judge_profiles import get_judge_profile
from ..rewards.locomo import RuleBasedJudge
from .locomo_harness import BatchPredictor, Predictor, evaluate_locomo
from .locomo_table import failure_line
from .profiles import get_profile

LOCOMO_SYSTEMS = ("answers", "memory_r1")  # names LocomoEvalConfig accepts; a paper's folder registers its predictor
# (config, this process's questions) -> (batch predictor, title suffix); "memory_r1": memjax/systems/memory_r1/locomo_eval.py
LocomoPredictorFactory = Callable[["LocomoEvalConfig", list[Question]], tuple[BatchPredictor, str]]
_PREDICTORS: dict[str, LocomoPredictorFactory] = {}


def register_locomo_system(name: str, factory: LocomoPredictorFactory) -> None:
    """Called by a paper's folder on import (this module never imports a paper's folder: tests/unit/test_layering.py)."""
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
    rescore: bool = False                # out_dir holds scores of other inputs: score everything again (else refused)
    max_missing: float = 0.25            # system="answers": the largest fraction of questions without an answer line
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
    # persistent XLA compilation cache (memjax/core/compile_cache.py), as TrainConfig's: "auto" = JAX_COMPILATION_CACHE_DIR
    # if set, else on GPUs ~/.cache/memjax/xla (shared with training runs), none on CPU; "none"; a folder
    compile_cache: str = "auto"

    def __post_init__(self):
        check_compile_cache("LocomoEvalConfig", self.compile_cache)
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
        if not 0.0 <= self.max_missing <= 1.0:
            raise ValueError(f"LocomoEvalConfig.max_missing: a fraction in [0, 1], got {self.max_missing}")
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
    extra, notes = _claim(cfg, questions)
    if cfg.system != "answers":
        if cfg.system not in _PREDICTORS:
            raise ValueError(f"LoCoMo system {cfg.system!r}: no predictor registered (importing memjax.systems registers "
                             "every paper's; python -m memjax.evaluate does)")
        judge = make_judge(cfg)
        predictor, note = _PREDICTORS[cfg.system](cfg, _mine(questions))
        return evaluate_locomo(questions, None, judge, cfg.out_dir, batch_size=cfg.batch_size, f1=cfg.f1,
                               metrics=cfg.metrics, batch_predictor=predictor, title=title + note, extra=extra,
                               notes=notes)
    return evaluate_locomo(questions, answers_predictor(cfg.answers), make_judge(cfg), cfg.out_dir, title=title,
                           f1=cfg.f1, metrics=cfg.metrics, extra=extra, notes=notes)


STORED = ("predictions.jsonl", "results.json", "results.md", "paper_table.md", "scores.png")


def judge_name(cfg: LocomoEvalConfig) -> str:
    return "rule" if cfg.judge == "rule" else f"openai:{cfg.judge_model}/{cfg.judge_profile}"


def _claim(cfg: LocomoEvalConfig, questions: list[Question]) -> tuple[dict, list[str]]:
    """What this run scores, checked against out_dir's stored scores (memjax/evaluation/provenance.py), and how
    the answers matched the questions: (results.json keys, results.md lines)."""
    import jax

    from .provenance import claim_scores, match_line, scored_inputs

    policy = {k: v for k, v in (("model.hf_path", cfg.model.hf_path), ("manager_hf_path", cfg.manager_hf_path))
              if v} if cfg.system != "answers" else {}
    inputs = scored_inputs(policy=policy, answers=cfg.answers if cfg.system == "answers" else "",
                           data=cfg.data_path, judge=judge_name(cfg), metrics=f"{cfg.metrics}/f1={cfg.f1}")
    from ..core.outdir import claim_kind

    claim_kind(cfg.out_dir, "locomo", "LoCoMo scoring", mark=False)
    claim_scores(cfg.out_dir, inputs, rescore=cfg.rescore, stored=STORED, write=jax.process_index() == 0)
    if jax.process_index() == 0:
        claim_kind(cfg.out_dir, "locomo", "LoCoMo scoring", mark=True)
    extra: dict = {"inputs": inputs}
    notes: list[str] = []
    if cfg.system == "answers":
        extra["answers_match"] = m = answers_match(cfg, questions)
        notes.append(match_line(m))
    return extra, notes


def answers_match(cfg: LocomoEvalConfig, questions: list[Question]) -> dict:
    """How the answers file matches the split's questions (refused beyond max_missing; memjax/evaluation/provenance.py)."""
    from ..data.locomo import load_locomo
    from .provenance import match_answers, read_answers

    table, info = read_answers(cfg.answers, "qid", "answer")
    every = [q.qid for c in load_locomo(cfg.data_path).conversations for q in c.questions]
    return match_answers(cfg.answers, table, info, [q.qid for q in questions], every, cfg.max_missing)


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
        what = "is a directory, not the LoCoMo file" if cfg.data_path and Path(cfg.data_path).is_dir() else \
            "LoCoMo file not found"
        raise FileNotFoundError(f"data_path={cfg.data_path!r}: {what} (--set data_path=.../locomo10.json)")
    if cfg.system == "answers" and (not cfg.answers or not Path(cfg.answers).is_file()):
        raise FileNotFoundError(f"answers={cfg.answers!r}: predictions JSONL not found (--set answers=...)")
    questions = split_part(cfg)
    if cfg.system == "answers":
        answers_match(cfg, questions)
    return questions


def answers_predictor(path: str | os.PathLike) -> Predictor:
    """A predictor reading {"qid", "answer", "memory_dia_ids"?} lines produced elsewhere (missing qid -> None)."""
    from .provenance import read_answers

    table, _ = read_answers(path, "qid", "answer")
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
    ap.add_argument("--rescore", action="store_true", help="the out dir holds scores of other inputs (answers, data, "
                    "judge, metrics): score everything again there (without it: refused)")
    ap.add_argument("--max-missing", type=float, default=0.25, help="the largest fraction of the split's questions "
                    "without an answer line (beyond it: refused, exit 2)")
    ap.add_argument("--check", action="store_true", help="validate the arguments, read the data and the answers, "
                    "resolve the split, print what would be scored and exit 0 (no judge called, nothing written)")
    a = ap.parse_args(argv)
    try:
        cfg = LocomoEvalConfig(data_path=a.data_path, answers=a.answers, split=a.split, part=a.part, out_dir=a.out,
                               judge=a.judge, judge_url=a.judge_url, judge_model=a.judge_model, f1=a.f1, limit=a.limit,
                               accept_failures=a.accept_failures, rescore=a.rescore, max_missing=a.max_missing)
        if a.check:
            for what, path in (("data_path", cfg.data_path), ("answers", cfg.answers)):
                if not Path(path).is_file():
                    raise FileNotFoundError(f"{what}={path!r}: file not found")
            predict, questions = answers_predictor(cfg.answers), locomo_inputs(cfg)
            from ..core.outdir import out_dir_writable

            out_dir_writable(cfg.out_dir, "--out")
            answered = sum(predict(q) is not None for q in questions)
            from .provenance import match_line

            print(match_line(answers_match(cfg, questions)))
            judge = f"{cfg.judge} ({cfg.judge_model} at {cfg.judge_url})" if cfg.judge == "openai" else cfg.judge
            print(f"LoCoMo {cfg.split}/{cfg.part}: {len(questions)} questions, {answered} answered in {cfg.answers}; "
                  f"judge {judge}")
            print(f"out_dir: {cfg.out_dir}\ncheck: ok (nothing loaded or written)")
            return 0
        res = run_locomo_eval(cfg)
    except (ValueError, KeyError, OSError) as e:
        if isinstance(e, OSError) and e.strerror:  # args[0] is the errno
            msg = f"{e.filename or ''}: {e.strerror}" if e.filename else e.strerror
        elif isinstance(e, UnicodeDecodeError):  # args[0] is the codec's name
            msg = f"a file is not UTF-8 text ({e})"
        else:
            msg = e.args[0] if e.args else e
        print(f"error: {msg}", file=sys.stderr)
        return 2
    from ..report import write_report

    if res["failed"]["items"]:  # the first line a user sees
        print(failure_line(res["failed"]), file=sys.stderr, flush=True)
    if "answers_match" in res:
        from .provenance import match_line

        print(match_line(res["answers_match"]), file=sys.stderr, flush=True)
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
