"""Engine hang probe: small engine runs, one subprocess each, stepped one round per device call.

  python -m benchmarks.engine_probe --out-dir DIR [--smoke] [--only NAME ...] [--timeout S] [--budget S]

Why: on an H200 the engine's first `generate` (Qwen2.5-1.5B bf16, 64 prompts of 1024 tokens, prefill_chunk 2048)
stayed inside the loop's dispatch call for minutes. A deviceless XLA:GPU compile for an H100 target
(docs in benchmarks/results/engine_gpu_hang.md) showed the likely cause: the KV write `write_kv` was a scatter
with duplicate indices (every padding row of a prefill round wrote (null page, offset 0)), which XLA:GPU emits
for 16-bit dtypes as a compare-and-swap loop per element, so thousands of padding rows contended on the same
words. The fix drops those rows with distinct out-of-bounds ids and declares the scatter unique (plain stores).
The `legacy_write` case puts the old scatter back (`_legacy_write_kv`) as the A/B control; the
`region_analysis=False` case compiles the loop without LOOP_COMPILER_OPTIONS (memjax/engine/loop.py), which
brings back XLA:GPU's copy of the whole KV pool at the loop's cond/switch branch roots.

Owns `CASES` (name -> engine case: preset, dtype, schedule, attention, page size, prompts, chunk, max_tokens,
legacy_write) and their driver. Each case runs as `python -m benchmarks.engine_probe --run-case NAME` with its own
timeout and a watchdog thread that prints every thread's stack to stderr 4 s before the kill (`_watchdog`:
Python frames taken under the GIL; faulthandler's GIL-free dump of other threads crashed a busy child with
SIGSEGV, so it is only the fallback, 1.5 s before the kill, used when the watchdog never got the GIL), so a hang
costs one case, not the session. The case submits its prompts and calls `Engine.step(max_rounds=1)` until all finish, printing one
JSON line per device call (wall seconds, the device's round counter for that call, cumulative eng.stats);
the driver keeps those lines even when the case is killed. Writes DIR/engine_probe.json: per case status
(ok | timeout | error), seconds, device calls, device rounds, per-call seconds (first = compile + run), final
stats, the last traceback, plus device kind and jax version. `--smoke`: tiny float32 cases on any backend
(the CI test runs it on CPU).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Case:
    preset: str
    dtype: str = "bfloat16"
    schedule: str = "split"
    attention: str = "reference"
    page_size: int = 16
    n_prompts: int = 8
    prompt_len: int = 100
    window: int = 512
    prefill_chunk: int = 256  # > prompt_len: every prefill round has padding rows (what the old scatter serialised)
    prefill_slots: int = 4
    max_tokens: int = 8
    legacy_write: bool = False  # the pre-fix KV scatter (duplicate (null page, 0) writes), as the A/B control
    region_analysis: bool = True  # False: compile the loop without LOOP_COMPILER_OPTIONS (the pool copy is back)
    max_calls: int = 400  # device calls before the case gives up (a loop that never ends is reported as such)


CASES = {  # in order of value for a ~10 minute GPU session (each ~10-40 s)
    "05b_split_ref_p16": Case("qwen2.5-0.5b"),
    "05b_split_ref_p16_legacy": Case("qwen2.5-0.5b", legacy_write=True),
    "05b_split_pallas_p16": Case("qwen2.5-0.5b", attention="pallas"),
    "05b_mixed_ref_p16": Case("qwen2.5-0.5b", schedule="mixed"),
    "05b_split_pallas_p64": Case("qwen2.5-0.5b", attention="pallas", page_size=64),
    "05b_mixed_pallas_p16": Case("qwen2.5-0.5b", schedule="mixed", attention="pallas"),
    "tiny_split_ref_p16": Case("tiny"),
    "15b_sweep_b64_pallas_p64": Case("qwen2.5-1.5b", attention="pallas", page_size=64, n_prompts=64, prompt_len=1024,
                                     window=2048, prefill_chunk=2048, prefill_slots=8, max_tokens=2),
    "05b_nopad_split_pallas_p16": Case("qwen2.5-0.5b", attention="pallas", n_prompts=32, prompt_len=128, window=256,
                                       prefill_chunk=128, max_tokens=16),  # the GPU bf16 test's shapes, no padding
    "05b_split_ref_p16_copy": Case("qwen2.5-0.5b", region_analysis=False),  # cost of the pool copy per round
}
SMOKE = {
    "tiny_split": Case("tiny", dtype="float32", n_prompts=3, prompt_len=10, window=64, prefill_chunk=16, max_tokens=3),
    "tiny_mixed_legacy": Case("tiny", dtype="float32", schedule="mixed", n_prompts=3, prompt_len=10, window=64,
                              prefill_chunk=16, max_tokens=3, legacy_write=True, region_analysis=False),
}


def _legacy_write_kv(pages, layer, new, page_table, start, n_valid, scale=1.0):
    """memjax.engine.paged_kv.write_kv before the fix: padding rows write the null page at offset 0,
    so the scatter has duplicate indices (not declared unique). `scale` (a float8 pool's) as write_kv's."""
    import jax.numpy as jnp

    from memjax.engine.paged_kv import to_pool

    b, t = new.shape[:2]
    s = pages.shape[3]
    pos = start[:, None] + jnp.arange(t, dtype=jnp.int32)[None]
    valid = jnp.arange(t)[None] < n_valid[:, None]
    page_idx = jnp.clip(pos // s, 0, page_table.shape[1] - 1)
    page = jnp.where(valid, jnp.take_along_axis(page_table, page_idx, axis=1), 0)
    off = jnp.where(valid, pos % s, 0)
    vals = to_pool(new.reshape(b * t, *new.shape[2:]), pages.dtype, scale)
    return pages.at[layer, :, page.reshape(-1), off.reshape(-1)].set(vals)


def run_case(case: Case) -> None:
    """In the case's own process: build, then step one round per device call; one JSON line per call."""
    import jax
    import numpy as np

    from memjax.engine import Engine, EngineConfig, KVCacheOptions, KernelOptions, SamplingParams
    from memjax.engine import loop
    from memjax.engine import paged_kv as pa
    from memjax.model import init_model, presets

    if case.legacy_write:
        pa.write_kv = _legacy_write_kv
    if not case.region_analysis:
        loop.LOOP_COMPILER_OPTIONS = {}
    emit = lambda **kw: print(json.dumps(kw), flush=True)
    t0 = time.perf_counter()
    cfg = presets.get(case.preset, param_dtype=case.dtype, dtype=case.dtype)
    model = init_model(cfg, seed=0)
    ecfg = EngineConfig(max_slots=case.n_prompts, page_size=case.page_size, window=case.window,
                        prefill_slots=min(case.prefill_slots, case.n_prompts), prefill_chunk=case.prefill_chunk,
                        schedule=case.schedule, progress=False,
                        kv=KVCacheOptions(num_pages=case.n_prompts * (case.window // case.page_size) + 2),
                        kernels=KernelOptions(attention=case.attention))
    eng = Engine(model, ecfg)
    emit(event="built", seconds=time.perf_counter() - t0, device=jax.devices()[0].device_kind,
         schedule=eng.config.schedule, num_pages=eng.num_pages)
    rng = np.random.default_rng(0)
    sp = SamplingParams(temperature=1.0, max_tokens=case.max_tokens, seed=0)
    rids = {eng.submit(rng.integers(0, cfg.vocab_size, case.prompt_len).tolist(), sp) for _ in range(case.n_prompts)}
    done = 0
    for call in range(case.max_calls):
        t = time.perf_counter()
        before = eng.stats["rounds"]
        done += sum(c.request_id in rids for c in eng.step(max_rounds=1))
        emit(event="call", call=call, seconds=time.perf_counter() - t, rounds=eng.stats["rounds"] - before,
             done=done, stats=dict(eng.stats))
        if done == len(rids):
            emit(event="finished", seconds=time.perf_counter() - t0)
            return
    emit(event="gave_up", calls=case.max_calls, done=done)


def _watchdog(after: float, fallback_after: float) -> None:
    """Start a daemon thread that, `after` seconds from now, writes each thread's stack to stderr in faulthandler's
    layout ("Timeout (...)!" then "Thread 0x... (most recent call first):" blocks, the main thread last) and
    cancels the faulthandler fallback armed here for `fallback_after` seconds."""
    import faulthandler
    import threading
    import traceback

    faulthandler.dump_traceback_later(fallback_after)
    main_id = threading.main_thread().ident

    def dump():
        time.sleep(after)
        frames = sys._current_frames()
        out = [f"Timeout (0:00:{after:05.2f})!\n"]
        for tid in sorted(frames, key=lambda t: t == main_id):
            out.append(f"Thread 0x{tid:016x} (most recent call first):\n")
            for fs in reversed(traceback.extract_stack(frames[tid])):
                out.append(f'  File "{fs.filename}", line {fs.lineno} in {fs.name}\n')
            out.append("\n")
        sys.stderr.write("".join(out))
        sys.stderr.flush()
        faulthandler.cancel_dump_traceback_later()

    threading.Thread(target=dump, name="probe-watchdog", daemon=True).start()


def _last_traceback(err: str) -> str:
    blocks = re.split(r"(?=^(?:Timeout \(|Thread 0x|Current thread 0x|Traceback \(most recent call last\)))", err,
                      flags=re.M)
    tb = [b for b in blocks if b.startswith(("Timeout (", "Thread 0x", "Current thread 0x", "Traceback"))]
    tb = (tb[-1] if tb else err[-2000:]).strip()
    return tb if len(tb) <= 3000 else tb[:600] + "\n  ...\n" + tb[-2400:]  # header and innermost frames


def drive(name: str, timeout: float, log_dir: Path) -> dict:
    env = dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "benchmarks.engine_probe", "--run-case", name, "--timeout", str(timeout)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        out, err, status = p.stdout, p.stderr, "ok" if p.returncode == 0 else f"error (exit {p.returncode})"
    except subprocess.TimeoutExpired as e:
        as_str = lambda x: x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
        out, err, status = as_str(e.stdout), as_str(e.stderr), "timeout"
    secs = time.perf_counter() - t0
    (log_dir / f"{name}.log").write_text(f"$ {' '.join(cmd)}\n--- stdout\n{out}\n--- stderr\n{err}")
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    calls = [x for x in lines if x.get("event") == "call"]
    built = next((x for x in lines if x.get("event") == "built"), {})
    if status == "ok" and not any(x.get("event") == "finished" for x in lines):
        status = "gave_up"
    return dict(status=status, seconds=round(secs, 2), build_s=built.get("seconds"), device=built.get("device"),
                schedule=built.get("schedule"), calls=len(calls), device_rounds=sum(c["rounds"] for c in calls),
                call_seconds=[round(c["seconds"], 4) for c in calls], done=calls[-1]["done"] if calls else 0,
                stats=calls[-1]["stats"] if calls else {}, case=dataclasses.asdict((SMOKE | CASES)[name]),
                last_traceback=_last_traceback(err) if status != "ok" else "")


def main(argv=None) -> dict | None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path)
    ap.add_argument("--smoke", action="store_true", help="tiny float32 cases (CPU is fine)")
    ap.add_argument("--only", nargs="+", help="case names (see CASES / SMOKE)")
    ap.add_argument("--timeout", type=float, default=40.0, help="seconds per case (killed past this)")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for all cases; later ones are skipped")
    ap.add_argument("--run-case", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_case:
        _watchdog(max(args.timeout - 4.0, 1.0), max(args.timeout - 1.5, 1.5))
        run_case((SMOKE | CASES)[args.run_case])
        return None
    if args.out_dir is None:
        ap.error("--out-dir is required")
    names = args.only or list(SMOKE if args.smoke else CASES)
    unknown = [n for n in names if n not in SMOKE | CASES]
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {list(SMOKE | CASES)}")
    log_dir = args.out_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    import jax

    res = dict(jax=jax.__version__, python=sys.version.split()[0], timeout_s=args.timeout, cases={})
    t0 = time.perf_counter()
    for name in names:
        left = args.budget - (time.perf_counter() - t0)
        if left < min(args.timeout, 10.0):
            res["cases"][name] = dict(status="skipped (budget)")
            continue
        r = drive(name, min(args.timeout, left), log_dir)
        res["cases"][name] = r
        print(f"{name}: {r['status']} {r['seconds']} s, {r['calls']} calls, {r['device_rounds']} rounds, "
              f"{r['done']} done; per call s: {r['call_seconds'][:3]}...{r['call_seconds'][-3:]}", flush=True)
        (args.out_dir / "engine_probe.json").write_text(json.dumps(res, indent=2))  # kept if the session ends
    (args.out_dir / "engine_probe.json").write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
