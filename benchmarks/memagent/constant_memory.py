"""MemAgent's host memory vs document length up to the over-1M setting (3.5M+ tokens): peak RSS per length.

    python -m benchmarks.memagent.constant_memory [--lengths 50 400 1600 6400 12800 25600] [--questions 1]
        [--root /tmp/memagent_constant_memory] [--json benchmarks/results/memagent_constant_memory_cpu.json]

What it runs: the MemAgent evaluation exactly as benchmarks/memagent/length_table.py does (configs/memagent/eval.py,
the same settings and the same official-layout files: eval_{N}.json with text contexts up to N = 6400, document
numbers into a HotpotQA-layout docs file for N >= 12800), one process per length, except that the model's forward is
replaced by a stand-in engine answering every request with `max_tokens` fixed ids at once: data loading, the
document's tokenisation, chunking, every prompt, the driver, traces and the result files are the real code; no
model computes. On the shared 2-core machine a real tiny model costs ~1.5-3 CPU-s a chunk (BUILD.md issue 49), ~1,100
chunks at N = 25600, which did not fit; the engine's own memory is its KV pool, preallocated from the config (the
same at every length), measured with the real model by benchmarks/memagent/length_table.py.
Reported per length: document tokens, chunks, peak RSS (ru_maxrss of the process), RSS once the model and data are
loaded (before the first question), CPU seconds. Flat = the peak does not grow with N beyond the document itself
(its text and 4 bytes a token of ids).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

from benchmarks.memagent.length_table import SETS, run_lengths, write_data

REPO = Path(__file__).resolve().parents[2]
LENGTHS = (50, 400, 1600, 6400, 12800, 25600)


def _rss_mib() -> float:
    for line in open("/proc/self/status", encoding="ascii"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class StandInEngine:
    """The engine surface run_workflow uses; every request is answered at once with `max_tokens` ids (no model)."""

    def __init__(self, model, config, devices=None):
        from memjax.core.tokenizer import Tokenizer

        self.config, self.stats, self.pending, self.next_id = config, {}, [], 0
        self.fill = Tokenizer.default().encode(" memo")[0]
        self.loaded_rss_mib = _rss_mib()

    def submit(self, prompt, params, *, parent=None, retain=False):
        if len(prompt) + params.max_tokens > self.config.window:
            raise ValueError(f"prompt of {len(prompt)} tokens does not fit the window {self.config.window}")
        rid, self.next_id = self.next_id, self.next_id + 1
        self.pending.append((rid, len(prompt), params.max_tokens))
        return rid

    def step(self, *a, **k):
        from memjax.engine import Completion

        out = [Completion([self.fill] * m, [0.0] * m, "length", prompt_len=n, request_id=r) for r, n, m in self.pending]
        self.pending = []
        return out

    def release(self, completion):
        pass

    def abort(self, rids=None):
        self.pending = []


def child(root: Path, n: int, questions: int, out: Path) -> dict:
    from rich.console import Console

    import memjax.engine
    from memjax.cli.evaluate import evaluate
    from memjax.core.config import apply_overrides, load_config_file

    made: list[StandInEngine] = []
    memjax.engine.Engine = lambda *a, **k: made.append(StandInEngine(*a, **k)) or made[-1]  # read at call time
    cfg = load_config_file(REPO / "configs" / "memagent" / "eval.py")
    sets = [*SETS, f"data_path={root}", f"num_docs={n}", f"num_samples={questions}", f"out_dir={out}"]
    if (root / "docs.json").is_file():
        sets.append(f"docs_path={root / 'docs.json'}")
    cfg = apply_overrides(cfg, sets)
    t0 = time.perf_counter()
    res = evaluate(cfg, Console(quiet=True))
    use = resource.getrusage(resource.RUSAGE_SELF)
    row = res["rows"][0]
    traces = [json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines()]
    return {"num_docs": n, "doc_tokens": row["mean_tokens"], "questions": row["samples"],
            "chunks_per_question": sum(t["chunks"] for t in traces) / len(traces),
            "peak_rss_mib": use.ru_maxrss / 1024, "rss_loaded_mib": made[0].loaded_rss_mib,
            "rss_after_mib": _rss_mib(), "cpu_seconds_process": use.ru_utime + use.ru_stime,
            "seconds": time.perf_counter() - t0, "paper_tokens": row.get("paper_tokens")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    ap.add_argument("--questions", type=int, default=1)
    ap.add_argument("--root", default="/tmp/memagent_constant_memory")
    ap.add_argument("--json", default="benchmarks/results/memagent_constant_memory_cpu.json")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    root = Path(a.root)
    if a.child:
        print(json.dumps(child(root / "data", a.child, a.questions, root / f"out_{a.child}")))
        return 0
    (root / "data").mkdir(parents=True, exist_ok=True)
    write_data(root / "data", [n for n in a.lengths if n <= 10_000], a.questions, [n for n in a.lengths if n > 10_000])
    header = {"command": "python -m benchmarks.memagent.constant_memory " + " ".join(
        argv if argv is not None else sys.argv[1:]), "machine": platform.machine(), "cpus": os.cpu_count(),
        "device": "cpu", "engine": "stand-in (no model forward)", "settings": SETS}
    return run_lengths("benchmarks.memagent.constant_memory", a.lengths, a.questions, root, Path(a.json), header,
                       lambda n, r: (f"N={n}: {r['doc_tokens']:,.0f} tokens, {r['chunks_per_question']:.0f} chunks, "
                                     f"peak RSS {r['peak_rss_mib']:.0f} MiB (loaded {r['rss_loaded_mib']:.0f}), "
                                     f"{r['cpu_seconds_process']:.1f} CPU-s"))


if __name__ == "__main__":
    sys.exit(main())
