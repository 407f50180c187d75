"""What `python -m memjax.evaluate` runs once its command line and launch environment have been checked: `evaluate(cfg)`
(MemAgent's accuracy vs length, a system's held-out evaluation, LoCoMo, LongMemEval) and `evaluate_and_report(cfg)`
(evaluate, then report.html). The program is described in memjax/cli/evaluate.py's docstring, the CLI's help.

Owns: the evaluations' run (lock, multi-process split and gather, result files, console tables); the configs live in
memjax/cli/eval_config.py and memjax/evaluation/.
Invariants: `evaluate` joins the multi-process runtime (memjax.parallel.initialize) before any backend call and points
jax's persistent compilation cache at the config's `compile_cache` before the first compile; data and config are
checked before the out dir is made; only process 0 writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from dataclasses import asdict
from pathlib import Path

import jax
import numpy as np
from rich.console import Console
from rich.table import Table

from ..agents.workflow import request_seed
from ..core.cli import RunError
from ..core.compile_cache import use_compile_cache
from ..core.config import ConfigError
from ..core.environment import describe as describe_environment
from ..core.outdir import (
    JsonlLog,
    OutDirLock,
    claim_kind,
    prepare_out_dir,
    write_atomic,
)
from ..engine import Engine, SamplingParams
from ..engine.placement import spanned
from ..evaluation.locomo import (
    LocomoEvalConfig,
    failure_line,
    locomo_inputs,
    run_locomo_eval,
)
from ..evaluation.longmemeval import LongMemEvalConfig, run_longmemeval_eval
from ..evaluation.profiles import get_profile
from ..parallel import initialize, is_primary
from ..parallel.lifecycle import agree_run
from ..parallel.split import block, gather_objects
from ..report import write_report
from ..systems import build as build_system
from ..systems.memagent.length_eval import length_sets, run_length_eval
from ..systems.memagent.paper import CITATION
from .eval_config import EvalConfig, SystemEvalConfig

FULL_CONTEXT_TEMPLATE = ("Please read the following text and answer the question below.\n\n<text>\n{context}\n"
                         "</text>\n\nQuestion: {question}\nPut the answer in \\boxed{{}}.")


def evaluate_system(cfg: SystemEvalConfig, con: Console) -> dict:
    from ..checkpoint import load_hf

    try:
        system = build_system(cfg.agent, seed=cfg.seed)
    except KeyError as e:
        raise ConfigError(str(e.args[0])) from None
    if cfg.policy and not (Path(cfg.policy) / "config.json").is_file():
        hint = ""
        if (Path(cfg.policy) / "run.json").is_file():  # a training run's out_dir: its policy is hf/ in it
            hint = (f"; it is a training run's directory, whose policy is {Path(cfg.policy) / 'hf'}"
                    + ("" if (Path(cfg.policy) / "hf" / "config.json").is_file() else
                       " (written when the run finishes: resume the run first)"))
        raise ConfigError(f"policy={cfg.policy}: not a Hugging Face model directory (no config.json){hint}")
    out = prepare_out_dir(cfg.out_dir)
    primary = is_primary()
    with _lock(out):
        claim_kind(out, "evaluation", "python -m memjax.evaluate", mark=primary)
        model, tok = system.load_model(cfg.model)
        if cfg.policy:
            own, model = model, load_hf(cfg.policy)
            if model.cfg.vocab_size != own.cfg.vocab_size:  # a policy of another system (or vocabulary) scores 0
                raise ConfigError(f"policy={cfg.policy}: its vocabulary has {model.cfg.vocab_size:,} rows, system "
                                  f"{system.name!r}'s model {own.cfg.vocab_size:,}: not a policy of this system")
        ecfg = system.engine_config(cfg.engine)
        system.place_frozen(spanned(ecfg, jax.local_devices()))  # frozen engines: over the policy engine's devices
        system.setup(model, tok)
        t0 = time.perf_counter()
        ev = system.evaluate(Engine(model, ecfg), tok)
        if not ev:
            raise ConfigError(f"system {system.name!r} defines no held-out evaluation")
        scalars = {k: v for k, v in ev.items() if k not in ("traces", "samples")}
        from ..evaluation.provenance import scored_inputs

        result = {"config": json.loads(json.dumps(asdict(cfg), default=str)), "system": system.name,
                  "inputs": scored_inputs(policy={"policy": cfg.policy or "(initial model)"}),
                  "metrics": scalars, "seconds": time.perf_counter() - t0, "environment": describe_environment()}
        if primary:  # several processes: each ran its share of the held-out set, all hold the whole result
            write_atomic(out / "results.json", json.dumps(result, indent=2, default=str))
            log = JsonlLog(out / "traces.jsonl")
            log.path.unlink(missing_ok=True)
            log.write(*ev.get("traces", []))
    table = Table(title=f"{system.name}: held-out evaluation ({cfg.policy or 'initial model'})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in scalars.items():
        table.add_row(k, f"{v:.4f}" if isinstance(v, float) else str(v))
    con.print(table)
    con.print(f"wrote {out}/results.json, traces.jsonl")
    return result


def _score(text: str, answers, metrics: str = "memagent") -> dict[str, float]:
    return get_profile(metrics, "boxed").score(text, answers)


def evaluate(cfg: EvalConfig | LocomoEvalConfig | LongMemEvalConfig, console: Console | None = None) -> dict:
    initialize()  # several processes (memjax.launch, JAX_*/SLURM/Open MPI): before any backend call
    from ..parallel.lifecycle import evaluation_stops

    with evaluation_stops(getattr(cfg, "out_dir", "")):  # SIGTERM / SIGINT: stop at the next question batch
        return _evaluate_kind(cfg, console)


def _evaluate_kind(cfg, console: Console | None) -> dict:
    lines = []  # the cache folder's line, printed once the console is known
    use_compile_cache(getattr(cfg, "compile_cache", "auto"), say=lines.append)  # before the first compile
    if jax.process_count() > 1:  # processes of one evaluation refuse unless code and config match
        agree_run(asdict(cfg))  # a difference names the source files / config fields
    if not is_primary():
        console = Console(quiet=True)
    for line in lines:
        (console or Console()).print(line, markup=False, soft_wrap=True)  # unwrapped: a path to copy
    kind = ("locomo" if isinstance(cfg, LocomoEvalConfig) else "longmemeval" if isinstance(cfg, LongMemEvalConfig)
            else "evaluation")
    if hasattr(cfg, "out_dir"):  # another kind's directory: refused before anything is written there
        claim_kind(cfg.out_dir, kind, "python -m memjax.evaluate" if kind == "evaluation" else
                   {"locomo": "LoCoMo scoring", "longmemeval": "LongMemEval scoring"}[kind])
    if isinstance(cfg, LocomoEvalConfig):
        locomo_inputs(cfg)  # bad data or answers fail before the out dir is made
        with _lock(prepare_out_dir(cfg.out_dir)):
            res = run_locomo_eval(cfg)
        con = console or Console()
        if "answers_match" in res:
            from ..evaluation.provenance import match_line

            con.print(match_line(res["answers_match"]), markup=False)
        if res["failed"]["items"]:
            con.print(failure_line(res["failed"]), style="bold red", markup=False)
        con.print(f"LoCoMo {cfg.split}/{cfg.part}: overall {res['table']['overall']} -> {cfg.out_dir}")
        return res
    if isinstance(cfg, LongMemEvalConfig):
        with _lock(prepare_out_dir(cfg.out_dir)):
            res = run_longmemeval_eval(cfg)
        from ..evaluation.longmemeval import failure, result_line

        con = console or Console()
        if failure(cfg, res):
            con.print(f"WARNING: {failure(cfg, res)}", style="bold red", markup=False, soft_wrap=True)
        con.print(result_line(cfg, res), markup=False, soft_wrap=True)
        return res
    if isinstance(cfg, SystemEvalConfig):
        return evaluate_system(cfg, console or Console())
    if not isinstance(cfg, EvalConfig):
        raise ConfigError(f"config is a {type(cfg).__name__}; memjax.evaluate expects an EvalConfig, a "
                          "SystemEvalConfig, a LocomoEvalConfig or a LongMemEvalConfig (a training config goes to python -m memjax.train)")
    length_sets(cfg)  # every record read and checked: a bad data file fails before the out dir is made
    out = prepare_out_dir(cfg.out_dir)
    with _lock(out):
        claim_kind(out, "evaluation", "python -m memjax.evaluate", mark=is_primary())
        from ..evaluation.provenance import claim_scores, scored_inputs

        inputs = scored_inputs(policy={"model.hf_path": cfg.model.hf_path or f"(random {cfg.model.preset})"},
                               data=cfg.data_path, judge="", metrics=cfg.metrics)
        if cfg.docs_path:
            inputs["docs"] = scored_inputs(data=cfg.docs_path)["data"]
        claim_scores(out, inputs, rescore=cfg.rescore, stored=("traces.jsonl", "results.json", "results.md",
                                                                "accuracy.png"), write=is_primary())
        result = _evaluate(cfg, out, console or Console())
        result["inputs"] = inputs
        if is_primary():
            write_atomic(out / "results.json", json.dumps(result, indent=2, default=str))
        return result


def _lock(out: Path):
    """The out_dir lock, taken once: by process 0 of a multi-process evaluation (the one that writes)."""
    return OutDirLock(out) if is_primary() else contextlib.nullcontext()


def _full_context(cfg: EvalConfig, engine, tok, samples: list[dict]) -> float | None:
    """The same model answering from the whole context in one prompt (FULL_CONTEXT_TEMPLATE): mean sub-EM, or
    None when a prompt does not fit the engine window. Several processes: each its block, seeds by global index."""
    if not cfg.baseline or not samples:
        return None
    prompts = [tok.apply_chat_template([{"role": "user", "content": FULL_CONTEXT_TEMPLATE.format(
        context=s["context"], question=s["question"])}]) for s in samples]
    if any(len(p) + cfg.memagent.max_final_tokens > cfg.engine.window for p in prompts):
        return None
    lo, hi = block(len(prompts))  # this process's share; a prompt's seed is its global index's
    sp = SamplingParams(temperature=cfg.memagent.temperature, top_p=cfg.memagent.top_p,
                        max_tokens=cfg.memagent.max_final_tokens, stop_token_ids=(tok.eos_id, tok.endoftext_id))
    comps = engine.generate(prompts[lo:hi], [dataclasses.replace(sp, seed=request_seed(cfg.seed, i, 0))
                                             for i in range(lo, hi)]) if hi > lo else []
    bs = gather_objects([_score(tok.decode(c.token_ids, skip_special_tokens=True, skip_unknown=True),
                                s["answers"], cfg.metrics) for c, s in zip(comps, samples[lo:hi])])
    return float(np.mean([b["sub_em"] for b in bs]))


def _evaluate(cfg: EvalConfig, out: Path, con: Console) -> dict:
    result = run_length_eval(cfg, out, con, baseline=lambda engine, tok, samples: _full_context(cfg, engine, tok, samples))
    rows = result["rows"]
    table = Table(title=f"MemAgent accuracy vs length (paper: {CITATION})")
    for c in ("N docs", "tokens", "items", "sub-EM", "EM", "F1", "no \\boxed", "full context sub-EM", "paper 7B %",
              "paper 14B %"):
        table.add_column(c, justify="right")
    for r in rows:
        f = (lambda v, spec=".3f": "-" if v is None else format(v, spec))
        table.add_row(str(r["num_docs"]), f"{r['mean_tokens']:.0f}", f"{r['samples']}/{r['items']}", f(r["sub_em"]),
                      f(r["em"]), f(r["f1"]), f(r["missing"], ".2f"), f(r.get("baseline_sub_em")),
                      f(r.get("paper_7b"), ".2f"), f(r.get("paper_14b"), ".2f"))
    con.print(table)
    con.print(f"wrote {out}/results.json, results.md, accuracy.png, traces.jsonl")
    return result


def evaluate_and_report(cfg, console: Console | None = None) -> dict:
    """What the CLI runs: `evaluate`, then out_dir/report.html (memjax.report), its path printed."""
    result = evaluate(cfg, console)
    if is_primary():  # several processes: one report, by the writer
        (console or Console()).print(f"report: {write_report(cfg.out_dir)}")
    if isinstance(cfg, LongMemEvalConfig):
        from ..evaluation.longmemeval import failure

        if failure(cfg, result):
            raise RunError(failure(cfg, result))
    fails = result.get("failed") if isinstance(cfg, LocomoEvalConfig) else None
    if fails and fails["items"] and not cfg.accept_failures:  # written and reported, but not a success
        raise RunError(f"{fails['items']} of {fails['of']} items failed (see the top of {cfg.out_dir}/results.md); "
                       "--set accept_failures=true accepts them")
    return result
