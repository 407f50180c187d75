"""Held-out evaluation of a tiny-task policy (the same evaluation `memjax.train` runs during training).

  python -m memjax.evaluate configs/tiny_eval.py --set policy=out/tiny/hf      (a trained policy)
  python -m memjax.evaluate configs/tiny_eval.py                               (the shipped warm start)
"""

from memjax.eval_config import SystemEvalConfig
from memjax.systems.tiny import TinySection

config = SystemEvalConfig(agent=TinySection(heldout_size=256, eval_samples=4), out_dir="out/tiny_eval")
