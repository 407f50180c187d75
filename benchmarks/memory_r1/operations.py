"""Memory-R1's claim in miniature: the RL-trained memory manager against fixed policies (ADD-only, always-UPDATE,
Mem0's subject-match rule) and its own warm start, on the same held-out samples of the tiny Memory-R1 task.

    python -m benchmarks.memory_r1.operations [--seeds 0 1 2] [--rewards fact bank] [--steps 12] [--prompts 16]
        [--heldout 128] [--eval-samples 4] [--root /tmp/r1ops] [--json benchmarks/results/memory_r1_operations_cpu.json]
        [--png benchmarks/results/memory_r1_operations_cpu.png]

RL: `memjax.cli.train.train` on configs/memory_r1/tiny.py (GRPO, shipped noisy-teacher warm start) with `steps`,
`prompts_per_step`, `agent.heldout_size`, `agent.eval_samples`, `seed` and `agent.reward` set (two arms: "fact",
the task's reward, and "bank", every question about the bank), and one micro-batch per mini-batch
(update.micro_rows = update.pad_tokens = 32 as the CI learning test; the numbers do not depend on it). Fixed
policies: memjax/systems/memory_r1/tiny/fixed.py engines through the same `evaluate_r1` (workflow, op grammar, apply_mem0,
reader) on the same held-out samples (seed 12, the first `heldout` of them). Measures, greedy and mean of
`eval_samples` temperature-1 answers: `em` = the task's reward (exact match of the question about the fact's
person: what RL maximises) and `em_bank` = the reader's accuracy on every question about the bank after the op
(the other people too: an op that destroys another person's record loses here). Per policy, the greedy op
chosen per case (kinds and, for the RL policies, the literal outputs; from their saved weights, `out_dir/hf`), and the warm start's op kinds among 8
temperature-1 samples per held-out sample (what a GRPO group can find).
Writes the JSON after every run (partial results survive a stop) and the plot at the end.
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
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
CONFIG = ROOT / "configs" / "memory_r1" / "tiny.py"
FIXED = ("add_only", "none_only", "update_0", "update_subject")
MEASURES = ("em", "em_sampled", "em_bank", "em_bank_sampled")
REWARDS = ("fact", "bank")  # the RL arms: memory_r1_tiny's agent.reward


def rl_config(out_dir: Path, *, seed: int, steps: int, prompts: int, heldout: int, eval_samples: int,
              reward: str = "fact", ablation: str = "none"):
    """configs/memory_r1/tiny.py with the study's (or the CI test's) sizes."""
    from memjax.core.config import load_config_file

    cfg = load_config_file(CONFIG)
    agent = dataclasses.replace(cfg.agent, heldout_size=heldout, eval_samples=eval_samples, reward=reward)
    update = dataclasses.replace(cfg.update, micro_rows=32, pad_tokens=32)  # rows are <= 29 tokens
    return dataclasses.replace(cfg, agent=agent, update=update, seed=seed, steps=steps, prompts_per_step=prompts,
                               eval_every=0, checkpoint_every=steps, out_dir=str(out_dir), ablation=ablation)


def op_kind(output: str, gold_op: str) -> str:
    """The greedy op as a kind: add / none / update / delete (right id), update_other / delete_other, invalid."""
    w = output.split()
    if w in (["add"], ["none"]):
        return w[0]
    if len(w) == 2 and w[0] in ("update", "delete") and w[1].isdigit():
        g = gold_op.split()
        return w[0] if len(g) == 2 and g[1] == w[1] else f"{w[0]}_other"
    return "invalid"


def op_table(engine, tok, samples, *, sampled: int = 0, literal: bool = False) -> dict[str, dict[str, float]]:
    """Per case, the fraction of ops of each kind (`op_kind`; `literal`: each output text) on `samples`: greedy,
    or `sampled` temperature-1 ops per sample."""
    from memjax.agents import run_workflow
    from memjax.systems.memory_r1.tiny.task import TinyR1Workflow

    res = run_workflow(engine, TinyR1Workflow(tok, temperature=1.0 if sampled else 0.0), samples,
                       group_size=sampled or 1, seed=12345, record=False)
    by_case: dict[str, Counter] = {}
    for t in res.traces:
        by_case.setdefault(t["case"], Counter())[t["output"] if literal else op_kind(t["output"], t["op"])] += 1
    return {c: {k: n / sum(cnt.values()) for k, n in sorted(cnt.items())} for c, cnt in sorted(by_case.items())}


def scalars(ev: dict) -> dict:
    return {k: v for k, v in ev.items() if isinstance(v, (int, float)) and k != "step"}


def fixed_policies(heldout: int, eval_samples: int) -> dict[str, dict]:
    """Every fixed policy through evaluate_r1 on the held-out samples (+ its op table), and the warm start's op
    tables, greedy and of 8 temperature-1 samples each (its evaluation is every RL run's `before`)."""
    from memjax.engine import Engine
    from memjax.systems.memory_r1.tiny.fixed import FixedManagerEngine
    from memjax.systems.memory_r1.tiny.task import (
        HELDOUT_SEED,
        R1TaskConfig,
        evaluate_r1,
        make_r1_split,
        r1_tokenizer,
    )
    from memjax.systems.memory_r1.tiny.warmstart import load_r1_warmstart
    from memjax.tiny.model import engine_config

    tok, samples = r1_tokenizer(), make_r1_split(R1TaskConfig(), HELDOUT_SEED, heldout)
    out = {}
    for name in FIXED:
        eng = FixedManagerEngine(tok, name)
        out[name] = {**scalars(evaluate_r1(eng, tok, samples, sampled=eval_samples)), "ops": op_table(eng, tok, samples)}
    warm = Engine(load_r1_warmstart(log=lambda *_: None)[0], engine_config())
    out["warm_start_ops"] = op_table(warm, tok, samples)
    out["warm_start_ops_sampled"] = op_table(warm, tok, samples, sampled=8)  # what a GRPO group of 8 explores
    return out


def rl_run(seed: int, steps: int, prompts: int, heldout: int, eval_samples: int, root: Path,
           reward: str = "fact", ablation: str = "none") -> dict:
    """One GRPO run from the warm start; before/after evaluations, the trained policy's op table, per-step reward."""
    from memjax.checkpoint import load_hf
    from memjax.cli.train import train
    from memjax.engine import Engine
    from memjax.systems.memory_r1.tiny.task import (
        HELDOUT_SEED,
        R1TaskConfig,
        make_r1_split,
        r1_tokenizer,
    )
    from memjax.tiny.model import engine_config

    out = root / (f"{reward}_s{seed}" if ablation == "none" else f"{reward}_{ablation}_s{seed}")
    t0 = time.perf_counter()
    res = train(rl_config(out, seed=seed, steps=steps, prompts=prompts, heldout=heldout, eval_samples=eval_samples,
                          reward=reward, ablation=ablation))
    wall = time.perf_counter() - t0
    tok, samples = r1_tokenizer(), make_r1_split(R1TaskConfig(), HELDOUT_SEED, heldout)
    engine = Engine(load_hf(out / "hf"), engine_config())
    ops, texts = op_table(engine, tok, samples), op_table(engine, tok, samples, literal=True)
    return {"seed": seed, "reward_kind": reward, "ablation": ablation, "before": scalars(res["before"]), "after": scalars(res["after"]),
            "ops_after": ops, "outputs_after": texts,
            "reward": [h["reward"] for h in res["history"]], "wall_s": wall}


def summary(runs: list[dict], fixed: dict[str, dict]) -> dict[str, dict]:
    """Per policy, each measure: value (fixed / warm start) or mean, sample std and per-seed values (RL arms)."""
    rows: dict[str, dict] = {}
    if runs:
        rows["warm_start"] = {m: runs[0]["before"][m] for m in MEASURES}
    for reward in REWARDS:
        arm = [r for r in runs if r["reward_kind"] == reward]
        if not arm:
            continue
        per = {m: [r["after"][m] for r in arm] for m in MEASURES}
        row = rows[f"rl_{reward}_reward"] = {m: statistics.mean(v) for m, v in per.items()}
        row.update({f"{m}_std": statistics.stdev(v) if len(v) > 1 else 0.0 for m, v in per.items()})
        row.update({f"{m}_seeds": v for m, v in per.items()})
    for name in FIXED:
        if name in fixed:
            rows[name] = {m: fixed[name][m] for m in MEASURES}
    return rows


def plot(result: dict, png: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["summary"]
    names = list(rows)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (m, title) in zip(axes, (("em", "question about the fact's person (the reward)"),
                                     ("em_bank", "every question about the bank"))):
        for j, (suffix, label, shade) in enumerate((("", "greedy", 1.0), ("_sampled", "sampled (T=1)", 0.5))):
            x = [i + (j - 0.5) * 0.38 for i in range(len(names))]
            vals = [rows[n][m + suffix] for n in names]
            errs = [rows[n].get(f"{m + suffix}_std", 0.0) for n in names]
            colours = ["tab:red" if n == "rl_fact_reward" else "tab:orange" if n == "rl_bank_reward" else "tab:grey" if n == "warm_start" else "tab:blue" for n in names]
            ax.bar(x, vals, 0.38, yerr=errs, color=colours, alpha=shade, label=label, capsize=3)
            for i, n in enumerate(names):
                for v in rows[n].get(f"{m + suffix}_seeds", []):
                    ax.plot(x[i], v, "k.", ms=4)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("held-out exact match")
    axes[0].legend(fontsize=8, loc="lower left")
    a = result["args"]
    fig.suptitle(f"tiny Memory-R1 manager: GRPO, reward fact / bank ({a['steps']} steps x {a['prompts']} prompts x 8, seeds "
                 f"{a['seeds']}) vs fixed policies, held-out {a['heldout']}", fontsize=10)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return png


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory_r1.operations", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--rewards", nargs="+", choices=REWARDS, default=list(REWARDS))
    ap.add_argument("--heldout", type=int, default=128)
    ap.add_argument("--eval-samples", type=int, default=4)
    ap.add_argument("--root", type=Path, default=Path("/tmp/r1ops"))
    ap.add_argument("--json", type=Path, default=RESULTS / "memory_r1_operations_cpu.json")
    ap.add_argument("--png", type=Path, default=RESULTS / "memory_r1_operations_cpu.png")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    result = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "command": "python -m benchmarks.memory_r1.operations " + " ".join(argv if argv is not None else sys.argv[1:]),
              "host": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "fixed": fixed_policies(args.heldout, args.eval_samples), "runs": []}

    def write():
        result["summary"] = summary(result["runs"], result["fixed"])
        result["wall_s"] = time.perf_counter() - t0
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")

    write()
    for reward in args.rewards:
        for seed in args.seeds:
            result["runs"].append(rl_run(seed, args.steps, args.prompts, args.heldout, args.eval_samples, args.root,
                                         reward=reward))
            write()
            print(f"reward {reward} seed {seed}: {result['runs'][-1]['after']}", flush=True)
    print(f"wrote {args.json} and {plot(result, args.png)} ({time.perf_counter() - t0:.0f} s)")
    for name, row in result["summary"].items():
        print(f"{name:15s} " + "  ".join(f"{m} {row[m]:.3f}" for m in MEASURES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
