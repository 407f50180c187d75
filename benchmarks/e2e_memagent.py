"""The product's command end to end: `python -m memjax.train configs/memagent.py --set ...` at a named scale, then a
resume from its next-to-last checkpoint, and the per-phase table of its metrics.jsonl.

  python -m benchmarks.e2e_memagent --scale tiny|1.5b|3b --out DIR [--data FILE] [--prompts N] [--steps N]
                                    [--attention auto|cudnn] [--minutes M]

`command(...)` is the whole command line, the recipe (configs/memagent.py = configs/memagent/train.py) with only
these overrides: the model (`model.preset`: random weights, no hub here; tiny = tiny-qwen-vocab with fp32 master
weights and fp32 compute, as XLA:CPU emulates bf16 matmuls), the data file, prompts per step, steps, a checkpoint
every step, held-out evaluation of `--prompts` questions, `dynamic_sampling=false` (random weights score 0 on every
trajectory: DAPO's filter would keep no group and no update would run, so the update trains on every group with
zero advantages, at the same cost) and, at tiny scale only, the shapes (documents, chunk, budgets, engine slots and
window, row buckets, one mini-batch) shrunk to CPU size.
tests/e2e/test_memagent_command.py runs the tiny command as typed; BUILD.md's issue-46 GPU block runs 1.5B and 3B.
The resume check copies the run's folder without its last checkpoint, hf/ export and result.json
(`copy_for_resume`), resumes to the same step and compares the two hf/ exports byte for byte
(`resume_bit_identical`). Writes DIR/e2e_<scale>.json (commands, exit codes, seconds, per-step phases, resume
result) and DIR/e2e_<scale>.md (the phase table); the runs' folders and logs stay under DIR.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_HOTPOT = "shared/data/hotpotqa/hotpot_dev_distractor_first100.json"  # 100 dev records, ~1,000 paragraphs
PRESETS = {"tiny": "tiny-qwen-vocab", "1.5b": "qwen2.5-1.5b", "3b": "qwen2.5-3b"}
TINY_SHAPES = ("model.compute_dtype=float32", "agent.data.num_docs=10", "agent.memagent.chunk_tokens=384",
               "agent.memagent.max_query_tokens=64",
               "agent.memagent.max_memory_tokens=16", "agent.memagent.max_final_tokens=8",
               "agent.memagent.group_size=2", "engine.prefill_slots=4", "engine.max_slots=8", "engine.window=1024",
               "engine.prefill_chunk=512", "engine.rounds_per_sync=64", "update.mini_batches=1",
               "update.micro_rows=2", "update.row_buckets=1024", "update.pad_tokens=64")
PHASE_COLS = ("rollout", "old_logp", "ref_logp", "update", "weight_sync", "evaluation", "checkpoint", "other")


def command(scale: str, out_dir: str | Path, data: str, *, prompts: int, steps: int, attention: str = "auto",
            resume: bool = False) -> list[str]:
    """The training command line, as a user types it (module docstring)."""
    sets = [f"model.preset={PRESETS[scale]}", f"agent.data.path={data}", f"prompts_per_step={prompts}",
            f"steps={steps}", "checkpoint_every=1", f"keep_checkpoints={steps}", f"agent.eval_questions={prompts}",
            "dynamic_sampling=false", f"update.attention={attention}", f"out_dir={out_dir}",
            f"resume={'true' if resume else 'false'}"]
    if scale == "tiny":
        sets += TINY_SHAPES
    return [sys.executable, "-m", "memjax.train", "configs/memagent.py", *[a for s in sets for a in ("--set", s)]]


def _run(cmd: list[str], log: Path, limit_s: float) -> dict:
    t = time.perf_counter()
    with log.open("w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=limit_s).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return {"command": " ".join(cmd[1:]), "returncode": rc, "seconds": round(time.perf_counter() - t, 1),
            "log": log.name}


def phase_rows(metrics_path: Path) -> list[dict]:
    """Per step: seconds of each phase, step_s, MFU, device-s per sample, tokens/s of the update (metrics.jsonl)."""
    rows = []
    for line in metrics_path.read_text().splitlines():
        m = json.loads(line)
        rows.append({"step": m["step"], **{p: m.get(f"time_{p}_s") for p in PHASE_COLS},
                     **{k: m.get(k) for k in ("step_s", "mfu_step", "mfu_update", "mfu_rollout", "tokens_per_s_update",
                                              "gpu_s_per_sample", "trained_samples", "devices", "device_kind")}})
    return rows


def _md(rows: list[dict]) -> str:
    f = lambda v: "—" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))
    head = ["step", *PHASE_COLS, "step_s", "mfu_step", "mfu_update", "device-s/sample"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(f(r.get(k if k != "device-s/sample" else "gpu_s_per_sample")) for k in head) + " |"
            for r in rows]
    return "\n".join(out) + "\n"


def _same_export(a: Path, b: Path) -> bool:
    files = sorted(p.name for p in a.glob("*.safetensors"))
    return bool(files) and files == sorted(p.name for p in b.glob("*.safetensors")) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in files)


RESUME_DROPS = ("hf", ".memjax.lock", "result.json")  # + the last checkpoint
LEDGER = "checkpoints.json"  # memjax.loop.checkpointer.LEDGER, named here: this driver imports neither memjax nor jax


def copy_for_resume(run_dir: Path, resumed: Path, steps: int) -> None:
    """The finished run's folder as a run stopped after step steps-1 leaves it: without its last checkpoint, hf/
    export and result.json (a result.json that reached `steps` makes the same command a no-op: memjax.run.identity
    .finished), its checkpoint ledger at step steps-1 (a ledger naming the dropped checkpoint makes the resume
    refuse: memjax.loop.checkpointer)."""
    shutil.copytree(run_dir, resumed, ignore=shutil.ignore_patterns(*RESUME_DROPS, str(steps)))
    if (resumed / LEDGER).is_file():
        (resumed / LEDGER).write_text(json.dumps({"committed": steps - 1}) + "\n")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(PRESETS), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data", default=None, help=f"HotpotQA JSON (default: {SHARED_HOTPOT}; tiny: the test excerpt)")
    ap.add_argument("--prompts", type=int, default=None, help="prompts per step (default: tiny 2, GPU 2)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--attention", choices=["auto", "cudnn"], default="auto")
    ap.add_argument("--minutes", type=float, default=30.0, help="limit of each of the two runs")
    a = ap.parse_args(argv)
    if a.steps < 2 or (a.prompts is not None and a.prompts < 1):
        ap.error("--steps must be >= 2 (the resume check restarts from step steps-1) and --prompts >= 1")
    data = a.data or ("tests/fixtures/data/hotpotqa_dev_excerpt.json" if a.scale == "tiny" else SHARED_HOTPOT)
    if not (ROOT / data).is_file() and not Path(data).is_file():
        ap.error(f"--data {data}: file not found (the GPU block copies ../shared/data/hotpotqa into shared/data/)")
    prompts = a.prompts or 2
    a.out.mkdir(parents=True, exist_ok=True)
    run_dir, resumed = (a.out / f"run_{a.scale}").resolve(), (a.out / f"resume_{a.scale}").resolve()
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(resumed, ignore_errors=True)
    res = {"scale": a.scale, "data": data, "prompts": prompts, "steps": a.steps, "attention": a.attention}
    res["run"] = _run(command(a.scale, run_dir, data, prompts=prompts, steps=a.steps, attention=a.attention),
                      a.out / f"e2e_{a.scale}.log", 60 * a.minutes)
    if (run_dir / "metrics.jsonl").is_file():
        res["phases"] = phase_rows(run_dir / "metrics.jsonl")
        (a.out / f"e2e_{a.scale}.md").write_text(_md(res["phases"]))
    (a.out / f"e2e_{a.scale}.json").write_text(json.dumps(res, indent=1) + "\n")  # kept if the resume is cut short
    if res["run"]["returncode"] == 0:  # resume from step steps-1 to steps: the same final weights?
        copy_for_resume(run_dir, resumed, a.steps)
        res["resume"] = _run(command(a.scale, resumed, data, prompts=prompts, steps=a.steps, attention=a.attention,
                                     resume=True), a.out / f"e2e_{a.scale}_resume.log", 60 * a.minutes)
        res["resume_bit_identical"] = res["resume"]["returncode"] == 0 and _same_export(run_dir / "hf", resumed / "hf")
    (a.out / f"e2e_{a.scale}.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "phases"}, indent=1))
    if "phases" in res:
        print(_md(res["phases"]))
    return res


if __name__ == "__main__":
    r = main()
    sys.exit(0 if r["run"]["returncode"] == 0 and r.get("resume_bit_identical") else 1)
