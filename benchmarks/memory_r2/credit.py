"""Per-token credit quality of LoGo-GRPO, per-session GRPO and outcome-only GRPO on the SAME rollout batches of the
tiny Memory-R2 task, against each session's true contribution (which the tiny task can compute exactly).

    python -m benchmarks.memory_r2.credit [--tasks 3x2 8x1] [--episodes 64] [--seeds 0 1 2 3 4]
        [--json benchmarks/results/tiny_r2_credit_cpu.json] [--png docs/img/tiny_r2_credit.png]

Per task (`SxF` = S sessions of F facts; 3x2 is the default task with the shipped warm start, 8x1 the
many-session variant with memjax/assets/tiny/r2_warmstart_s8) and seed: the warm start rolls out `--episodes`
training episodes (the RL stream of that seed: memjax/systems/memory_r2/tiny/system.py) with LoGo's budget (n = 8
global rollouts, every session re-rolled m = 4 times from its anchor, temperature 1), recorded as one
RolloutBatch. On that batch, three estimators:
- `logo`: `logo_unit_advantages` on every row (global units standardised over the n rollouts per (episode,
  session), local units within their m re-rollouts), as the training run computes it (singleton "reward");
- `session`: the same on the global rows alone (plain GRPO with per-session credit: the repo's `grpo` arm);
- `outcome`: the global rows with every unit reward replaced by its trajectory reward (`outcome_unit_rewards`:
  one advantage per rollout, outcome-only GRPO).
True contribution of a row (its session t, its op text o, the anchor rollout i whose trajectory it belongs to):
  delta = Q(o) - mean over every grammatical alternative x of Q(x),
Q(x) = the final global reward of rollout i with session t's ops replaced by x and every other session's ops
kept (`replay_reward`: the bank replayed, the rule reader, the compression penalty). Q of a global row's own
ops is checked to equal the reward the workflow gave (the replay is the workflow's reward).
Measured per estimator over trained tokens (token-weighted): var (advantage variance), corr (Pearson with
delta), noise = var * (1 - corr^2) (the advantage variance not explained by the true contribution) and sign
agreement (sign(A) == sign(delta) where delta != 0); and what the batch's gradient sees (`by_decision`): per
decision (the bank-relative case of the fact and the op taken, e.g. `new:add`) the mean advantage, its
z-score over the decision's tokens and the mean delta, and `decision_corr` over decisions. The JSON keeps per (task, seed) the numbers and per task
their mean and sample std over seeds (rows of other tasks / seeds at the same --episodes already in the file
are kept); the plot: corr and noise per estimator and task, one dot per seed.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import platform
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
ESTIMATORS = ("logo", "session", "outcome")
COLOURS = {"logo": "tab:blue", "session": "tab:green", "outcome": "tab:orange"}
STEP_EPISODES = 4  # episodes per training step (configs/memory_r2/tiny.py prompts_per_step)
DECISIVE = ("new:add", "new:skip", "move:update", "move:add")  # 1-fact decisions that decide a question


def task_of(spec: str):
    """`SxF` -> (R2TaskConfig(sessions=S, facts_per_session=F), warm start dir or None for the shipped one)."""
    from memjax.systems.memory_r2.tiny.task import R2TaskConfig

    s, f = (int(x) for x in spec.lower().split("x"))
    task = R2TaskConfig(facts_per_session=f, sessions=s) if (s, f) != (3, 2) else R2TaskConfig()
    warm = None if (s, f) == (3, 2) else str(ROOT / "memjax" / "assets" / "tiny" / f"r2_warmstart_s{s}")
    return task, warm


def rows_of(batch, keep: np.ndarray):
    """The batch restricted to the rows where keep (samples and their rewards unchanged)."""
    from memjax.rl.batch import FIELDS

    return batch.replace(**{k: a[keep] for k, a in batch.arrays().items() if FIELDS[k].kind != "sample"})


def weighted(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> dict[str, float]:
    n, w = float(w.sum()), w / w.sum()
    mx, my = (w * x).sum(), (w * y).sum()
    vx, vy = (w * (x - mx) ** 2).sum(), (w * (y - my) ** 2).sum()
    corr = float((w * (x - mx) * (y - my)).sum() / np.sqrt(vx * vy)) if vx > 0 and vy > 0 else 0.0
    nz = y != 0
    sign = float((w[nz] * (np.sign(x[nz]) == np.sign(y[nz]))).sum() / w[nz].sum()) if nz.any() else 0.0
    return {"var": float(vx), "corr": corr, "noise": float(vx * (1 - corr ** 2)), "sign_agreement": sign,
            "tokens": int(round(n))}


def by_decision(x: np.ndarray, y: np.ndarray, w: np.ndarray, key: np.ndarray, episodes: int) -> dict:
    """What a batch's gradient sees: per decision (case:op) the token-weighted mean advantage, its z-score
    (mean / standard error over the decision's rows) in this batch and scaled to one training step of
    STEP_EPISODES episodes (`z_step`), and the mean delta; `decision_corr` = the weighted correlation over
    decisions of mean advantage with mean delta (the per-token noise averaged out within each decision)."""
    per, mx, my, n = {}, [], [], []
    for k in sorted(set(key.tolist())):
        m = key == k
        wk = w[m]
        mean = float((wk * x[m]).sum() / wk.sum())
        sd = float(np.sqrt((wk * (x[m] - mean) ** 2).sum() / wk.sum()))
        rows = int(m.sum())
        z = mean / (sd / np.sqrt(rows)) if sd > 0 else 0.0
        per[k] = {"rows": rows, "tokens": int(wk.sum()), "mean_adv": mean, "z": float(z),
                  "z_step": float(z * np.sqrt(STEP_EPISODES / episodes)),
                  "mean_delta": float((wk * y[m]).sum() / wk.sum())}
        mx.append(mean), my.append(per[k]["mean_delta"]), n.append(wk.sum())
    c = weighted(np.asarray(mx), np.asarray(my), np.asarray(n, np.float64))["corr"] if len(n) > 1 else 0.0
    return {"decision_corr": c, "decisions": per}


def measure(spec: str, *, episodes: int = 64, seed: int = 0, group: int = 8, local: int = 4) -> dict:
    """One batch of the warm start on task `spec` (module doc) and the three estimators' credit on it."""
    from memjax.engine import Engine
    from memjax.agents.workflow import run_workflow
    from memjax.systems.memory_r2.workflow import SESSION_STRIDE
    from memjax.systems.memory_r2.system import logo_unit_advantages
    from memjax.systems.memory_r2.tiny.system import RL_DATA_SEED, outcome_unit_rewards
    from memjax.tiny.model import engine_config
    from memjax.memory import MemoryBank
    from memjax.systems.memory_r2.tiny.agent import TinyR2Workflow
    from memjax.systems.memory_r2.tiny.task import (OPS, apply_ops, case_of, make_r2_split, parse_ops,
                                     r2_tokenizer, replay_reward)
    from memjax.systems.memory_r2.tiny.warmstart import load_r2_warmstart

    task, warm = task_of(spec)
    task = dataclasses.replace(task, local_prob=1.0, local_rollouts=local)
    model, _ = load_r2_warmstart(warm, task, log=lambda *_: None)
    tok = r2_tokenizer()
    samples = make_r2_split(task, RL_DATA_SEED + 1000 * seed, episodes)
    wf = TinyR2Workflow(tok, task, group_size=group, temperature=1.0, local=True)
    res = run_workflow(Engine(model, engine_config()), wf, samples, group_size=group, seed=seed)
    b = res.batch
    resp = b.loss_mask != 0
    texts = [tok.decode([int(i) for i in b.input_ids[r][resp[r]] if i != tok.eos_id], skip_unknown=True)
             for r in range(b.num_rows)]
    traj, sess = b.snapshot // SESSION_STRIDE, b.snapshot % SESSION_STRIDE
    glob = b.local_group < 0
    outputs: dict[int, dict[int, str]] = {}
    for r in np.flatnonzero(glob):
        outputs.setdefault(int(traj[r]), {})[int(sess[r])] = texts[r]
    alts = [" ".join(x) for x in itertools.product(OPS, repeat=task.facts_per_session)]
    q: dict[tuple[int, int, str], float] = {}

    def qv(i: int, t: int, x: str) -> float:
        if (i, t, x) not in q:
            outs = [x if s == t else outputs[i][s] for s in range(task.sessions)]
            q[i, t, x] = replay_reward(task, samples[i // group], outs)
        return q[i, t, x]

    for i, outs in outputs.items():  # the replay is the workflow's reward
        if abs(qv(i, 0, outs[0]) - float(b.reward[i])) > 1e-5:
            raise AssertionError(f"replay_reward {qv(i, 0, outs[0])} != workflow reward {b.reward[i]} (rollout {i})")
    delta = np.asarray([qv(int(traj[r]), int(sess[r]), texts[r])
                        - np.mean([qv(int(traj[r]), int(sess[r]), x) for x in alts]) for r in range(b.num_rows)])
    decision = []  # per row: the bank-relative case of each fact and the op taken, e.g. "new:add"
    for r in range(b.num_rows):
        i, t = int(traj[r]), int(sess[r])
        sample = samples[i // group]
        bank = MemoryBank(seed=0)
        for s in range(t):
            ops = parse_ops(outputs[i][s], task.facts_per_session)
            if ops is not None:
                apply_ops(bank, sample["sessions"][s], ops)
        ops = parse_ops(texts[r], task.facts_per_session)
        if ops is None:
            decision.append("bad")
            continue
        keys = []
        for f, op in zip(sample["sessions"][t], ops):
            keys.append(f"{case_of(bank, f)}:{op}")
            apply_ops(bank, [f], [op])
        decision.append(" ".join(keys))
    decision = np.asarray(decision)
    tokens = b.loss_mask.sum(1)
    gb = rows_of(b, glob)
    adv = {"logo": logo_unit_advantages(b, singleton="reward").row_advantage,
           "session": logo_unit_advantages(gb, singleton="reward").row_advantage,
           "outcome": logo_unit_advantages(outcome_unit_rewards(gb), singleton="reward").row_advantage}
    out = {"task": spec, "seed": seed, "episodes": episodes, "group": group, "local": local,
           "rows": int(b.num_rows), "global_rows": int(glob.sum()), "mean_reward": float(b.reward.mean()),
           "delta_nonzero": float((delta[glob] != 0).mean())}
    for k in ESTIMATORS:
        d, w = (delta, tokens) if k == "logo" else (delta[glob], tokens[glob])
        out[k] = weighted(np.asarray(adv[k], np.float64), d, w.astype(np.float64))
        out[k].update(by_decision(np.asarray(adv[k], np.float64), d, w.astype(np.float64),
                                  decision if k == "logo" else decision[glob], episodes))
    loc = ~glob
    out["logo_local"] = weighted(np.asarray(adv["logo"])[loc], delta[loc], tokens[loc].astype(np.float64))
    out["logo_global"] = weighted(np.asarray(adv["logo"])[glob], delta[glob], tokens[glob].astype(np.float64))
    return out


def summary(rows: list[dict]) -> dict:
    out = {}
    for spec in dict.fromkeys(r["task"] for r in rows):
        rs = [r for r in rows if r["task"] == spec]
        out[spec] = {"seeds": [r["seed"] for r in rs]}
        for k in (*ESTIMATORS, "logo_local", "logo_global"):
            for m in ("var", "corr", "noise", "sign_agreement", "decision_corr"):
                if m not in rs[0][k]:
                    continue
                v = [r[k][m] for r in rs]
                out[spec][f"{k}_{m}_mean"] = statistics.mean(v)
                out[spec][f"{k}_{m}_std"] = statistics.stdev(v) if len(v) > 1 else None
            for dec in DECISIVE:  # one training step's z-score of the decisions the warm start gets wrong / right
                v = [r[k]["decisions"][dec]["z_step"] for r in rs if dec in r[k].get("decisions", {})]
                if v:
                    out[spec][f"{k}_z_step_{dec}_mean"] = statistics.mean(v)
    return out


def plot(rows: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    for ax, m, title in ((axes[0], "corr", "corr(advantage, true contribution)"),
                         (axes[1], "noise", "advantage variance not explained by it")):
        for j, k in enumerate(ESTIMATORS):
            for si, spec in enumerate(specs):
                v = [r[k][m] for r in rows if r["task"] == spec]
                x = si + (j - 1) * 0.22
                ax.scatter([x] * len(v), v, color=COLOURS[k], s=14, alpha=0.6)
                ax.plot([x - 0.09, x + 0.09], [statistics.mean(v)] * 2, color=COLOURS[k], lw=2.5,
                        label=k if si == 0 else None)
        ax.set_xticks(range(len(specs)), [f"{s.split('x')[0]} sessions of {s.split('x')[1]} fact"
                                          + ("s" if s.split("x")[1] != "1" else "") for s in specs])
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("tiny Memory-R2: per-token credit on the same batches (warm start, n = 8, m = 4)", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory_r2.credit", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="+", default=["3x2", "8x1"])
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--json", default=str(RESULTS / "tiny_r2_credit_cpu.json"))
    ap.add_argument("--png", default=str(ROOT / "docs" / "img" / "tiny_r2_credit.png"))
    ap.add_argument("--device", default=f"cpu ({platform.machine()})")
    args = ap.parse_args(argv)
    if args.episodes < 1:
        ap.error("--episodes must be >= 1")
    path = Path(args.json)
    old = json.loads(path.read_text()) if path.is_file() else {}
    todo = {(spec, seed) for spec in args.tasks for seed in args.seeds}
    rows = [r for r in old.get("runs", []) if old.get("episodes") == args.episodes
            and (r["task"], r["seed"]) not in todo]  # other tasks / seeds of the same size are kept
    for spec in args.tasks:
        for seed in args.seeds:
            r = measure(spec, episodes=args.episodes, seed=seed)
            rows.append(r)
            print(f"{spec} seed {seed}: " + "  ".join(
                f"{k} corr {r[k]['corr']:.3f} noise {r[k]['noise']:.3f}" for k in ESTIMATORS), flush=True)
            rows.sort(key=lambda x: (x["task"], x["seed"]))
            out = {"device": args.device, "episodes": args.episodes, "runs": rows, "summary": summary(rows)}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(out, indent=1) + "\n")  # after every measurement: partial results survive
    plot(rows, Path(args.png))
    print(f"wrote {path} and {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
