"""MemAgent accuracy vs document length (`python -m memjax.evaluate` with an EvalConfig): the paper's Table 2 run.

Owns: where each length's questions come from (`length_sets`, `check_length_data`: a raw HotpotQA JSON synthesised
at each N of `num_docs`, a directory of MemAgent's official `eval_{N}.json` files, or one file of ready questions
grouped by their `num_docs`; layouts in docs/memagent.md, 'Running'), the resumable run (`run_length_eval`), the
per-length table with the paper's numbers (results.json / results.md) and the plot (accuracy.png).
Invariants:
- Scores are the `metrics` profile's (default `memagent`: the official ruler_hqa.py per-item rules).
- Items run in batches of `batch_items`; each batch's traces are appended to traces.jsonl. A run that finds them with
  the same `run_key` (the config without out_dir) resumes without recomputing finished items; another key starts
  afresh (said in one line). Each trajectory keeps its uncut-run seed (`first_trajectory`), so batching and
  resuming do not change results. One line estimates the cost up front, one per batch reports progress.
- Only one batch of documents is held at a time (its text and 4 bytes a token); results are rewritten after every
  batch (`complete` false until the last length), the plot at the end; with several processes process 0 writes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ...agents.heldout import run_heldout
from ...core.config import ConfigError
from ...core.environment import describe as describe_environment
from ...core.outdir import JsonlLog, write_atomic
from ...data import RulerHotpotQAConfig, load_hotpotqa, synthesize
from ...data.memagent_files import detect_layout, load_qa_file
from ...evaluation.profiles import get_profile
from ...parallel import is_primary
from ...parallel.lifecycle import stop_point
from .paper import CITATION, TABLE2, paper_row
from .workflow import MemAgent

METRICS = ("sub_em", "em", "f1", "missing", "crashed")
TOKENS_PER_DOC = 140  # RULER-HotpotQA documents as the official script counts them ("50~7K tokens, 100~14K")


def turns_per_rollout(n: int, chunk_tokens: int) -> int:
    """The estimated model turns of one rollout at N documents: one per chunk, plus the answer."""
    return -(-n * TOKENS_PER_DOC // chunk_tokens) + 1


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _eval_file(cfg, n: int) -> Path:
    return Path(cfg.data_path) / f"eval_{n}.json"


def check_length_data(cfg) -> str:
    """The data source's description; ConfigError naming the missing piece. Reads no file but layout headers."""
    p = Path(cfg.data_path)
    if not cfg.data_path:
        raise ConfigError("data_path is not set: give a HotpotQA JSON file, a directory of official eval_{N}.json "
                          "files, or a question file (--set data_path=...)")
    if p.is_dir():
        missing = [str(_eval_file(cfg, n)) for n in cfg.num_docs if not _eval_file(cfg, n).is_file()]
        if missing:
            raise ConfigError(f"data_path={p}: no {missing[0]} (the official eval file for N={Path(missing[0]).stem[5:]}; "
                              f"list only the lengths you have with --set num_docs=...)")
        if cfg.docs_path and not Path(cfg.docs_path).is_file():
            raise ConfigError(f"docs_path={cfg.docs_path}: file not found")
        return f"official eval files eval_{{N}}.json in {p}"
    if not p.is_file():
        raise ConfigError(f"data_path={p}: file not found")
    try:
        layout = detect_layout(p)
    except ValueError as e:
        raise ConfigError(f"data_path: {e}") from None
    return "raw HotpotQA (RULER-HotpotQA synthesis)" if layout == "hotpotqa" else f"{layout} question file"


def length_sets(cfg) -> list[tuple[int, int, Callable[[int], dict]]]:
    """(N, item count, item(i) -> record) per length, in run order; records are built only when asked for."""
    check_length_data(cfg)
    p = Path(cfg.data_path)
    try:
        if p.is_dir():
            out = []
            for n in cfg.num_docs:
                qa = load_qa_file(_eval_file(cfg, n), docs_path=cfg.docs_path)
                out.append((n, min(cfg.num_samples, len(qa)), qa.__getitem__))
            return out
        if detect_layout(p) == "hotpotqa":
            corpus = load_hotpotqa(p)
            if max(cfg.num_docs) > len(corpus.docs):
                raise ConfigError(f"data_path={p}: N={max(cfg.num_docs)} needs that many distinct paragraphs but the "
                                  f"file has {len(corpus.docs)} (the paper's lengths need the full dev set)")
            count = min(cfg.num_samples, len(corpus))
            return [(n, count, _synth(corpus, n, cfg.seed)) for n in cfg.num_docs]
        qa = load_qa_file(p, docs_path=cfg.docs_path)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(qa.num_docs()):
        groups.setdefault(n, []).append(i)
    return [(n, min(cfg.num_samples, len(ix)), (lambda j, ix=ix: qa[ix[j]])) for n, ix in sorted(groups.items())]


def _synth(corpus, n: int, seed: int) -> Callable[[int], dict]:
    config = RulerHotpotQAConfig(num_docs=n, seed=seed)

    def item(i: int) -> dict:
        try:
            return synthesize(corpus, i, config).to_dict()
        except ValueError as e:
            raise ConfigError(str(e)) from None
    return item


def run_key(cfg) -> str:
    """What identifies a run's items: the config without out_dir (sha256 of its sorted JSON)."""
    d = json.loads(json.dumps(asdict(cfg), default=str))
    d.pop("out_dir", None)
    d.pop("rescore", None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _resume(out: Path, key: str, con) -> dict[tuple[int, int], list[dict]]:
    """Finished items (length, item) -> their trajectories' traces, when out_dir holds this run; else start afresh."""
    run, traces = out / "run.json", out / "traces.jsonl"
    old = json.loads(run.read_text()).get("run_key") if run.is_file() else None
    done: dict[tuple[int, int], list[dict]] = {}
    if old == key and traces.is_file():
        for line in traces.read_text(encoding="utf-8").splitlines():
            try:
                t = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a crash: its item reruns
                continue
            done.setdefault((t["num_docs"], t["item"]), []).append(t)
        if done:
            con.print(f"resuming {out}: {len(done)} finished item(s) read back, not recomputed")
        return done
    if is_primary():
        if old is not None or traces.is_file():
            con.print(f"{out} holds another evaluation (or none resumable): starting afresh")
        for f in ("traces.jsonl", "results.json", "results.md", "accuracy.png"):
            (out / f).unlink(missing_ok=True)
        write_atomic(run, json.dumps({"run_key": key}))
    return done


def run_length_eval(cfg, out: Path, con, *, baseline: Callable[[Any, Any, list[dict]], float | None] | None = None
                    ) -> dict:
    """Every length of `cfg.num_docs` (or of the question file), resumable; returns the results.json dict.
    `baseline(engine, tokenizer, records)`: the full-context sub-EM of a length's records (None: not run); it is asked
    only for lengths whose longest document fits the engine window."""
    sets = length_sets(cfg)
    model, tok = cfg.model.load()
    from ...engine import Engine

    engine = Engine(model, cfg.engine)
    agent = MemAgent(engine, tok, cfg.memagent)
    c, primary = agent.cfg, is_primary()
    score = get_profile(cfg.metrics, "boxed").score
    batch = cfg.batch_items or max(1, cfg.engine.max_slots // c.group_size)
    done = _resume(out, run_key(cfg), con)
    log = JsonlLog(out / "traces.jsonl", primary)
    config = json.loads(json.dumps(asdict(cfg), default=str))
    rows: list[dict] = []
    left = {n: sum((n, i) not in done for i in range(count)) * c.group_size * turns_per_rollout(n, c.chunk_tokens)
            for n, count, _ in sets}  # estimated model turns still to run, per length
    per_turn = c.chunk_tokens + c.max_memory_tokens + c.max_query_tokens
    con.print(f"cost: {len(sets)} length(s), {sum(cnt for _, cnt, _ in sets)} question(s) x {c.group_size} rollout(s): "
              f"about {sum(left.values()):,} model turns and {sum(left.values()) * per_turn / 1e6:,.1f}M prompt tokens "
              f"still to run (documents at ~{TOKENS_PER_DOC} tokens, {c.chunk_tokens}-token chunks; finished items "
              "are not rerun)")
    for k, (n, count, item) in enumerate(sets):
        con.print(f"N={n} ({k + 1}/{len(sets)}): {count} questions x {c.group_size} rollout(s), batches of {batch}")
        for lo in range(0, count, batch):
            hi = min(count, lo + batch)
            stop_point(f"before N={n} items {lo + 1}-{hi}")  # SIGTERM / SIGINT: finished batches are kept
            if all((n, i) in done for i in range(lo, hi)):
                continue
            records = [item(i) for i in range(lo, hi)]
            t0 = time.perf_counter()
            res = run_heldout(engine, agent, records, group_size=c.group_size, seed=c.seed, max_active=c.max_active,
                              first_trajectory=lo * c.group_size)
            dt = time.perf_counter() - t0
            new = []
            for t in res.traces:
                i = lo + t["sample"]
                new.append({"num_docs": n, "item": i, "id": str(records[t["sample"]].get("id", i)), **t,
                            "scores": score(t["final"], t["answers"]), "seconds": dt / len(res.traces)})
            del records
            log.write(*new)
            for t in new:
                done.setdefault((n, t["item"]), []).append(t)
            ran = (hi - lo) * c.group_size * turns_per_rollout(n, c.chunk_tokens)
            left[n] -= ran
            con.print(f"N={n}: items {hi}/{count} done ({dt:.1f}s for this batch; about "
                      f"{_duration(sum(left.values()) * dt / ran)} left at its {dt / ran:.2f}s per turn)")
            _publish(out, config, cfg.metrics, rows + [_row(n, count, done)], False, primary)
        row = _row(n, count, done)
        if baseline is not None:
            fits = row["doc_tokens_max"] + 256 + c.max_final_tokens <= cfg.engine.window
            row["baseline_sub_em"] = baseline(engine, tok, [item(i) for i in range(count)]) if fits else None
        rows.append(row)
        _publish(out, config, cfg.metrics, rows, k + 1 == len(sets), primary)
        con.print(f"N={n}: {row['mean_tokens']:.0f} tokens, sub-EM {row['sub_em']:.3f}"
                  + (f" (paper 7B {row['paper_7b']:.2f}%, 14B {row['paper_14b']:.2f}%)" if "paper_7b" in row else ""))
    if primary:
        plot(rows, out / "accuracy.png")
    return _result(config, cfg.metrics, rows, True)


def _traces(n: int, count: int, done) -> list[dict]:
    return [t for i in range(count) for t in sorted(done.get((n, i), []), key=lambda t: t.get("rollout", 0))]


def _row(n: int, count: int, done) -> dict:
    ts = _traces(n, count, done)
    finished = sum((n, i) in done for i in range(count))
    tokens = [t.get("doc_tokens", 0) for t in ts] or [0]
    row = {"num_docs": n, "mean_tokens": float(np.mean(tokens)), "doc_tokens_max": int(max(tokens)),
           "samples": finished, "items": count, "trajectories": len(ts),
           **{m: float(np.mean([t["scores"][m] for t in ts])) if ts else None for m in METRICS},
           "seconds": float(sum(t.get("seconds", 0.0) for t in ts)),
           "conversations": int(sum(t.get("chunks", 0) + 1 for t in ts))}
    return {**row, **paper_row(n)}


def _result(config: dict, metrics: str, rows: list[dict], complete: bool) -> dict:
    """results.json's dict: the rows so far, whether every length is in, the paper, the environment."""
    return {"config": config, "metrics_profile": metrics, "rows": rows, "complete": complete, "paper": CITATION,
            "environment": describe_environment()}


def _publish(out: Path, config: dict, metrics: str, rows: list[dict], complete: bool, primary: bool) -> None:
    if not primary:
        return
    write_atomic(out / "results.json", json.dumps(_result(config, metrics, rows, complete), indent=2))
    write_atomic(out / "results.md", markdown(rows, metrics))


def _f(v, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def markdown(rows: Sequence[dict], metrics: str = "memagent") -> str:
    lines = [f"Metric profile: `{metrics}` (memjax.evaluation.profiles). Paper: {CITATION}; the paper's accuracy is "
             "set beside sub-EM (x100).", "",
             "| N docs | mean tokens | items | sub-EM | EM | F1 | missing \\boxed | full-context sub-EM | paper length "
             "| paper RL-MemAgent-7B | paper RL-MemAgent-14B | seconds |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['num_docs']} | {r['mean_tokens']:.0f} | {r['samples']}/{r['items']} | {_f(r['sub_em'])} | "
                     f"{_f(r['em'])} | {_f(r['f1'])} | {_f(r['missing'], '.2f')} | {_f(r.get('baseline_sub_em'))} | "
                     f"{r.get('paper_tokens', '-')} | {_f(r.get('paper_7b'), '.2f')} | {_f(r.get('paper_14b'), '.2f')} | "
                     f"{r['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict], path: Path) -> None:
    """sub-EM (%) vs N for this run, the full-context baseline where run, and the paper's two RL-MemAgent rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [r["num_docs"] for r in rows if r["sub_em"] is not None and r["num_docs"] > 0]
    ax.plot(xs, [100 * r["sub_em"] for r in rows if r["sub_em"] is not None and r["num_docs"] > 0], "o-",
            label="this run (sub-EM)")
    base = [(r["num_docs"], 100 * r["baseline_sub_em"]) for r in rows if r.get("baseline_sub_em") is not None]
    if base:
        ax.plot(*zip(*base), "s--", label="full context (this run)")
    ns = sorted(TABLE2)
    for j, name in ((1, "paper RL-MemAgent-7B"), (2, "paper RL-MemAgent-14B")):
        ax.plot(ns, [TABLE2[n][j] for n in ns], "^:", alpha=0.7, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [f"{n}\n{TABLE2[n][0]}" for n in ns], fontsize=7)
    ax.set_ylim(-2, 102)
    ax.set_xlabel("documents N (paper's token length)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("MemAgent RULER-HotpotQA: accuracy vs length", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
