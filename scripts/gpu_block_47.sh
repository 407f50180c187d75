#!/usr/bin/env bash
# The engine options timed against the default (docs/performance.md), in parts of at most 8 minutes each on a bare
# H100/H200 (jax 0.11.2 + CUDA 13 plugin); everything under OUT, then OUT/i47_part<N>.tgz:
#   scripts/gpu_block_47.sh OUT 1    decode: old vs new engine layout vs new layout + the fused RoPE/KV-write kernel
#                                    (sweep at batch 32 and 256, profiles of the last), the MemAgent 28K rollout and
#                                    the 7B sweep with the new layout
#   scripts/gpu_block_47.sh OUT 2    prefill: the mixed schedule with the ragged kernel (sweep and 28K rollout) and
#                                    length-bucketed prefill; the float8 KV pool (1.5B and 7B sweeps at batch 256)
#   scripts/gpu_block_47.sh OUT 3    the split-K merge inside the decode kernel (fuse_split_combine): its GPU-tier
#                                    race test first, then fuse_rope_kv without and with it (sweep, profiles, greedy)
#   scripts/gpu_block_47.sh OUT 4    XLA command buffers holding the round's loops and conditionals
#                                    (--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL): sweeps with and without
#   scripts/gpu_block_47.sh OUT 5    an evaluation's sampling (top-p): the sampler's truncation pass by bisection (both
#                                    searches) vs 15 thresholds a read, then the sweep at the RL
#                                    recipes' sampling vs MemAgent's eval sampling (T 0.7, top_p 0.95)
# The 1.5B sweeps also save greedy tokens; greedy_*.json says whether each change kept them (benchmarks/greedy_match.py).
# Each line has its own timeout; summary.txt lists every line's exit status and seconds.
# Dry run on CPU (tiny presets, small sizes): I47_DRY=1 scripts/gpu_block_47.sh OUT 1 (and 2).
set -u
OUT=${1:?usage: scripts/gpu_block_47.sh OUT_DIR PART(1|2|3|4|5)}
PART=${2:?usage: scripts/gpu_block_47.sh OUT_DIR PART(1|2|3|4|5)}
mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
if [ "${I47_DRY:-0}" = 1 ]; then  # the same commands at CPU size
  P15=tiny-qwen-vocab; P7=tiny; B_SMALL=4; B_LARGE=8; DT=float32
  SWEEP="--mode sweep --dtype $DT --prompt-len 64 --window 256 --decode-tokens 16 --attention auto"
  M28K="--preset tiny-qwen-vocab --dtype $DT --lengths 2048 --baseline-lengths --batch 4 --repeats 1 --chunk 512 --memory-tokens 64 --final-tokens 16 --window 1024 --prefill-chunk 256"
else
  P15=qwen2.5-1.5b; P7=qwen2.5-7b; B_SMALL=32; B_LARGE=256; DT=bfloat16
  SWEEP="--mode sweep --dtype $DT --prompt-len 1024 --window 2048 --decode-tokens 128 --attention auto"
  M28K="--preset qwen2.5-1.5b --dtype $DT --lengths 28672 --baseline-lengths --batch 64 --repeats 1 --chunk 5000 --memory-tokens 1024 --final-tokens 256 --window 8192 --prefill-chunk 2048"
fi
NEW="--engine kernels.layers=unrolled --engine kernels.fuse_projections=true"
O="$OUT/part$PART"
mkdir -p "$O"
{ echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown) part $PART dry=${I47_DRY:-0}"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
  $PY -c "import jax; print(jax.__version__, jax.devices())"; } > "$O/summary.txt" 2>&1

run() {  # run NAME TIMEOUT_S COMMAND...: output to NAME.log, status and seconds to summary.txt
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$O/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t0 )) s" >> "$O/summary.txt"
}

match() {  # match NAME BEFORE.npy AFTER.npy: greedy-token agreement of two sweeps' batches (CPU, seconds)
  run "$1" 30 $PY -m benchmarks.greedy_match "$2" "$3" --json "$O/$1.json"
}
G="--greedy-tokens"
if [ "$PART" = 1 ]; then
  run sweep_old 70 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_SMALL $B_LARGE --tag _old --out-dir "$O/old"
  run sweep_new 90 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_SMALL $B_LARGE $NEW --tag _new \
      --out-dir "$O/new"
  run sweep_rope_kv 130 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_SMALL $B_LARGE $NEW \
      --engine kernels.fuse_rope_kv=true --tag _rope_kv --profile "$O/profile_rope_kv" --profile-batches $B_SMALL $B_LARGE \
      --out-dir "$O/new"
  for b in $B_SMALL $B_LARGE; do
    match greedy_new_b$b "$O/old/greedy_${P15}_old_b$b.npy" "$O/new/greedy_${P15}_new_b$b.npy"
    match greedy_rope_kv_b$b "$O/new/greedy_${P15}_new_b$b.npy" "$O/new/greedy_${P15}_rope_kv_b$b.npy"
  done
  run memagent_28k_new 140 $PY -m benchmarks.memagent.linearity $M28K $NEW --out-dir "$O/new"
  run sweep_7b_new 80 $PY -m benchmarks.rollout_throughput $SWEEP --preset $P7 --batches $(( B_LARGE / 4 )) $B_LARGE $NEW \
      --tag _new --out-dir "$O/new"
elif [ "$PART" = 2 ]; then
  run sweep_old 60 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_SMALL $B_LARGE --tag _old --out-dir "$O/old"
  run sweep_mixed 90 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_SMALL $B_LARGE \
      --engine schedule=mixed --tag _mixed --out-dir "$O/mixed"
  run sweep_buckets 60 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_LARGE --engine kernels.prefill_buckets=8 \
      --tag _buckets --out-dir "$O/buckets"
  for b in $B_SMALL $B_LARGE; do
    match greedy_mixed_b$b "$O/old/greedy_${P15}_old_b$b.npy" "$O/mixed/greedy_${P15}_mixed_b$b.npy"
  done
  match greedy_buckets_b$B_LARGE "$O/old/greedy_${P15}_old_b$B_LARGE.npy" "$O/buckets/greedy_${P15}_buckets_b$B_LARGE.npy"
  run memagent_28k_mixed 150 $PY -m benchmarks.memagent.linearity $M28K --engine schedule=mixed --out-dir "$O/mixed"
  run sweep_fp8 60 $PY -m benchmarks.rollout_throughput $SWEEP --preset $P15 --batches $B_LARGE --engine kv.kv_dtype=float8_e4m3fn \
      --tag _fp8 --out-dir "$O/fp8"
  run sweep_7b_fp8 90 $PY -m benchmarks.rollout_throughput $SWEEP --preset $P7 --batches $B_LARGE --engine kv.kv_dtype=float8_e4m3fn \
      --tag _fp8 --out-dir "$O/fp8"
elif [ "$PART" = 3 ]; then
  # correctness where programs really race (on CPU: interpret mode at small shapes, MEMJAX_GPU_TIER_ANYWHERE=1)
  run kernel_test 150 env MEMJAX_GPU_TIER_ANYWHERE=${I47_DRY:-0} $PY -m pytest -q -p no:cacheprovider \
      tests/unit/kernels/test_kernels_gpu.py -k "decode_merged or rope_kv"
  run sweep_rope_kv 130 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_SMALL $B_LARGE $NEW \
      --engine kernels.fuse_rope_kv=true --tag _rope_kv --out-dir "$O/new"
  run sweep_merge 130 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_SMALL $B_LARGE $NEW \
      --engine kernels.fuse_rope_kv=true --engine kernels.fuse_split_combine=true --tag _merge --profile "$O/profile_merge" \
      --profile-batches $B_SMALL $B_LARGE --out-dir "$O/new"
  for b in $B_SMALL $B_LARGE; do
    match greedy_merge_b$b "$O/new/greedy_${P15}_rope_kv_b$b.npy" "$O/new/greedy_${P15}_merge_b$b.npy"
  done
elif [ "$PART" = 4 ]; then
  # XLA's command buffers with loops and conditionals inside (CUDA conditional nodes): the 3 branch decisions per
  # round that remain (docs/engine.md, "Host syncs") stay on the GPU if XLA can capture them; default engine, then the
  # unrolled + fused + rope_kv layout, each with the flag (profile at the small batch: are the MemcpyD2H gone?)
  CB="--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
  run sweep_default 70 $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 --batches $B_SMALL $B_LARGE \
      --tag _default --out-dir "$O/cb"
  run sweep_cb 90 env XLA_FLAGS="$CB" $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 \
      --batches $B_SMALL $B_LARGE --tag _cb --profile "$O/profile_cb" --profile-batches $B_SMALL --out-dir "$O/cb"
  run sweep_rope_kv_cb 130 env XLA_FLAGS="$CB" $PY -m benchmarks.rollout_throughput $SWEEP $G --preset $P15 \
      --batches $B_SMALL $B_LARGE $NEW --engine kernels.fuse_rope_kv=true --tag _rope_kv_cb --out-dir "$O/cb"
  for b in $B_SMALL $B_LARGE; do
    match greedy_cb_b$b "$O/cb/greedy_${P15}_default_b$b.npy" "$O/cb/greedy_${P15}_cb_b$b.npy"
  done
elif [ "$PART" = 5 ]; then
  # the sampler's tests on the device first (the sets against numpy sorts at 1, 3 and 15 ways; chi-square draws), then
  # the truncation pass alone (ways 1 = bisection, both searches: the old path; 15 = a GPU's default), timed at both
  # batches with its ratio to no truncation; then what it costs a decode round: the same sweep without and with it
  run sampler_tests 90 $PY -m pytest -q -p no:cacheprovider tests/unit/engine/test_sampler.py
  run sampler 150 $PY -m benchmarks.sampler_truncation --batches $B_SMALL $B_LARGE --json "$O/sampler_truncation.json"
  run sweep_plain 110 $PY -m benchmarks.rollout_throughput $SWEEP --preset $P15 --batches $B_SMALL $B_LARGE $NEW \
      --engine kernels.fuse_rope_kv=true --tag _plain --out-dir "$O/eval"
  run sweep_top_p 150 $PY -m benchmarks.rollout_throughput $SWEEP --preset $P15 --batches $B_SMALL $B_LARGE $NEW \
      --engine kernels.fuse_rope_kv=true --temperature 0.7 --top-p 0.95 --tag _top_p --profile "$O/profile_top_p" \
      --profile-batches $B_SMALL --out-dir "$O/eval"
else
  echo "scripts/gpu_block_47.sh: PART must be 1, 2, 3, 4 or 5, got $PART" >&2
  exit 2
fi
tar czf "$OUT/i47_part$PART.tgz" -C "$OUT" "part$PART"
cat "$O/summary.txt"
