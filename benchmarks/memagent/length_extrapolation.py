"""MemAgent's length extrapolation in miniature: trained on 3-chunk documents, asked at up to 96 chunks.

    python -m benchmarks.memagent.length_extrapolation [--seeds 0 1 2] [--steps 10] [--prompts 32]
        [--lengths 3 6 12 24 48 96] [--questions 32] [--baseline-max-chunks 24] [--baseline DIR]
        [--root /tmp/memagent_length] [--replot] [--memory-json PATH]
        [--json benchmarks/results/memagent_length_extrapolation_cpu.json]
        [--png benchmarks/results/memagent_length_extrapolation_cpu.png]

The paper (MemAgent, Fig. 1 / Table 2): an RL-trained memory agent trained on 8K-token contexts keeps its
accuracy to 3.5M tokens while full-context models collapse. Here: the tiny task (memjax/systems/memagent/tiny/task.py, 3 facts
per chunk; only the distractors grow with the document) and its shipped warm start.
Policies, each evaluated greedily through the MemAgent workflow (memjax/systems/memagent/tiny/agent.py `evaluate`) at every
length in `lengths` on the same held-out questions (HELDOUT_SEED: `questions` one-hop questions, indices
0..q-1, and `questions` two-hop ones, indices q..2q-1; a question keeps its key and answer at every length):
- `warm_start`: the shipped supervised warm start (deterministic: evaluated once);
- `rl`: `memjax.cli.train.train` on configs/tiny.py (Multi-Conv GRPO at 3 chunks) with `steps`,
  `prompts_per_step`, `seed` set and the held-out evaluation inside training cut to 32 questions, no sampled
  answers (the policy is evaluated here, from its `out_dir/hf`), one run per seed;
- `shuffled`: the same with `ablation=shuffle_rewards` (rewards permuted within the batch: no signal);
- `full_context`: memjax/systems/memagent/tiny/full_context.py, the same model size reading the whole document in one prompt
  (the shipped baseline, supervised at 3 chunks), at the lengths <= `baseline_max_chunks`: its cost per
  question grows with the square of the length (a 96-chunk prompt is 1,162 tokens), and beyond 24 chunks it
  no longer fits this study's CPU budget; the JSON names the lengths it skipped.
Accuracy is the MemAgent reward (last \\boxed{}, exact match), per hop and their mean; every MemAgent row also
carries `memory` (`retention`: where in the memory trace answers are lost). Summary per policy and
length: mean, std (ddof=1), min and max over seeds. Writes the JSON after every policy (partial results
survive a stop) and the plot (accuracy vs chunks, one panel per hop) at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
CONFIG = ROOT / "configs" / "tiny.py"
MEASURES = ("accuracy", "accuracy_hop1", "accuracy_hop2")
ARMS = {"rl": "none", "shuffled": "shuffle_rewards"}  # policy name -> memjax.train ablation


def heldout(num_chunks: int, questions: int) -> list[dict]:
    """`questions` one-hop then `questions` two-hop held-out samples with documents of `num_chunks` chunks."""
    from memjax.systems.memagent.tiny.task import HELDOUT_SEED, TaskConfig, make_split

    one = make_split(TaskConfig(num_chunks=num_chunks, multihop_frac=0.0), HELDOUT_SEED, questions)
    two = make_split(TaskConfig(num_chunks=num_chunks, multihop_frac=1.0), HELDOUT_SEED, questions, start=questions)
    return one + two


def _row(ev: dict) -> dict:
    row = {k: ev[k] for k in ("accuracy_hop1", "accuracy_hop2")}
    row["accuracy"] = (row["accuracy_hop1"] + row["accuracy_hop2"]) / 2
    return row


def retention(samples: list[dict], traces: list[dict], facts_per_chunk: int = 3) -> dict[str, float]:
    """Where answers are lost, from the memory after every chunk (MemAgent traces, in sample order). One-hop:
    `hop1_written` (the memory after K's chunk holds `K in P .`), `hop1_kept_final` (the last memory holds it).
    Two-hop: `hop2_written` (after K's chunk the memory holds `K in C .`), `hop2_kept_to_second` (it is still
    there just before the chunk of `C in P .`), `hop2_other_before_second` (it is there together with another
    fact: the 9-token memory holds two facts, so a distractor kept fills it), `hop2_second_written` (it was
    kept and the memory after that chunk holds `C in P .` too), `hop2_both_final` (the last memory holds both)."""
    out: dict[str, list[float]] = {}
    for s, t in zip(samples, traces):
        words = s["context"].split()
        facts = [" ".join(words[i:i + 4]) for i in range(0, len(words), 4)]
        key = s["query"].split()[2]
        i1 = next(i for i, f in enumerate(facts) if f.split()[0] == key)
        mem = [f" {m} " for m in t["memories"]]
        first, c1 = f" {facts[i1]} ", i1 // facts_per_chunk
        if s["hops"] == 1:
            out.setdefault("hop1_written", []).append(float(first in mem[c1]))
            out.setdefault("hop1_kept_final", []).append(float(first in mem[-1]))
            continue
        c = facts[i1].split()[2]
        i2 = next(i for i, f in enumerate(facts) if f.split()[0] == c)
        second, c2 = f" {facts[i2]} ", i2 // facts_per_chunk
        before = t["memories"][c2 - 1].split(" . ")
        out.setdefault("hop2_written", []).append(float(first in mem[c1]))
        out.setdefault("hop2_kept_to_second", []).append(float(first in mem[c2 - 1]))
        out.setdefault("hop2_other_before_second", []).append(float(first in mem[c2 - 1] and len(before) > 1))
        out.setdefault("hop2_second_written", []).append(float(first in mem[c2 - 1] and second in mem[c2]))
        out.setdefault("hop2_both_final", []).append(float(first in mem[-1] and second in mem[-1]))
    return {k: statistics.fmean(v) for k, v in out.items()}


def memagent_engine(model, questions: int):
    """One engine for every policy (Engine.update_weights swaps them in: compiled once)."""
    from memjax.engine import Engine
    from memjax.tiny.model import engine_config

    return Engine(model, engine_config(max_slots=min(128, 2 * questions)))


def eval_memagent(engine, model, lengths: list[int], questions: int) -> dict[str, dict]:
    """Greedy MemAgent accuracy of `model` at every length: {str(num_chunks): {accuracy, hop1, hop2, seconds}}."""
    from memjax.systems.memagent.tiny.agent import evaluate
    from memjax.systems.memagent.tiny.task import WORDS, TaskConfig, TinyTokenizer

    engine.update_weights(model)
    tok, out = TinyTokenizer(WORDS), {}
    for n in lengths:
        t0 = time.perf_counter()
        samples = heldout(n, questions)
        ev = evaluate(engine, tok, TaskConfig(num_chunks=n), samples)
        out[str(n)] = {**_row(ev), "memory": retention(samples, ev["traces"]), "seconds": time.perf_counter() - t0}
    return out


def eval_full_context(model, lengths: list[int], questions: int, max_chunks: int) -> dict[str, dict]:
    from memjax.systems.memagent.tiny import full_context
    from memjax.systems.memagent.tiny.task import TaskConfig

    asked = [n for n in lengths if n <= max_chunks]
    out: dict = {}
    if not asked:
        return out
    engine = full_context.make_engine(model, TaskConfig(num_chunks=max(asked)), max_slots=min(64, 2 * questions))
    for n in asked:
        t0 = time.perf_counter()
        ev = full_context.evaluate(model, TaskConfig(num_chunks=n), heldout(n, questions), engine=engine)
        out[str(n)] = {**_row(ev), "seconds": time.perf_counter() - t0}
    return out


def rl_config(out_dir: Path, *, seed: int, steps: int, prompts: int, ablation: str = "none"):
    """configs/tiny.py with the study's (or the CI test's) sizes."""
    from memjax.core.config import load_config_file

    cfg = load_config_file(CONFIG)
    agent = dataclasses.replace(cfg.agent, heldout_size=32, eval_samples=0)
    return dataclasses.replace(cfg, agent=agent, seed=seed, steps=steps, prompts_per_step=prompts, eval_every=0,
                               checkpoint_every=steps, out_dir=str(out_dir), ablation=ablation)


def train_policy(out_dir: Path, **kw):
    """One RL run (memjax.cli.train.train); its final policy (out_dir/hf) and the run's seconds."""
    from memjax.checkpoint import load_hf
    from memjax.cli.train import train

    t0 = time.perf_counter()
    train(rl_config(out_dir, **kw))
    return load_hf(out_dir / "hf"), time.perf_counter() - t0


def summarize(result: dict) -> dict:
    """{policy: {num_chunks: {measure: {mean, std, min, max, values}}}} over seeds (one value: the policy is
    deterministic or was run once)."""
    out: dict = {}
    for name, runs in result["policies"].items():
        out[name] = {}
        lengths = sorted({int(n) for r in runs.values() for n in r}, key=int)
        for n in map(str, lengths):
            out[name][n] = {}
            for m in MEASURES:
                v = [r[n][m] for r in runs.values() if n in r]
                out[name][n][m] = {"mean": statistics.fmean(v), "std": statistics.stdev(v) if len(v) > 1 else 0.0,
                                   "min": min(v), "max": max(v), "values": v}
    return out


STYLE = {"warm_start": ("tab:gray", "s", "warm start (SFT)"), "rl": ("tab:blue", "o", "RL (GRPO at 3 chunks)"),
         "shuffled": ("tab:red", "v", "RL, shuffled rewards"),
         "full_context": ("tab:green", "D", "full context, same size")}


def plot(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summ = result["summary"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    for ax, m, title in zip(axes, MEASURES, ("mean of 1- and 2-hop", "1-hop", "2-hop")):
        for name, (color, marker, label) in STYLE.items():
            if name not in summ or not summ[name]:
                continue
            xs = sorted(summ[name], key=int)
            mean = [summ[name][n][m]["mean"] for n in xs]
            std = [summ[name][n][m]["std"] for n in xs]
            ax.errorbar([int(n) for n in xs], mean, yerr=std, color=color, marker=marker, capsize=3, label=label)
        ax.axvline(3, color="k", lw=0.8, ls=":")
        ax.axhline(1 / 16, color="k", lw=0.8, ls="--", alpha=0.5, label="chance (1 of 16 places)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(result["settings"]["lengths"], [str(n) for n in result["settings"]["lengths"]])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("document length (chunks of 3 facts; trained at 3)")
        ax.set_title(f"held-out greedy accuracy, {title}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (mean ± std over seeds)")
    axes[0].legend(fontsize=8, loc="lower left")
    s = result["settings"]
    fig.suptitle(f"tiny MemAgent length extrapolation: {len(s['seeds'])} seeds, {s['steps']} RL steps x "
                 f"{s['prompts']} questions x G 8, {s['questions']} + {s['questions']} held-out questions per length")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def memory_study(args) -> int:
    """--memory-json: the memory measures (`retention`) of the warm start and of the RL policies of an earlier
    study (their saved `hf` directories), at every length; the accuracies repeat the study's (greedy)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from memjax.checkpoint import load_hf
    from memjax.systems.memagent.tiny.warmstart import load_warmstart

    warm, _ = load_warmstart(log=print)
    engine = memagent_engine(warm, args.questions)
    policies = {"warm_start": warm}
    for s in args.seeds:
        d = Path(args.root) / f"rl_seed{s}" / "hf"
        if (d / "config.json").is_file():
            policies[f"rl_seed{s}"] = load_hf(d)
    out = {"command": "python -m benchmarks.memagent.length_extrapolation " + " ".join(sys.argv[1:]),
           "settings": {"lengths": args.lengths, "questions": args.questions, "root": args.root}, "policies": {}}
    for name, model in policies.items():
        out["policies"][name] = eval_memagent(engine, model, args.lengths, args.questions)
        Path(args.memory_json).write_text(json.dumps(out, indent=1) + "\n")
        print(name, "  ".join(f"{n}: " + " ".join(f"{k} {v:.2f}" for k, v in r["memory"].items())
                              for n, r in out["policies"][name].items()), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--lengths", type=int, nargs="+", default=[3, 6, 12, 24, 48, 96])
    ap.add_argument("--questions", type=int, default=32, help="held-out questions per hop and length")
    ap.add_argument("--baseline-max-chunks", type=int, default=24)
    ap.add_argument("--baseline", default=None, help="full-context model directory (default: the shipped one)")
    ap.add_argument("--root", default="/tmp/memagent_length")
    ap.add_argument("--json", default=str(RESULTS / "memagent_length_extrapolation_cpu.json"))
    ap.add_argument("--png", default=str(RESULTS / "memagent_length_extrapolation_cpu.png"))
    ap.add_argument("--replot", action="store_true", help="only redraw the PNG from the JSON")
    ap.add_argument("--memory-json", default=None,
                    help="only re-evaluate the warm start and the RL policies a study left under --root (<root>/"
                         "rl_seed<S>/hf) and write their memory measures (retention) here; no training")
    args = ap.parse_args(argv)
    if args.replot:
        plot(json.loads(Path(args.json).read_text()), Path(args.png))
        return 0
    if args.memory_json:
        return memory_study(args)
    if min(args.lengths) < 2 or args.steps < 1 or args.questions < 1:
        ap.error("lengths must be >= 2, steps and questions >= 1")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    # the RL runs and engines compile the same programs again and again: a persistent cache under --root
    jax.config.update("jax_compilation_cache_dir", str(Path(args.root) / "jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    from memjax.systems.memagent.tiny.full_context import load_baseline
    from memjax.systems.memagent.tiny.warmstart import load_warmstart

    t0 = time.perf_counter()
    settings = {k: getattr(args, k) for k in ("seeds", "steps", "prompts", "lengths", "questions",
                                              "baseline_max_chunks")}
    result = {"machine": platform.machine(), "cpus": os.cpu_count(), "config": "configs/tiny.py",
              "command": "python -m benchmarks.memagent.length_extrapolation " + " ".join(argv or sys.argv[1:]),
              "settings": settings, "policies": {}, "train_seconds": {}}

    def save(name: str, key: str, row: dict) -> None:
        result["policies"].setdefault(name, {})[key] = row
        result["summary"] = summarize(result)
        result["seconds"] = time.perf_counter() - t0
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"{name:12s} {key:>4s}: " + "  ".join(
            f"{n}:{r['accuracy_hop1']:.2f}/{r['accuracy_hop2']:.2f}" for n, r in row.items())
            + f"   (1-hop/2-hop; {time.perf_counter() - t0:.0f} s)", flush=True)

    warm, _ = load_warmstart(log=print)
    engine = memagent_engine(warm, args.questions)
    save("warm_start", "-", eval_memagent(engine, warm, args.lengths, args.questions))
    for s in args.seeds:
        for name, ablation in ARMS.items():
            model, secs = train_policy(Path(args.root) / f"{name}_seed{s}", seed=s, steps=args.steps,
                                       prompts=args.prompts, ablation=ablation)
            result["train_seconds"][f"{name}_seed{s}"] = secs
            save(name, str(s), eval_memagent(engine, model, args.lengths, args.questions))
    base, info = load_baseline(args.baseline, log=print)
    result["full_context_info"] = {k: info.get(k) for k in ("steps", "dev_accuracy", "seed", "init")}
    result["full_context_skipped"] = [n for n in args.lengths if n > args.baseline_max_chunks]
    save("full_context", "-", eval_full_context(base, args.lengths, args.questions, args.baseline_max_chunks))
    for name, rows in result["summary"].items():
        print(f"{name:12s} " + "  ".join(f"{n}: {r['accuracy']['mean']:.3f}±{r['accuracy']['std']:.3f}"
                                         for n, r in rows.items()))
    plot(result, Path(args.png))
    print(f"wrote {args.json} and {args.png} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
