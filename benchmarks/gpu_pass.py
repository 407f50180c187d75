"""Every GPU row of BUILD.md in one command, in order of value, within a time budget.

  python -m benchmarks.gpu_pass --out DIR [--minutes M] [--only NAME ...] [--skip NAME ...] [--smoke]

Owns the list of GPU measurements (`ITEMS`: name, the benchmark module and its arguments at GPU scale and at
smoke scale, an estimate of its seconds and a time limit) and their driver. Each item runs as its own
`python -m benchmarks.<module>` subprocess (a crash or an out-of-memory in one item cannot take the others
down, and each starts with the whole device), writing its JSON result into DIR; its output goes to
DIR/logs/<name>.log. An item whose estimate no longer fits the remaining budget is skipped and recorded as
such; a failing item's exit code and last error line are recorded and the pass goes on. All items share one
persistent compilation cache, DIR/jax_cache (a second pass on the same machine skips compiles).
Writes DIR/gpu_pass.json (device kind, commit, command, per-item status, seconds, result files) and
DIR/gpu_pass.md (a row per item, ready for BUILD.md). `--smoke` runs every item at tiny shapes (CPU is
fine: Pallas interprets), which is what the CI test does so the script cannot rot; an item whose smoke run
would repeat another item's code path (`Item.smoke_same_as`: same module and options, other sizes) is not run
again: `--smoke` parses its command lines (GPU scale and smoke scale) with its module's own argument parser
(`check_args`) and records it "ok" with the covering item's result files.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Item:
    name: str
    what: str
    module: str
    args: tuple[str, ...]
    smoke: tuple[str, ...]
    est_s: float  # expected seconds on an H100 (compiles included), for the budget
    limit_s: float  # killed past this
    out_flag: str = "--out-dir"
    extra_env: dict = field(default_factory=dict)
    smoke_same_as: str = ""  # an earlier item whose smoke run takes this item's smoke code path (--smoke
    # checks this item's arguments and reuses that run instead of starting the same program again)


ITEMS: tuple[Item, ...] = (
    Item("forward_1.5b", "bf16 forward [8, 4096], MFU", "forward_throughput",
         ("--preset", "qwen2.5-1.5b", "--batch", "8", "--seqlen", "4096"),
         ("--preset", "tiny", "--batch", "2", "--seqlen", "64", "--iters", "2", "--dtype", "float32"), 60, 240),
    Item("decode_1.5b", "decode sweep batch 32-256 (% HBM roofline) + prefill MFU, engine default attention",
         "rollout_throughput",
         ("--mode", "sweep", "--preset", "qwen2.5-1.5b", "--dtype", "bfloat16", "--prompt-len", "1024",
          "--window", "2048", "--decode-tokens", "128", "--attention", "auto", "--tag", "_auto",
          "--profile", "profile_decode_1.5b", "--profile-batches", "32", "256"),
         ("--mode", "sweep", "--preset", "tiny", "--dtype", "float32", "--prompt-len", "16", "--window", "64",
          "--decode-tokens", "4", "--batches", "2", "--page-size", "16", "--attention", "pallas",
          "--tag", "_pallas", "--profile", "profile_decode"), 120, 300),
    Item("paged_attention", "paged attention decode step, Pallas vs XLA", "paged_attention", (),
         ("--smoke",), 90, 300),
    Item("kernels", "fused log-prob, step-ratio loss: Pallas vs XLA", "kernel_speed", (), ("--smoke",), 90, 300),
    Item("train_1.5b", "train step Qwen2.5-1.5B, MFU, peak vs plan", "train_step",
         ("--preset", "qwen2.5-1.5b"),
         ("--preset", "tiny", "--row-len", "256", "--micro-rows", "2", "--micro-batches", "2", "--min-conv", "32",
          "--max-conv", "200", "--iters", "1", "--tag", "_smoke_a"), 150, 420),
    Item("train_3b", "train step Qwen2.5-3B (largest with fp32 AdamW on 80 GB)", "train_step",
         ("--preset", "qwen2.5-3b", "--micro-rows", "4"),
         ("--preset", "tiny", "--row-len", "128", "--micro-rows", "1", "--micro-batches", "1", "--min-conv", "32",
          "--max-conv", "100", "--iters", "1", "--no-plan", "--tag", "_smoke_b"), 180, 480,
         smoke_same_as="train_1.5b"),  # the same train step (train_1.5b's smoke adds the plan comparison)
    Item("train_1.5b_cudnn", "train step Qwen2.5-1.5B with cuDNN packed attention (auto = blockwise for packed rows)",
         "train_step", ("--preset", "qwen2.5-1.5b", "--attention", "cudnn", "--tag", "_cudnn"),
         ("--preset", "tiny", "--row-len", "128", "--micro-rows", "1", "--micro-batches", "1", "--min-conv", "32",
          "--max-conv", "100", "--iters", "1", "--no-plan", "--tag", "_smoke_c"), 150, 420,
         smoke_same_as="train_1.5b"),  # cuDNN exists only on NVIDIA GPUs: the smoke path is train_1.5b's
    Item("decode_7b", "decode sweep Qwen2.5-7B", "rollout_throughput",
         ("--mode", "sweep", "--preset", "qwen2.5-7b", "--dtype", "bfloat16", "--prompt-len", "1024",
          "--window", "2048", "--decode-tokens", "128", "--attention", "auto", "--tag", "_auto"),
         ("--mode", "sweep", "--preset", "tiny", "--dtype", "float32", "--prompt-len", "8", "--window", "32",
          "--decode-tokens", "2", "--batches", "2", "--page-size", "16", "--tag", "_7b_smoke"), 150, 420,
         smoke_same_as="decode_1.5b_reference"),  # tiny sweep, default (reference) attention, as that smoke
    Item("decode_1.5b_reference", "decode at batch 64 and 256 with the pure-JAX reference attention (before)",
         "rollout_throughput",
         ("--mode", "sweep", "--preset", "qwen2.5-1.5b", "--dtype", "bfloat16", "--prompt-len", "1024",
          "--window", "2048", "--decode-tokens", "128", "--attention", "reference", "--batches", "64", "256",
          "--tag", "_reference"),
         ("--mode", "sweep", "--preset", "tiny", "--dtype", "float32", "--prompt-len", "16", "--window", "64",
          "--decode-tokens", "4", "--batches", "2", "--page-size", "16", "--tag", "_reference"), 90, 240),
    Item("memagent_28k", "MemAgent rollout, 28K-token documents, 64 docs (4 x group 16)", "memagent.linearity",
         ("--preset", "qwen2.5-1.5b", "--dtype", "bfloat16", "--lengths", "28672", "--baseline-lengths",
          "--batch", "64", "--repeats", "1", "--chunk", "5000", "--memory-tokens", "1024", "--final-tokens", "256",
          "--window", "8192", "--prefill-chunk", "2048"),
         ("--lengths", "256", "512", "--baseline-lengths", "--batch", "2", "--repeats", "1", "--chunk", "128",
          "--memory-tokens", "4", "--final-tokens", "2", "--window", "512", "--prefill-chunk", "64"), 150, 480),
)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def device_kind() -> str:
    """The device, asked in a child process: the driver itself never initialises the GPU, so every item's
    process gets the whole device memory."""
    p = subprocess.run([sys.executable, "-c", "import jax; d = jax.devices()[0]; print(d.platform, '|', d.device_kind)"],
                       capture_output=True, text=True)
    return p.stdout.strip().splitlines()[-1] if p.returncode == 0 and p.stdout.strip() else f"unknown ({p.stderr[-200:]})"


# Runs `python -m benchmarks.<module> ARGS` (sys.argv[1:]) with a SIGUSR2 handler that prints every thread's Python
# stack, main thread first, from the main thread under the GIL (faulthandler's fatal-signal dump walks the other
# threads while they run: on 2026-11-28 it crashed inside a busy progress-bar thread before it reached the main one)
_RUN_WITH_STACKS = """import runpy, signal, sys, threading, traceback
def _stacks(sig, frame):
    names = {t.ident: t.name for t in threading.enumerate()}
    frames = sorted(sys._current_frames().items(), key=lambda kv: kv[0] != threading.main_thread().ident)
    for tid, f in frames:
        print(f"[gpu_pass] thread {names.get(tid, tid)} (most recent call first):", file=sys.stderr)
        print("".join(reversed(traceback.format_stack(f))), end="", file=sys.stderr)
    sys.stderr.flush()
signal.signal(signal.SIGUSR2, _stacks)
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""
STACKS_WAIT_S = 3  # after SIGUSR2, before SIGABRT: a main thread inside one long C call answers only the SIGABRT


def run_item(item: Item, out: Path, smoke: bool, env: dict, limit_s: float) -> dict:
    args = list(item.smoke if smoke else item.args) + [item.out_flag, str(out / "results")]
    shown = ["python", "-m", f"benchmarks.{item.module}", *args]
    cmd = [sys.executable, "-c", _RUN_WITH_STACKS, f"benchmarks.{item.module}", *args]
    log = out / "logs" / f"{item.name}.log"
    before = set((out / "results").glob("*"))
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        fh.write("$ " + shlex.join(shown) + "\n")
        fh.flush()
        p = subprocess.Popen(cmd, cwd=ROOT, env={**env, **item.extra_env, "PYTHONFAULTHANDLER": "1"}, stdout=fh,
                             stderr=subprocess.STDOUT)
        try:
            rc = p.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            # SIGUSR2 first: the child prints every thread's Python stack (main thread first) into its log, so a
            # timed-out item says where it was stuck (a hang and a slow phase look alike otherwise); then SIGABRT:
            # with PYTHONFAULTHANDLER=1 a main thread stuck in C code still gets its stack dumped
            fh.write(f"\n[gpu_pass] timeout after {limit_s:.0f} s: SIGUSR2 for the Python stacks\n")
            fh.flush()
            p.send_signal(signal.SIGUSR2)
            try:
                p.wait(timeout=STACKS_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
            fh.write("\n[gpu_pass] SIGABRT for a traceback\n")
            fh.flush()
            p.send_signal(signal.SIGABRT)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            rc = 124
    secs = time.perf_counter() - t0
    files = sorted(str(f.relative_to(out)) for f in set((out / "results").glob("*")) - before)
    tail = log.read_text(errors="replace").strip().splitlines()[-12:]
    rec = dict(name=item.name, what=item.what, command=shlex.join(["python", "-m", f"benchmarks.{item.module}",
                                                                   *(item.smoke if smoke else item.args)]),
               status="ok" if rc == 0 else ("timeout" if rc == 124 else "failed"), returncode=rc, seconds=secs,
               files=files, log=str(log.relative_to(out)), tail=tail)
    if rc == 124:  # where the timed-out child was: its innermost memjax/benchmarks frames from the dump
        frames = [ln.strip() for ln in log.read_text(errors="replace").splitlines()
                  if ln.strip().startswith("File ") and ("/memjax/" in ln or "/benchmarks/" in ln)]
        rec["stuck_at"] = frames[:4]
    if rc != 0:
        errs = [ln for ln in tail if "Error" in ln or "error" in ln]
        rec["error"] = (errs or tail or ["(no output)"])[-1][:400]
    return rec


class _Parsed(Exception):
    """Raised by check_args' parse-only parser right after a successful parse."""


def check_args(item: Item) -> str:
    """Parse both command lines of `item` (GPU scale and smoke scale, with the output flag gpu_pass adds) with
    its module's own argparse parser, in this process, stopping right after the parse (nothing runs, no device
    is touched for the modules --smoke skips: rollout_throughput and train_step build their parser first).
    Returns "" when both parse, else argparse's error line."""
    import argparse
    import contextlib
    import importlib
    import io

    mod = importlib.import_module(f"benchmarks.{item.module}")
    orig = argparse.ArgumentParser.parse_args

    def parse_only(self, args=None, namespace=None):
        orig(self, args, namespace)
        raise _Parsed

    for argv in (item.args, item.smoke):
        err = io.StringIO()
        argparse.ArgumentParser.parse_args = parse_only
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                mod.main([*argv, item.out_flag, "results"])
        except _Parsed:
            continue
        except SystemExit:
            lines = err.getvalue().strip().splitlines()
            return f"{shlex.join(argv)}: " + (lines[-1] if lines else "argument error")
        finally:
            argparse.ArgumentParser.parse_args = orig
        return f"{item.module}.main returned without parsing its arguments"
    return ""


def check_item(item: Item, covering: dict) -> dict:
    """--smoke record of an item whose smoke path `covering` (the record of item.smoke_same_as) ran: its
    arguments checked (check_args), its files those of the covering run."""
    t0 = time.perf_counter()
    err = check_args(item)
    ok = not err and covering["status"] == "ok"
    rec = dict(name=item.name, what=item.what, command=shlex.join(["python", "-m", f"benchmarks.{item.module}",
                                                                   *item.smoke]),
               status="ok" if ok else "failed", returncode=0 if ok else 2, seconds=time.perf_counter() - t0,
               files=covering.get("files", []), smoke_same_as=item.smoke_same_as, tail=[])
    if not ok:
        rec["error"] = err or f"{item.smoke_same_as} (same smoke path) failed"
    return rec


def summary_md(res: dict) -> str:
    lines = [f"GPU pass on **{res['device']}**, commit `{res['commit']}`, `{res['command']}` "
             f"({res['seconds']:.0f} s)", "", "| item | what | status | seconds | files |", "|---|---|---|---|---|"]
    for r in res["items"]:
        st = r["status"] + (f": {r['error']}" if r.get("error") else "")
        lines.append(f"| {r['name']} | {r['what']} | {st.replace('|', '/')} | {r.get('seconds', 0):.0f} | "
                     f"{', '.join(r.get('files', []))} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    names = [i.name for i in ITEMS]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="output folder (results, logs, compilation cache)")
    ap.add_argument("--minutes", type=float, default=25.0, help="time budget; items that would overrun are skipped")
    ap.add_argument("--only", nargs="+", choices=names, default=None)
    ap.add_argument("--skip", nargs="+", choices=names, default=[])
    ap.add_argument("--smoke", action="store_true", help="every item at tiny shapes (runs on CPU)")
    a = ap.parse_args(argv)
    if a.minutes <= 0:
        ap.error("--minutes must be > 0")
    out = a.out.resolve()
    for sub in ("results", "logs", "jax_cache"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", JAX_COMPILATION_CACHE_DIR=str(out / "jax_cache"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0.5")
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.92")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    todo = [i for i in ITEMS if (a.only is None or i.name in a.only) and i.name not in a.skip]
    t_start = time.perf_counter()
    budget = a.minutes * 60
    res = dict(device=device_kind(), commit=git_commit(), smoke=a.smoke,
               command=shlex.join(["python", "-m", "benchmarks.gpu_pass", *(argv if argv is not None else sys.argv[1:])]),
               items=[])
    print(f"gpu_pass on {res['device']} (commit {res['commit']}), {len(todo)} items, budget {a.minutes:g} min",
          flush=True)
    names_todo = {i.name for i in todo}
    covered = {i.name for i in todo if a.smoke and i.smoke_same_as in names_todo}
    recs: dict[str, dict] = {}
    for item in todo:
        if item.name in covered:
            continue
        left = budget - (time.perf_counter() - t_start)
        if not a.smoke and item.est_s > left:
            recs[item.name] = dict(name=item.name, what=item.what, status="skipped (budget)", seconds=0.0)
            print(f"  {item.name:<20} skipped: {left:.0f} s left < estimate {item.est_s:.0f} s", flush=True)
            continue
        rec = recs[item.name] = run_item(item, out, a.smoke, env,
                                         min(item.limit_s, max(left, 30.0)) if not a.smoke else item.limit_s)
        print(f"  {item.name:<20} {rec['status']:<8} {rec['seconds']:6.1f} s  {rec.get('error', '')}", flush=True)
        for ln in rec.get("stuck_at", []):
            print(f"      stuck at {ln[:160]}", flush=True)
        for ln in rec["tail"][-3:]:
            print(f"      {ln[:160]}", flush=True)
    for item in todo:
        if item.name in covered:
            rec = recs[item.name] = check_item(item, recs[item.smoke_same_as])
            print(f"  {item.name:<20} {rec['status']:<8} arguments checked, smoke path run by {item.smoke_same_as}"
                  f"  {rec.get('error', '')}", flush=True)
    res["items"] = [recs[i.name] for i in todo]
    res["seconds"] = time.perf_counter() - t_start
    (out / "gpu_pass.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "gpu_pass.md").write_text(summary_md(res))
    print(summary_md(res))
    return 0 if all(r["status"] in ("ok", "skipped (budget)") for r in res["items"]) else 1


if __name__ == "__main__":
    sys.exit(main())
