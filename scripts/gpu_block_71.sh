#!/usr/bin/env bash
# colocated_async against sync on one GPU (docs/async.md): at most 8 minutes on a bare H100/H200, under one folder:
#   scripts/gpu_block_71.sh OUT            (from the repository root)
# The product's command (`python -m memjax.train configs/memagent.py`, benchmarks/e2e_memagent.py's overrides:
# Qwen2.5-1.5B random weights, 28K-token RULER-HotpotQA documents from shared/data/hotpotqa/, group 16, ASYNC_PROMPTS
# prompts per step (default 2), ASYNC_STEPS steps (default 4)) twice, same seed: schedule=sync, then
# schedule=colocated_async with max_staleness 1. Writes run_sync/, run_colocated_async/, their logs and
# async_gpu.json / summary.txt: seconds per step over steps 2.. (step 1 compiles), the ratio, the staleness of the
# trained tokens. One GPU holds one device group, so split_async (a rollout group beside a trainer group) is not run.
# Dry run on CPU at tiny scale: ASYNC_SCALE=tiny scripts/gpu_block_71.sh OUT; ASYNC_CHECK=1: each command with
# --check only (what tests/e2e/benchmarks/test_gpu_block_async.py runs).
set -u
OUT=${1:?usage: scripts/gpu_block_71.sh OUT_DIR}
mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92} PYTHONUNBUFFERED=1
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/memjax_b71_xla_cache}  # the second run reuses
PY=${PYTHON:-python3}
BUDGET=${BUDGET_S:-470}
SCALE=${ASYNC_SCALE:-1.5b}
PROMPTS=${ASYNC_PROMPTS:-2}
STEPS=${ASYNC_STEPS:-4}
DATA=shared/data/hotpotqa/hotpot_dev_distractor_first100.json
[ "$SCALE" = tiny ] && DATA=tests/fixtures/data/hotpotqa_dev_excerpt.json
start=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - start) )); }
{ echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
  $PY -c "import jax; print(jax.__version__, jax.devices())"; } > "$OUT/summary.txt" 2>&1
for sched in sync colocated_async; do
  l=$(left)
  if [ "$l" -lt 60 ]; then echo "$sched: skipped ($l s left)" >> "$OUT/summary.txt"; continue; fi
  # the first run gets at most half of what is left, so the second has as long
  [ "$sched" = sync ] && l=$(( l / 2 ))
  mapfile -t cmd < <($PY -c "
import sys
from benchmarks.e2e_memagent import command
for a in command('$SCALE', '$OUT/run_$sched', '$DATA', prompts=$PROMPTS, steps=$STEPS)[1:]: print(a)")
  check=(); [ "${ASYNC_CHECK:-0}" = 1 ] && check=(--check)
  timeout "$l" $PY "${cmd[@]}" --set "schedule=$sched" --set max_staleness=1 --set keep_checkpoints=1 \
      --set checkpoint_every=1000 "${check[@]}" > "$OUT/run_$sched.log" 2>&1
  echo "$sched: rc=$? ($(left) s left)" >> "$OUT/summary.txt"
done
$PY - "$OUT" >> "$OUT/summary.txt" 2>&1 <<'EOF'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
res = {}
for s in ("sync", "colocated_async"):
    p = out / f"run_{s}" / "metrics.jsonl"
    rows = [json.loads(x) for x in p.read_text().splitlines()] if p.is_file() else []
    later = rows[1:] or rows
    res[s] = {"steps": len(rows), "s_per_step": statistics.fmean(r["step_s"] for r in later) if later else None,
              "rollout_s": statistics.fmean(r["rollout_s"] for r in later) if later else None,
              "staleness_token_mean": statistics.fmean(r.get("rollout_staleness_token_mean") or 0.0 for r in later)
              if later else None}
a, b = res["sync"]["s_per_step"], res["colocated_async"]["s_per_step"]
res["steps_per_hour_ratio"] = a / b if a and b else None
(out / "async_gpu.json").write_text(json.dumps(res, indent=1) + "\n")
print(json.dumps(res))
EOF
cat "$OUT/summary.txt"
