"""Memory-R2's studies (memjax/systems/memory_r2/, configs/memory_r2/, docs/memory_r2.md): per-token credit of
LoGo-GRPO against per-session and outcome-only GRPO on the same batches (`credit.py`), and LoGo-GRPO against plain
GRPO over seeds (`logo_seeds.py`), on the tiny task. Run as `python -m benchmarks.memory_r2.<name>`; never imports
another paper's studies."""
