"""memjax.tiny: the embedded default — a tiny memory task that a 0.6M-parameter Qwen2 learns on a laptop CPU.

task.py (vocabulary, tokenizer, samples, teacher traces), agent.py (model/engine/MemAgent wiring, held-out
evaluation), warmstart.py (SFT on correct traces to partial success; shipped in memjax/assets/tiny/warmstart),
rl.py (Multi-Conv GRPO from the warm start; configs/tiny.py), report.py (reward-curve PNG, terminal report),
full_context.py (the same model reading the whole document in one prompt: the length study's baseline;
shipped in memjax/assets/tiny/full_context).
"""
