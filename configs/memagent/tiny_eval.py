"""Held-out evaluation of a tiny-task policy (the same evaluation `memjax.train` runs during training).

  python -m memjax.evaluate configs/memagent/tiny_eval.py --set policy=out/tiny/hf      (a trained policy)
  python -m memjax.evaluate configs/memagent/tiny_eval.py                               (the shipped warm start)
  python -m memjax.evaluate configs/memagent/tiny_eval.py --set agent.eval_lengths=3,6,12,24,48,96   (accuracy per length)
The last form adds, for every num_chunks N listed, the same held-out questions with documents of N chunks
(results.json metrics `chunks<N>/accuracy`, `chunks<N>/accuracy_hop1`, `chunks<N>/accuracy_hop2`, and
`chunks<N>/accuracy_sampled` when eval_samples > 0): the tiny MemAgent's length extrapolation.
"""

from memjax.cli.eval_config import SystemEvalConfig
from memjax.systems.memagent.tiny.system import TinySection

config = SystemEvalConfig(agent=TinySection(heldout_size=256, eval_samples=4), out_dir="out/tiny_eval")
