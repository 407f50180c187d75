"""SUMER's studies (memjax/systems/sumer/, configs/sumer/): whether GRPO changes how the tiny agent searches
(`search_behaviour.py`). Run as `python -m benchmarks.sumer.<name>`; never imports another paper's studies."""
