"""memjax.tiny: what every paper's tiny task shares (the tasks themselves are in memjax/systems/<paper>/tiny/).

- `vocab.py`: the shared word lists and `TinyTokenizer` (one word per token);
- `model.py`: the tiny Qwen2-architecture model (0.6M parameters) and its engine settings (48-token window);
- `sft.py`: the supervised step, where warm starts ship (memjax/assets/tiny/) and load-or-train.
The embedded default that `make demo` trains (configs/tiny.py) is MemAgent's tiny task:
memjax/systems/memagent/tiny/.
"""
