#!/usr/bin/env bash
# The training loop on a GPU (docs/performance.md): at most 8 minutes on a bare H100/H200 (jax 0.11.2 + CUDA 13 plugin, flax, optax, orbax, torch,
# transformers; no grain, bm25s, wordllama or tensorboardX), everything under one folder:
#   scripts/gpu_block_46.sh OUT            (from the repository root)
# 1. the training-attention GPU tests (cuDNN packed after its dK fix): attention_tests.log; cuDNN packed is used
#    by the runs below only when they pass (else the shipped `auto`), written to summary.txt;
# 2. `python -m memjax.train configs/memagent.py` at Qwen2.5-1.5B (random weights), 28K-token RULER-HotpotQA documents
#    from shared/data/hotpotqa/hotpot_dev_distractor_first100.json (carried with the tree), group 16, E2E_PROMPTS
#    prompts per step (default 1), 3 steps, a
#    checkpoint every step, then the resume check (benchmarks/e2e_memagent.py): run_1.5b/, e2e_1.5b.{json,md,log};
# 3. the 7B scaling table from the 1.5B run's measured rates: scale_7b.{md,json};
# 4. the same at 3B when at least 200 s are left.
# Dry run on CPU at tiny scale: E2E_SCALES="tiny" MEMJAX_GPU_TIER_ANYWHERE=1 scripts/gpu_block_46.sh OUT
set -u
OUT=${1:?usage: scripts/gpu_block_46.sh OUT_DIR}
mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92} PYTHONUNBUFFERED=1
export JAX_LOG_COMPILES=1  # the CPU run suggests the update recompiles each step: the logs say
# the resume (a new process) reads the run's compiled programs instead of compiling them again: a cache hit is the
# executable XLA would build, so the bit-for-bit comparison is unchanged; kept outside OUT (not brought back)
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/memjax_b46_xla_cache}
PY=${PYTHON:-python3}
BUDGET=${BUDGET_S:-470}
SCALES=${E2E_SCALES:-"1.5b 3b"}
PROMPTS=${E2E_PROMPTS:-1}  # x group 16 = 16 documents of ~28K tokens per step: 3 steps + the resume fit the budget
start=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - start) )); }
{ echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
  $PY -c "import jax; print(jax.__version__, jax.devices())"; } > "$OUT/summary.txt" 2>&1

timeout 150 $PY -m pytest -q -p no:cacheprovider -m gpu tests/unit/model/test_flash_attention.py -rA > "$OUT/attention_tests.log" 2>&1
rc=$?
ATT=auto
if [ $rc -eq 0 ] && grep -q "PASSED.*test_cudnn_packed_matches_dense_on_gpu" "$OUT/attention_tests.log" && ! grep -q "^FAILED" "$OUT/attention_tests.log"; then ATT=cudnn; fi
echo "attention tests rc=$rc -> update.attention=$ATT" >> "$OUT/summary.txt"

first=1
for s in $SCALES; do
  l=$(left)
  if [ $first -eq 0 ] && [ "$l" -lt 200 ]; then echo "$s: skipped ($l s left)" >> "$OUT/summary.txt"; continue; fi
  if [ "$l" -lt 60 ]; then echo "$s: skipped ($l s left)" >> "$OUT/summary.txt"; continue; fi
  data=()
  [ "$s" = tiny ] || data=(--data shared/data/hotpotqa/hotpot_dev_distractor_first100.json)
  timeout "$l" $PY -m benchmarks.e2e_memagent --scale "$s" --out "$OUT" --prompts "$PROMPTS" --steps 3 --attention "$ATT" \
      --minutes "$(( l / 60 + 1 ))" "${data[@]}" > "$OUT/e2e_${s}.out" 2>&1
  echo "$s: e2e rc=$? ($(left) s left)" >> "$OUT/summary.txt"
  if [ $first -eq 1 ] && [ -f "$OUT/run_$s/metrics.jsonl" ]; then
    $PY -m benchmarks.scale_7b "$OUT/run_$s" --json "$OUT/scale_7b.json" > "$OUT/scale_7b.md" 2>&1
    echo "scale_7b rc=$?" >> "$OUT/summary.txt"
  fi
  first=0
done
cat "$OUT/summary.txt"
