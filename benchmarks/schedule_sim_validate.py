"""Validates the step-time simulator (memjax.rl.schedule_sim) against measured CPU runs: fits its rates to the
measured phase costs of the `sync` run only, predicts the seconds per step of every schedule, and compares each with
the measured one.

  python -m benchmarks.schedule_sim_validate [--measured FILE | --system memagent|sumer --seeds 0 1 2 --steps 8]
      [--sim-seeds 8] [--json FILE [--update-committed]]

`--measured`: a benchmarks.async_schedules JSON whose rows carry "phases" (per-step means of time_<phase>_s and the
rollout counts), or an output of this command (it embeds the measured JSON under "async_schedules"); without it,
this command first runs `python -m benchmarks.async_schedules --system ... --seeds ... --steps ... --devices 8
--rollout-split 4` (every schedule the system runs; several CPU minutes) into a /tmp folder. It fits and predicts
on the mean over seeds, then on each seed alone (a seed's runs ran back to back).
The fit (every input MEASURED in the sync rows, mean over seeds of the steps 2..):
- workload, MemAgent: each question's documents have k chunks drawn from the run's `agent.train_chunks` (its group
  shares them): k memory turns and the final answer, each a new conversation of the sync run's mean prompt and
  generated tokens per conversation; SUMER: episodes of rollout_mean_turns turns on average (the floor or one more),
  one conversation continued turn after turn, each turn the mean prompt (tool output) and generated tokens per turn;
  the update's cost of a trajectory is its trained tokens (the sync run's mean per trajectory);
- rollout: the engine (data-parallel over every device of its group) is one replica; a decode round costs tau
  whatever its rows (tiny rounds are latency-bound) and a round prefills EngineConfig.round_tokens prompt tokens,
  so every rollout time is proportional to tau, fitted so the simulated sync rollout equals the measured one;
- update: the pool's tokens per second = trained tokens / (old_logp + ref_logp + update seconds); `update_fixed_s` =
  time_other_s less engine_sleep_s (credit assignment, metrics: the trainer's host work, every schedule);
  weight_sync_s = time_weight_sync_s + engine_sleep_s (the engine put to sleep and given the weights back: sync and
  colocated_async only, split_async's engine never sleeps).
Each schedule's measured seconds per step leave out the last step's held-out evaluation and checkpoint (the
simulator has neither); the raw figure is kept beside it. The 8 host devices share the CPU's cores, so split_async's
rollout and update share them too: the split row is predicted twice, with the pool shared (Rates.overlap_speed 0.5:
half rate for each while both run) and with no contention (each at its sync rate), two ends of the CPU's possible
behaviour; its measured value is compared with both. Every figure in the output is labelled measured or predicted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memjax.rl.schedule_sim import Rates, Schedule, Trajectory, Turn, simulate

TRAIN_KEYS = ("time_old_logp_s", "time_ref_logp_s", "time_update_s")
UNMODELLED = ("time_evaluation_s", "time_checkpoint_s")  # the run's last step only: held-out evaluation, checkpoint


def _sets(row: dict) -> dict:
    return dict(s.split("=", 1) for s in row["sets"])


def measured(res: dict, seed: int | None = None) -> dict:
    """Per schedule: the mean over seeds (or of one `seed`) of s/step, s/step without the unmodelled phases, and
    every phase mean."""
    if res.get("benchmark") != "async_schedules":
        raise ValueError("--measured is not a benchmarks.async_schedules result")
    out = {}
    for s in dict.fromkeys(r["schedule"] for r in res["rows"]):
        rows = [r for r in res["rows"] if r["schedule"] == s and seed in (None, r["seed"])]
        if any("phases" not in r for r in rows):
            raise ValueError(f"the {s} rows carry no 'phases' (re-run benchmarks.async_schedules)")
        keys = sorted(set.intersection(*(set(r["phases"]) for r in rows)))
        ph = {k: statistics.fmean(r["phases"][k] for r in rows) for k in keys}
        raw = statistics.fmean(r["s_per_step"] for r in rows)
        out[s] = {"runs": len(rows), "seeds": [r["seed"] for r in rows], "s_per_step_raw": raw,
                  "s_per_step": raw - sum(ph.get(k, 0.0) for k in UNMODELLED), "phases": ph,
                  "max_staleness": rows[0]["max_staleness"], "sets": _sets(rows[0])}
    if "sync" not in out:
        raise ValueError("the measured runs hold no sync row to fit")
    return out


def memagent_make(chunks: list[int], group_size: int, prefill: int, decode: int, conv_tokens: float):
    """A trajectory per call; every `group_size` consecutive calls (one GRPO group: the simulator admits a group's
    samples together) share a document of k chunks drawn from `chunks`."""
    state = {"n": 0, "k": 0}

    def make(rng):
        if state["n"] % group_size == 0:
            state["k"] = int(chunks[rng.integers(len(chunks))])
        state["n"] += 1
        k = state["k"]
        return Trajectory(tuple(Turn(prefill, decode) for _ in range(k + 1)), train_flops=(k + 1) * conv_tokens,
                          forward_flops=0.0, tag=k)
    return make


def sumer_make(turns: float, prefill: int, decode: int, conv_tokens: float):
    """A SUMER episode per call: floor(turns) or one more assistant turns (their mean `turns`), the first a new
    conversation, the later ones continuing it with `prefill` new tokens (tool output) each; one training row."""
    lo, frac = int(turns), turns - int(turns)

    def make(rng):
        n = max(1, lo + int(rng.random() < frac))
        return Trajectory(tuple(Turn(prefill, decode, continues=j > 0) for j in range(n)), train_flops=conv_tokens,
                          forward_flops=0.0, tag=n)
    return make


def fit_tau(rollout_s: float, base: Rates, factory, devices: int, sim_kw: dict, sim_seeds: int) -> float:
    """The decode round's seconds: every rollout time of `base` (rounds of 1 s) scales with tau, so tau = the
    measured sync rollout seconds / the simulated sync rollout at tau 1 (with a free update)."""
    free = dataclasses.replace(base, decode_step_s=(1.0,), update_fixed_s=0.0, weight_sync_s=0.0, train_flops_s=1e30)
    one = statistics.fmean(simulate(factory(), free, Schedule("sync", devices), seed=s, **sim_kw).step_s
                           for s in range(sim_seeds))
    return rollout_s / one


def fit(meas: dict, *, devices: int, round_tokens: int, max_slots: int, sim_kw: dict, sim_seeds: int) -> dict:
    """Rates and workload from the sync row only (module docstring); returns the fitted values and their inputs."""
    sync = meas["sync"]
    ph, sets = sync["phases"], sync["sets"]
    conv = ph["rollout_conversations"]
    pre = ph["rollout_prompt_tokens"] / conv
    dec = ph["rollout_generated_tokens"] / conv
    trained_tokens = ph["conversations"] * ph["mean_conversation_tokens"]
    update_s = sum(ph.get(k, 0.0) for k in TRAIN_KEYS)
    traj = ph["rollout_trajectories"]
    if "agent.train_chunks" in sets:  # MemAgent: k chunks per question, k + 1 conversations of one turn
        chunks = [int(x) for x in sets["agent.train_chunks"].split(",")]
        shape = {"chunks": chunks, "group_size": int(sets["agent.group_size"]), "prefill": max(1, round(pre)),
                 "decode": max(1, round(dec)), "conv_tokens": ph["mean_conversation_tokens"]}
        drawn, make = float(np.mean(chunks)) + 1, memagent_make
    else:  # SUMER: one conversation of rollout_mean_turns turns per episode
        turns = ph["rollout_mean_turns"]  # the rollout counts each turn's request as a conversation
        shape = {"turns": turns, "prefill": max(1, round(pre)), "decode": max(1, round(dec)),
                 "conv_tokens": trained_tokens / traj}
        drawn, make = turns, sumer_make

    def factory():  # a fresh group counter per simulation
        return make(**shape)
    base = Rates(decode_batch=(max_slots,), decode_step_s=(1.0,), prefill_tok_s=float(round_tokens),
                 slots=max_slots, train_flops_s=1.0, devices_per_replica=devices, shared_compute=True)
    tau = fit_tau(ph["time_rollout_s"], base, factory, devices, sim_kw, sim_seeds)
    sleep = ph.get("engine_sleep_s", 0.0)  # inside time_other_s; split_async's engine never sleeps
    rates = dataclasses.replace(base, decode_step_s=(tau,), prefill_tok_s=round_tokens / tau,
                                train_flops_s=trained_tokens / update_s, update_fixed_s=ph["time_other_s"] - sleep,
                                weight_sync_s=ph["time_weight_sync_s"] + sleep)
    return {"rates": rates, "factory": factory, "shape": shape, "tau_s": tau,
            "inputs_measured": {"time_rollout_s": ph["time_rollout_s"], "update_s": update_s,
                                "time_other_s": ph["time_other_s"], "engine_sleep_s": sleep,
                                "time_weight_sync_s": ph["time_weight_sync_s"],
                                "conversations_per_step": conv, "trajectories_per_step": ph["rollout_trajectories"],
                                "prompt_tokens_per_conversation": pre, "generated_tokens_per_conversation": dec,
                                "trained_tokens_per_step": trained_tokens,
                                "conversations_per_trajectory": conv / traj},
            "derived": {"decode_round_s": tau, "prefill_tok_s": round_tokens / tau,
                        "update_tokens_per_s": trained_tokens / update_s,
                        "conversations_or_turns_per_trajectory_drawn": drawn}}


def predict(f: dict, kind: str, devices: int, split: int, staleness: int, sim_kw: dict, sim_seeds: int,
            contention: bool = True) -> float:
    """Mean predicted s/step of `kind` over the simulator seeds; split_async's engine is one replica on its devices."""
    rates = f["rates"]
    if kind == "split_async":
        # the worker installs each batch's weights between batches: no pause, no KV recomputed
        # the update's rate stays the pool's (fitted on every device); contention: each at half rate beside the other
        rates = dataclasses.replace(rates, devices_per_replica=split, overlap_speed=0.5 if contention else 1.0,
                                    resume="keep")
        sch = Schedule(kind, devices, max_staleness=staleness, rollout_devices=split)
    else:
        sch = Schedule(kind, devices, max_staleness=staleness)
    return statistics.fmean(simulate(f["factory"](), rates, sch, seed=s, **sim_kw).step_s for s in range(sim_seeds))


def validate(res: dict, *, sim_seeds: int = 8, tolerance: float = 0.15) -> dict:
    from memjax.systems.sumer.tiny.agent import engine_config as sumer_engine
    from memjax.tiny.model import engine_config

    sync = measured(res)["sync"]
    devices, split = res["devices"], res.get("rollout_split") or res["devices"] // 2
    steps = int(sync["sets"]["steps"])
    sim_kw = {"batch_groups": int(sync["sets"]["prompts_per_step"]),
              "group_size": int(sync["sets"]["agent.group_size"]), "steps": steps, "warmup": 1}
    # the tiny engines at their sections' max_slots (TinySection 256, TinySumerSection 64)
    ecfg = sumer_engine(64) if res.get("system") == "sumer" else engine_config(256)
    rows, fits = [], {}
    # the mean over seeds, then each seed alone (its three runs ran back to back: the least exposed to the other
    # jobs' load on a shared machine)
    for seed in [None, *sorted({r["seed"] for r in res["rows"]})]:
        meas = measured(res, seed)
        f = fit(meas, devices=devices, round_tokens=ecfg.round_tokens, max_slots=ecfg.max_slots, sim_kw=sim_kw,
                sim_seeds=sim_seeds)
        fits["mean" if seed is None else f"seed {seed}"] = f
        for kind, m in meas.items():
            variants = [("shared cores", True), ("no contention", False)] if kind == "split_async" else [("", True)]
            for label, cont in variants:
                p = predict(f, kind, devices, split, m["max_staleness"], sim_kw, sim_seeds, contention=cont)
                err = (p - m["s_per_step"]) / m["s_per_step"]
                rows.append({"seeds": "mean" if seed is None else seed, "schedule": kind,
                             "model": label or ("fitted" if kind == "sync" else "predicted"),
                             "measured_s_per_step": m["s_per_step"], "measured_s_per_step_raw": m["s_per_step_raw"],
                             "predicted_s_per_step": p, "error": err, "within_tolerance": abs(err) <= tolerance,
                             "max_staleness": m["max_staleness"], "runs": m["runs"]})
    f, meas = fits["mean"], measured(res)
    fr = f["rates"]
    return {"async_schedules": res, "benchmark": "schedule_sim_validate", "system": res.get("system", "memagent"),
            "device": res["device"], "devices": devices, "rollout_split": split, "cpu_cores": res.get("cpu_cores"), "tolerance": tolerance,
            "sim_seeds": sim_seeds, "steps": steps,
            "fit_inputs_measured": f["inputs_measured"], "fit_derived": f["derived"], "workload": f["shape"],
            "rates_fitted": {k: getattr(fr, k) for k in ("decode_batch", "decode_step_s", "prefill_tok_s", "slots",
                                                          "train_flops_s", "update_fixed_s", "weight_sync_s")},
            "rows": rows, "measured": {k: {x: v for x, v in m.items() if x != "sets"} for k, m in meas.items()}}


def table(out: dict) -> str:
    lines = ["| seeds | schedule | model | measured s/step | predicted s/step | error | within 15%? |",
             "|---|---|---|---|---|---|---|"]
    for r in out["rows"]:
        lines.append(f"| {r['seeds']} | {r['schedule']} | {r['model']} | {r['measured_s_per_step']:.2f} | "
                     f"{r['predicted_s_per_step']:.2f} | {100 * r['error']:+.1f}% | "
                     f"{'yes' if r['within_tolerance'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measured", type=Path, help="a benchmarks.async_schedules JSON with 'phases' in its rows")
    ap.add_argument("--system", choices=("memagent", "sumer"), default="memagent")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--sim-seeds", type=int, default=8)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--update-committed", action="store_true", help="replace a committed --json file")
    a = ap.parse_args(argv)
    if a.sim_seeds < 1:
        ap.error("--sim-seeds must be >= 1")
    from . import guard_committed

    refused = a.json and guard_committed([a.json], a.update_committed, "benchmarks.schedule_sim_validate")
    if refused:
        raise SystemExit(refused)
    if a.measured is None:
        from . import async_schedules

        d = Path(tempfile.mkdtemp(prefix="schedule_sim_validate_"))
        async_schedules.main(["--system", a.system, "--seeds", *map(str, a.seeds), "--steps", str(a.steps),
                              "--devices", "8", "--rollout-split", "4", "--out-dir", str(d)])
        a.measured = d / ("async_schedules_cpu.json" if a.system == "memagent" else "async_schedules_sumer_cpu.json")
    elif not a.measured.is_file():
        ap.error(f"--measured {a.measured}: no such file")
    try:
        res = json.loads(a.measured.read_text())
        res = res.get("async_schedules", res)  # an earlier validation: its measured runs
        t0 = time.perf_counter()
        out = validate(res, sim_seeds=a.sim_seeds)
    except ValueError as e:
        sys.exit(f"schedule_sim_validate: error: {e}")
    except KeyError as e:
        sys.exit(f"schedule_sim_validate: error: {a.measured} lacks {e} (not an async_schedules result?)")
    seeds = " ".join(str(x) for x in dict.fromkeys(r["seed"] for r in res["rows"]))
    out.update({"measured_file": str(a.measured), "simulate_s": time.perf_counter() - t0,
                "measure_command": f"python -m benchmarks.async_schedules --system {out['system']} --seeds {seeds} "
                                   f"--steps {out['steps']} --devices {out['devices']} --rollout-split "
                                   f"{out['rollout_split']}",
                "command": "python -m benchmarks.schedule_sim_validate " + " ".join(argv or sys.argv[1:])})
    print(table(out))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
