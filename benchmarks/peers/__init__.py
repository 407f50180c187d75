"""memjax beside peer frameworks (tunix, TRL, EasyDeL) on the same weights, prompts and machine:
`generation.py` (greedy parity and generation throughput) and `grpo.py` (one GRPO step, rollout and update timed
apart). `workers/` holds the peers' sides, each run in its peer's own virtual environment."""
