"""`python -m memjax.evaluate [CONFIG.py] [--set key=value ...]`: MemAgent accuracy vs document length;
given a `SystemEvalConfig`, any registered system's held-out evaluation (System.evaluate, the same one
`memjax.train` runs before/during/after training) of a trained policy (`policy`: an HF directory such as
<train out_dir>/hf, or the system's initial model) -> results.json, traces.jsonl; or, given a `LocomoEvalConfig` (configs/locomo_<system>.py), a LoCoMo evaluation (memjax/evaluation/locomo.py:
F1 / BLEU-1 / J / M-Fail per category, predictions JSONL written as they finish, table and chart).

Owns: the evaluation program (its configs live in memjax/eval_config.py). For each N in `num_docs` it synthesises RULER-HotpotQA
contexts (memjax.data.hotpotqa) for the first `num_samples` questions, runs the MemAgent workflow, and
scores the last \\boxed{} answer with SQuAD sub-EM (the paper's accuracy; EM and F1 too). When
`baseline` is on and a context fits the engine window, the same model also answers from the full
context in one prompt (FULL_CONTEXT_TEMPLATE below, our wording) for comparison.
Writes to out_dir: results.json, results.md (score table like the paper's Table 2), accuracy.png,
traces.jsonl (memory after every chunk, final answer, scores). Results are written after every length
(results.json / results.md atomically, traces appended), so a failure at a later length loses nothing
finished; out_dir is locked for the run and the config is checked before the model loads. The CLI ends every
kind of evaluation by writing out_dir/report.html (memjax.report) and printing its path.
Several processes (`python -m memjax.launch --nproc N -- memjax.evaluate CONFIG`, or the JAX / SLURM / Open MPI
variables): every kind splits its held-out items over the processes (memjax/agents/heldout.py for workflows,
blocks of each length's questions and of the baseline prompts, LoCoMo by conversation), every process gets the
gathered one-process result, and process 0 alone takes the out_dir lock and writes the files and the report.
Nothing is downloaded: the model is an
HF directory (model.hf_path) or random weights of a preset, the data a HotpotQA JSON file (data_path).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import jax
import numpy as np
from rich.console import Console
from rich.table import Table

from .systems.memagent.workflow import MemAgent
from .agents.heldout import run_heldout
from .agents.workflow import request_seed
from .cli_check import check_evaluate
from .config import ConfigError, run_cli
from .data import RulerHotpotQAConfig, load_hotpotqa, synthesize
from .engine import Engine, SamplingParams
from .eval_config import EvalConfig, SystemEvalConfig
from .evaluation.locomo import LocomoEvalConfig, run_locomo_eval
from .evaluation.profiles import get_profile
from .parallel import initialize, is_primary
from .parallel.lifecycle import agree_run
from .parallel.split import block, gather_objects
from .report import write_report
from .runio import JsonlLog, OutDirLock, prepare_out_dir, write_atomic
from .systems import build as build_system

FULL_CONTEXT_TEMPLATE = ("Please read the following text and answer the question below.\n\n<text>\n{context}\n"
                         "</text>\n\nQuestion: {question}\nPut the answer in \\boxed{{}}.")


def evaluate_system(cfg: SystemEvalConfig, con: Console) -> dict:
    from .checkpoint import load_hf

    try:
        system = build_system(cfg.agent, seed=cfg.seed)
    except KeyError as e:
        raise ConfigError(str(e.args[0])) from None
    if cfg.policy and not (Path(cfg.policy) / "config.json").is_file():
        raise ConfigError(f"policy={cfg.policy}: not a Hugging Face model directory (no config.json)")
    out = prepare_out_dir(cfg.out_dir)
    primary = is_primary()
    with _lock(out):
        model, tok = system.load_model(cfg.model)
        if cfg.policy:
            model = load_hf(cfg.policy)
        system.setup(model, tok)
        t0 = time.perf_counter()
        ev = system.evaluate(Engine(model, system.engine_config(cfg.engine)), tok)
        if not ev:
            raise ConfigError(f"system {system.name!r} defines no held-out evaluation")
        scalars = {k: v for k, v in ev.items() if k not in ("traces", "samples")}
        result = {"config": json.loads(json.dumps(asdict(cfg), default=str)), "system": system.name,
                  "metrics": scalars, "seconds": time.perf_counter() - t0}
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


def evaluate(cfg: EvalConfig | LocomoEvalConfig, console: Console | None = None) -> dict:
    initialize()  # several processes (memjax.launch, JAX_*/SLURM/Open MPI): before any backend call
    if jax.process_count() > 1:  # processes of one evaluation refuse unless code and config match
        agree_run(asdict(cfg))  # a difference names the source files / config fields
    if not is_primary():
        console = Console(quiet=True)
    if isinstance(cfg, LocomoEvalConfig):
        with _lock(prepare_out_dir(cfg.out_dir)):
            res = run_locomo_eval(cfg)
        (console or Console()).print(f"LoCoMo {cfg.split}/{cfg.part}: overall {res['table']['overall']} -> {cfg.out_dir}")
        return res
    if isinstance(cfg, SystemEvalConfig):
        return evaluate_system(cfg, console or Console())
    if not isinstance(cfg, EvalConfig):
        raise ConfigError(f"config is a {type(cfg).__name__}; memjax.evaluate expects an EvalConfig, a "
                          "SystemEvalConfig or a LocomoEvalConfig (a training config goes to python -m memjax.train)")
    if not cfg.data_path:
        raise ConfigError("data_path is not set: give a HotpotQA JSON file (--set data_path=...)")
    if not Path(cfg.data_path).is_file():
        raise ConfigError(f"data_path={cfg.data_path}: file not found")
    out = prepare_out_dir(cfg.out_dir)
    with _lock(out):
        return _evaluate(cfg, out, console or Console())


def _lock(out: Path):
    """The out_dir lock, taken once: by process 0 of a multi-process evaluation (the one that writes)."""
    return OutDirLock(out) if is_primary() else contextlib.nullcontext()


def _evaluate(cfg: EvalConfig, out: Path, con: Console) -> dict:
    corpus = load_hotpotqa(cfg.data_path)
    n = min(cfg.num_samples, len(corpus))
    model, tok = cfg.model.load()
    engine = Engine(model, cfg.engine)
    agent = MemAgent(engine, tok, cfg.memagent)
    rows = []
    primary = is_primary()  # several processes: each runs its share of every length, process 0 writes
    traces_log = JsonlLog(out / "traces.jsonl", primary)
    if primary:
        traces_log.path.unlink(missing_ok=True)
        (out / "results.json").unlink(missing_ok=True)  # never leave a previous run's results looking like ours
    config = json.loads(json.dumps(asdict(cfg), default=str))
    stop = (tok.eos_id, tok.endoftext_id)
    for k, num_docs in enumerate(cfg.num_docs):
        samples = [synthesize(corpus, i, RulerHotpotQAConfig(num_docs=num_docs, seed=cfg.seed)) for i in range(n)]
        con.print(f"N={num_docs} ({k + 1}/{len(cfg.num_docs)}): {n} questions x {cfg.memagent.group_size} "
                  f"rollout(s), {sum(-(-len(tok.encode(s.context)) // cfg.memagent.chunk_tokens) for s in samples)} "
                  "chunks in all ...")
        t0 = time.perf_counter()
        c = agent.cfg
        res = run_heldout(engine, agent, samples, group_size=c.group_size, seed=c.seed, max_active=c.max_active)
        dt = time.perf_counter() - t0
        scores = [_score(t["final"], t["answers"], cfg.metrics) for t in res.traces]
        traces_log.write(*({"num_docs": num_docs, "id": samples[t["sample"]].id, **t, "scores": s}
                           for t, s in zip(res.traces, scores)))
        lengths = [len(tok.encode(s.context)) for s in samples]
        row = {"num_docs": num_docs, "mean_tokens": float(np.mean(lengths)), "samples": len(res.traces),
               **{k: float(np.mean([s[k] for s in scores])) for k in ("sub_em", "em", "f1", "missing", "crashed")},
               "seconds": dt, "conversations": res.stats["conversations"]}
        if cfg.baseline:
            prompts = [tok.apply_chat_template([{"role": "user", "content": FULL_CONTEXT_TEMPLATE.format(
                context=s.context, question=s.question)}]) for s in samples]
            fits = [p for p in prompts if len(p) + cfg.memagent.max_final_tokens <= cfg.engine.window]
            if len(fits) == len(prompts):
                lo, hi = block(len(prompts))  # this process's share; a prompt's seed is its global index's
                sp = SamplingParams(temperature=cfg.memagent.temperature, top_p=cfg.memagent.top_p,
                                    max_tokens=cfg.memagent.max_final_tokens, stop_token_ids=stop)
                comps = engine.generate(prompts[lo:hi], [dataclasses.replace(sp, seed=request_seed(cfg.seed, i, 0))
                                                         for i in range(lo, hi)]) if hi > lo else []
                bs = gather_objects([_score(tok.decode(c.token_ids, skip_special_tokens=True, skip_unknown=True),
                                            s.answers, cfg.metrics) for c, s in zip(comps, samples[lo:hi])])
                row["baseline_sub_em"] = float(np.mean([b["sub_em"] for b in bs]))
            else:
                row["baseline_sub_em"] = None  # does not fit the window
        rows.append(row)
        result = {"config": config, "metrics_profile": cfg.metrics, "rows": rows, "complete": k + 1 == len(cfg.num_docs)}
        if primary:
            write_atomic(out / "results.json", json.dumps(result, indent=2))  # after every length: nothing lost
            write_atomic(out / "results.md", _markdown(rows, cfg.metrics))
        con.print(f"N={num_docs}: {row['mean_tokens']:.0f} tokens, sub-EM {row['sub_em']:.3f}, "
                  f"{row['conversations']} conversations in {dt:.1f}s")
    if primary:
        _plot(rows, out / "accuracy.png")
    table = Table(title=f"MemAgent accuracy vs length ({n} questions each)")
    for c in ("N docs", "tokens", "sub-EM", "EM", "F1", "no \\boxed", "full context sub-EM"):
        table.add_column(c, justify="right")
    for r in rows:
        b = r.get("baseline_sub_em")
        table.add_row(str(r["num_docs"]), f"{r['mean_tokens']:.0f}", f"{r['sub_em']:.3f}", f"{r['em']:.3f}",
                      f"{r['f1']:.3f}", f"{r['missing']:.2f}", "-" if b is None else f"{b:.3f}")
    con.print(table)
    con.print(f"wrote {out}/results.json, results.md, accuracy.png, traces.jsonl")
    return result


def _markdown(rows: list[dict], metrics: str = "memagent") -> str:
    lines = [f"Metric profile: `{metrics}` (memjax.evaluation.profiles).", "", "| N docs | mean tokens | sub-EM | EM | F1 | missing \\boxed | full-context sub-EM |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = r.get("baseline_sub_em")
        lines.append(f"| {r['num_docs']} | {r['mean_tokens']:.0f} | {r['sub_em']:.3f} | {r['em']:.3f} | {r['f1']:.3f} "
                     f"| {r['missing']:.2f} | {'-' if b is None else f'{b:.3f}'} |")
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    x = [r["mean_tokens"] for r in rows]
    ax.plot(x, [r["sub_em"] for r in rows], "o-", label="MemAgent")
    base = [(r["mean_tokens"], r["baseline_sub_em"]) for r in rows if r.get("baseline_sub_em") is not None]
    if base:
        ax.plot(*zip(*base), "s--", label="full context")
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("context tokens")
    ax.set_ylabel("sub-EM")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def evaluate_and_report(cfg, console: Console | None = None) -> dict:
    """What the CLI runs: `evaluate`, then out_dir/report.html (memjax.report), its path printed."""
    result = evaluate(cfg, console)
    if is_primary():  # several processes: one report, by the writer
        (console or Console()).print(f"report: {write_report(cfg.out_dir)}")
    return result


def main(argv: list[str] | None = None) -> int:
    return run_cli("python -m memjax.evaluate", __doc__, argv, EvalConfig(), evaluate_and_report, check=check_evaluate)


if __name__ == "__main__":
    sys.exit(main())
