"""Memory-R1's answer agent with and without memory distillation, in miniature: the tiny answer-agent task
(memjax/systems/memory_r1/tiny/answer_task.py), both prompt variants RL-trained from the same warm start with the same budget,
evaluated on the same held-out questions at several distractor counts.

    python -m benchmarks.memory_r1.distill [--seeds 0 1 2] [--steps 100] [--lr 1e-3] [--prompts 16] [--heldout 128]
        [--distractors 1 3 5 7] [--eval-samples 4] [--root /tmp/r1distill]
        [--json benchmarks/results/memory_r1_distill_cpu.json] [--png benchmarks/results/memory_r1_distill_cpu.png]

RL: `memjax.cli.train.train` on configs/memory_r1/tiny_answer.py (GRPO, group 8, shipped warm start) with
`agent.distill` true / false, `steps`, `prompts_per_step`, `agent.heldout_size`, `agent.eval_distractors`,
`agent.eval_samples` and `seed` set; one micro-batch per mini-batch (update.micro_rows = 64, pad_tokens = 48).
Both arms see the same training questions (the stream depends on the seed only) and the same number of policy
samples per step. Measures per distractor count: greedy exact match and the mean over `eval_samples`
temperature-1 answers, before (the warm start with that prompt) and after; for distillation the greedy
selection statistics (is the relevant record selected, does the answer come from the selection, EM given a right
/ wrong selection). Writes the JSON after every run (partial results survive a stop; `--resume` keeps them and runs only the missing seeds) and the plot at the end.
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
CONFIG = ROOT / "configs" / "memory_r1" / "tiny_answer.py"
VARIANTS = {"plain": False, "distill": True}


def rl_config(out_dir: Path, *, distill: bool, seed: int, steps: int, prompts: int, heldout: int,
              distractors: tuple[int, ...], eval_samples: int, lr: float | None = None):
    """configs/memory_r1/tiny_answer.py with the study's (or the CI test's) sizes (`lr`: None = the config's)."""
    from memjax.core.config import load_config_file

    cfg = load_config_file(CONFIG)
    agent = dataclasses.replace(cfg.agent, distill=distill, heldout_size=heldout, eval_samples=eval_samples,
                                eval_distractors=tuple(distractors))
    optim = dataclasses.replace(cfg.optim, lr=lr) if lr else cfg.optim
    return dataclasses.replace(cfg, agent=agent, optim=optim, seed=seed, steps=steps, prompts_per_step=prompts, eval_every=0,
                               checkpoint_every=steps, out_dir=str(out_dir))


def scalars(ev: dict) -> dict:
    return {k: v for k, v in ev.items() if isinstance(v, (int, float)) and k != "step"}


def rl_run(variant: str, seed: int, steps: int, prompts: int, heldout: int, distractors: tuple[int, ...],
           eval_samples: int, root: Path, lr: float | None = None) -> dict:
    """One GRPO run of one prompt variant from the warm start: before / after evaluations, per-step reward."""
    from memjax.cli.train import train

    t0 = time.perf_counter()
    res = train(rl_config(root / f"{variant}_s{seed}", distill=VARIANTS[variant], seed=seed, steps=steps,
                          prompts=prompts, heldout=heldout, distractors=distractors, eval_samples=eval_samples, lr=lr))
    return {"variant": variant, "seed": seed, "before": scalars(res["before"]), "after": scalars(res["after"]),
            "traces_after": res["after"].get("traces", []), "reward": [h["reward"] for h in res["history"]],
            "wall_s": time.perf_counter() - t0}


def summary(runs: list[dict], distractors: tuple[int, ...]) -> dict[str, dict]:
    """Per variant: before (warm start) and after (mean, sample std, seeds) of every measure."""
    out: dict[str, dict] = {}
    for v in VARIANTS:
        arm = [r for r in runs if r["variant"] == v]
        if not arm:
            continue
        keys = [k for k in arm[0]["after"] if all(k in r["after"] for r in arm)]
        row = {"before": {k: arm[0]["before"][k] for k in keys if k in arm[0]["before"]}, "after": {}}
        for k in keys:
            vals = [r["after"][k] for r in arm]
            ok = [v for v in vals if v == v]  # NaN (e.g. em_given_relevant with no relevant selection) left out
            row["after"][k] = {"mean": statistics.mean(ok) if ok else float("nan"),
                               "std": statistics.stdev(ok) if len(ok) > 1 else 0.0, "seeds": vals}
        out[v] = row
    if set(VARIANTS) <= set(out):
        out["distill_minus_plain"] = {
            k: {"mean": statistics.mean(d), "min": min(d), "max": max(d), "seeds": d}
            for k in [f"em{s}_d{n}" for s in ("", "_sampled") for n in distractors] + ["em", "em_sampled"]
            if k in out["plain"]["after"] and k in out["distill"]["after"]
            for d in [[a - b for a, b in zip(out["distill"]["after"][k]["seeds"], out["plain"]["after"][k]["seeds"])]]}
    return out


def plot(result: dict, png: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, ds = result["summary"], result["args"]["distractors"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    colours = {"plain": "tab:blue", "distill": "tab:red"}
    for ax, (suffix, title) in zip(axes, (("", "greedy"), ("_sampled", "sampled (T=1)"))):
        for v in VARIANTS:
            if v not in rows:
                continue
            ks = [f"em{suffix}_d{n}" for n in ds]
            ax.plot(ds, [rows[v]["before"][k] for k in ks], "--", color=colours[v], alpha=0.6,
                    label=f"{v}: warm start")
            mean = [rows[v]["after"][k]["mean"] for k in ks]
            std = [rows[v]["after"][k]["std"] for k in ks]
            ax.errorbar(ds, mean, yerr=std, fmt="-o", color=colours[v], capsize=3, label=f"{v}: after GRPO")
            for n, k in zip(ds, ks):
                ax.plot([n] * len(rows[v]["after"][k]["seeds"]), rows[v]["after"][k]["seeds"], "k.", ms=3)
        ax.plot(ds, [1 / (n + 1) for n in ds], ":", color="grey", label="a random record's place")
        ax.set_title(f"held-out exact match, {title}", fontsize=10)
        ax.set_xlabel("distractor records retrieved with the relevant one")
        ax.set_xticks(ds)
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("exact match")
    axes[0].legend(fontsize=8)
    a = result["args"]
    fig.suptitle(f"tiny Memory-R1 answer agent: with vs without memory distillation (GRPO {a['steps']} steps x "
                 f"{a['prompts']} prompts x 8, seeds {a['seeds']}, held-out {a['heldout']} per count)", fontsize=10)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return png


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory_r1.distill", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--heldout", type=int, default=128)
    ap.add_argument("--distractors", type=int, nargs="+", default=[1, 3, 5, 7])
    ap.add_argument("--eval-samples", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3, help="policy lr (0: the config's, 2e-4)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the runs already in --json (same settings but the seeds) and run only the others")
    ap.add_argument("--root", type=Path, default=Path("/tmp/r1distill"))
    ap.add_argument("--json", type=Path, default=RESULTS / "memory_r1_distill_cpu.json")
    ap.add_argument("--png", type=Path, default=RESULTS / "memory_r1_distill_cpu.png")
    args = ap.parse_args(argv)
    ds = tuple(args.distractors)
    t0 = time.perf_counter()
    result = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "command": "python -m benchmarks.memory_r1.distill " + " ".join(argv if argv is not None else sys.argv[1:]),
              "host": {"cpus": os.cpu_count(), "platform": platform.platform()}, "runs": []}

    if args.resume and args.json.is_file():
        old = json.loads(args.json.read_text())
        same = {k: v for k, v in old["args"].items() if k not in ("seeds", "variants", "resume")} == \
            {k: v for k, v in result["args"].items() if k not in ("seeds", "variants", "resume")}
        if not same:
            raise SystemExit(f"--resume: {args.json} was written with other settings: {old['args']}")
        result["runs"] = old["runs"]
        result["wall_s_before_resume"] = old.get("wall_s", 0.0) + old.get("wall_s_before_resume", 0.0)
        result["args"]["seeds"] = sorted(set(old["args"]["seeds"]) | set(args.seeds))
    done = {(r["variant"], r["seed"]) for r in result["runs"]}

    def write():
        result["summary"] = summary(result["runs"], ds)
        result["wall_s"] = time.perf_counter() - t0
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")

    for seed in args.seeds:
        for v in args.variants:
            if (v, seed) in done:
                continue
            result["runs"].append(rl_run(v, seed, args.steps, args.prompts, args.heldout, ds, args.eval_samples,
                                         args.root, lr=args.lr))
            write()
            r = result["runs"][-1]
            print(f"{v} seed {seed}: em {r['before']['em']:.3f} -> {r['after']['em']:.3f}, sampled "
                  f"{r['before'].get('em_sampled', 0):.3f} -> {r['after'].get('em_sampled', 0):.3f} "
                  f"({r['wall_s']:.0f} s)", flush=True)
    print(f"wrote {args.json} and {plot(result, args.png)} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
