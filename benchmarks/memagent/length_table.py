"""The MemAgent per-length table at the paper's lengths with a tiny model on CPU: time and peak memory per length.

    python -m benchmarks.memagent.length_table [--lengths 50 100 200 400 800 1600 3200 6400] [--over-1m]
        [--questions 2] [--root /tmp/memagent_length_table]
        [--json benchmarks/results/memagent_length_table_cpu.json]

What it runs: `memjax.evaluate` with configs/memagent/eval.py (its official lengths, chunk 5000 in an 8,192-token
window, the official per-item scoring) on a random `tiny-qwen-vocab` model, with short memory / answer budgets
(32 / 16 tokens: a random model never stops early, and the budgets, not the length, set the per-chunk cost). The
data are official-layout eval files (eval_{N}.json, context / input / answers / num_docs / index) that this script
writes from its own invented paragraphs (~140 Qwen tokens each, as HotpotQA's are: the paper's 50 documents are ~7K
tokens); `--over-1m` adds N = 12800 and 25600 in the official over-1M layout (contexts as document numbers into a
HotpotQA-layout docs file, docs_path). Each length runs in its own process, so its peak resident memory
(ru_maxrss) is that length's alone; the engine's device memory is its preallocated KV pool (fixed by the config,
the same at every length) plus the model, reported with the live device bytes after the run.
Accuracy of a random model is not the point (it is ~0); the table shows the pipeline runs the paper's lengths at
a cost linear in N and memory that does not grow with N beyond the document itself.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
LENGTHS = (50, 100, 200, 400, 800, 1600, 3200, 6400)
OVER_1M = (12800, 25600)
SETS = ["model.preset=tiny-qwen-vocab", "model.dtype=float32", "engine.prefill_slots=2", "engine.max_slots=4",
        "engine.prefill_chunk=1024", "engine.page_size=64", "memagent.max_memory_tokens=32",
        "memagent.max_final_tokens=16", "baseline=false", "batch_items=2"]


def _words() -> list[str]:
    d = REPO / "memjax" / "assets" / "wordlists"
    return [w.strip() for f in ("nounlist.txt", "adjectivelist.txt", "verblist.txt")
            for w in (d / f).read_text().splitlines() if w.strip().isalpha()]


def paragraphs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n invented (title, text) paragraphs of ~100 words; title k is `Site {k}`, and its text names its keeper."""
    rng, words = np.random.default_rng(seed), _words()
    out = []
    for k in range(n):
        body = " ".join(rng.choice(words, 96))
        out.append((f"Site {k}", f"Site {k} is kept by {words[k % len(words)].title()} {k}. {body.capitalize()}."))
    return out


def write_data(root: Path, lengths: list[int], questions: int, over: list[int]) -> None:
    pool = paragraphs(max([*lengths, *over]) + questions)
    rng = np.random.default_rng(1)
    qs = [(k, f"Who keeps Site {k}?", [pool[k][1].split(" is kept by ")[1].split(".")[0]]) for k in range(questions)]
    for n in lengths:
        items = []
        for q, (k, question, ans) in enumerate(qs):
            ids = [k] + list(rng.choice(np.arange(questions, len(pool)), n - 1, replace=False))
            rng.shuffle(ids)
            ctx = "\n\n".join(f"Document {i + 1}:\n{pool[j][0]}\n{pool[j][1]}" for i, j in enumerate(ids))
            items.append({"context": ctx, "input": question, "answers": ans, "num_docs": n, "index": q})
        (root / f"eval_{n}.json").write_text(json.dumps(items), encoding="utf-8")
    if over:
        hotpot = [{"_id": f"site-{k}", "question": f"Who keeps Site {k}?", "answer": "x", "type": "bridge",
                   "level": "easy", "supporting_facts": [[t, 0]], "context": [[t, [text]]]}
                  for k, (t, text) in enumerate(pool)]
        (root / "docs.json").write_text(json.dumps(hotpot), encoding="utf-8")
        order = sorted(range(len(pool)), key=lambda j: f"{pool[j][0]}\n{pool[j][1]}")  # the sorted pool
        where = {j: i for i, j in enumerate(order)}
        for n in over:
            items = []
            for q, (k, question, ans) in enumerate(qs):
                ids = [k] + list(rng.choice(np.arange(questions, len(pool)), n - 1, replace=False))
                rng.shuffle(ids)
                items.append({"context": [where[int(j)] for j in ids], "input": question, "answers": ans,
                              "num_docs": n, "index": q})
            (root / f"eval_{n}.json").write_text(json.dumps(items), encoding="utf-8")


def child(root: Path, n: int, questions: int, out: Path) -> dict:
    import jax
    from rich.console import Console

    from memjax.cli.evaluate import evaluate
    from memjax.core.config import apply_overrides, load_config_file

    cfg = load_config_file(REPO / "configs" / "memagent" / "eval.py")
    sets = [*SETS, f"data_path={root}", f"num_docs={n}", f"num_samples={questions}", f"out_dir={out}",
            f"engine.kernels.compilation_cache_dir={root.parent / 'xla_cache'}"]  # one compile for all the lengths
    if (root / "docs.json").is_file():
        sets.append(f"docs_path={root / 'docs.json'}")
    cfg = apply_overrides(cfg, sets)
    t0 = time.perf_counter()
    res = evaluate(cfg, Console(quiet=True))
    dt = time.perf_counter() - t0
    use = resource.getrusage(resource.RUSAGE_SELF)
    row = res["rows"][0]
    dev = jax.devices()[0]
    stats = dev.memory_stats() or {}
    return {"num_docs": n, "mean_tokens": row["mean_tokens"], "questions": row["samples"],
            "chunks_per_question": row["conversations"] / max(1, row["trajectories"]) - 1,
            "sub_em": row["sub_em"], "seconds": dt, "seconds_per_question": dt / max(1, row["samples"]),
            "cpu_seconds_process": use.ru_utime + use.ru_stime,  # model build and compiles included
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "live_device_mib_after": sum(a.nbytes for a in jax.live_arrays()) / 2**20,
            "device_peak_mib": stats.get("peak_bytes_in_use", 0) / 2**20 or None, "device": dev.device_kind,
            "paper_tokens": row.get("paper_tokens")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    ap.add_argument("--over-1m", action="store_true", help="also N = 12800, 25600 in the official over-1M layout")
    ap.add_argument("--questions", type=int, default=2)
    ap.add_argument("--root", default="/tmp/memagent_length_table")
    ap.add_argument("--json", default="benchmarks/results/memagent_length_table_cpu.json")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    root = Path(a.root)
    if a.child:
        print(json.dumps(child(root / "data", a.child, a.questions, root / f"out_{a.child}")))
        return 0
    over = list(OVER_1M) if a.over_1m else []
    (root / "data").mkdir(parents=True, exist_ok=True)
    write_data(root / "data", a.lengths, a.questions, over)
    header = {"command": "python -m benchmarks.memagent.length_table " + " ".join(argv or sys.argv[1:]),
              "machine": platform.machine(), "cpus": os.cpu_count(), "settings": SETS}
    return run_lengths("benchmarks.memagent.length_table", [*a.lengths, *over], a.questions, root, Path(a.json),
                       header, lambda n, r: (f"N={n}: {r['mean_tokens']:.0f} tokens, {r['seconds']:.1f}s "
                                             f"({r['seconds_per_question']:.1f}s/question, "
                                             f"{r['cpu_seconds_process']:.0f} CPU-s), "
                                             f"peak RSS {r['peak_rss_mib']:.0f} MiB"))


def run_lengths(module: str, lengths, questions: int, root: Path, out: Path, header: dict, describe) -> int:
    """One child process per length (`python -m MODULE --child N`, its last stdout line one JSON row), a line
    per length (`describe(n, row)`) and the JSON file {**header, "rows": [...]} rewritten after each length, so
    an interrupted sweep keeps what it measured. Returns the first failing child's exit code, else 0."""
    rows = []
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    for n in lengths:
        cmd = [sys.executable, "-m", module, "--child", str(n), "--questions", str(questions), "--root", str(root)]
        p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr[-3000:], file=sys.stderr)
            return p.returncode
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(describe(n, rows[-1]), flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({**header, "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
