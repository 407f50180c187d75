"""PPO on the embedded tiny memory task: configs/tiny.py with GAE advantages from a learned critic.

  python -m memjax.train configs/memagent/tiny_ppo.py [--set seed=1 ...]
The critic is the warm-start policy's backbone with a zero-initialised scalar value head (memjax/rl/critic.py),
its own AdamW (lr 1e-3, 4x the policy's: it starts from nothing), clipped value loss (0.2). Every
conversation of a trajectory is an episode ending in the trajectory's outcome reward (memjax/rl/credit.py);
GAE with gamma = lambda = 1 (Monte-Carlo returns minus the critic's values), advantages whitened over the
batch's trained tokens. Flat groups are kept: with a critic baseline they still carry signal.
"""

import dataclasses
from pathlib import Path

from memjax.core.config import load_config_file
from memjax.rl.advantages import AdvantageConfig
from memjax.rl.credit import CriticConfig

_base = load_config_file(Path(__file__).parent.parent / "tiny.py")
config = dataclasses.replace(
    _base,
    advantage=AdvantageConfig(estimator="gae", gamma=1.0, lam=1.0, whiten=True),
    critic=CriticConfig(lr=1e-3, warmup_steps=0, clip_value=0.2, epochs=1),
    filter_flat_groups=False,
    out_dir="out/tiny_ppo",
)
