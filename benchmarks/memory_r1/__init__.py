"""Memory-R1's studies (memjax/systems/memory_r1/, configs/memory_r1/): the RL memory manager against fixed
policies (`operations.py`) and the answer agent with and without memory distillation (`distill.py`), on the tiny
tasks. Run as `python -m benchmarks.memory_r1.<name>`; never imports another paper's studies."""
