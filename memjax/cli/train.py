"""`python -m memjax.train [CONFIG.py] [--set key=value ...]`: the one RL training loop of every agent system.

Each step: the system's data -> its workflow on the engine with the current weights -> rewards (+ shaping,
ablation) -> group filter / dynamic sampling -> credit assignment (GRPO, GAE with the PPO critic, or the system's
own) -> Trainer.update (the engine sleeps through it when `engine_sleep`) -> weight hand-off to the engine ->
metrics -> held-out evaluation (before, every `eval_every` steps, after) -> orbax checkpoint. The system is
`agent.name` (memagent, tiny, ...; `--set agent.name=X` takes X's defaults); the config is TrainConfig
(memjax/run/train_config.py); `engine.data_parallel=-1` spreads rollouts over the mesh's devices.
Writes to out_dir: metrics.jsonl, evals.jsonl, tb/, traces.jsonl, result.json, reward_curve.png, checkpoints/
(checkpoints_best/ with curriculum selection), hf/ (the final policy), report.html and run.json.
Invariants: the config is validated and out_dir locked before the model loads; a run resumed from its latest
checkpoint reproduces the uninterrupted run bit for bit, its logs cut back to the restored step; a non-finite loss
stops the run before the update applies. Several processes (memjax.launch) give the one-process result.
docs/trainer.md, docs/multihost.md and docs/reliability.md describe the loop, processes and resume.
"""

from __future__ import annotations

# The CLI only: `Run` and `train` live in memjax/loop/run.py and TrainConfig in memjax/run/train_config.py, imported when
# first used, so that --help-less bad arguments and a bad launch environment (memjax.parallel.startup.check_env)
# end before jax loads (tests/e2e/test_imports.py). `from memjax.train import Run, TrainConfig, train` still works.
import sys

from ..core.cli import run_cli
from ..core.lazy import exports, names

__getattr__, __dir__ = exports(globals(), {**names("..loop.run", "Run", "train"),
                                          **names("..run.train_config", "ABLATIONS", "TrainConfig")})


def _default_config():
    from ..run.train_config import TrainConfig

    return TrainConfig()


def _training(cfg):
    """`cfg` when it is a TrainConfig; an evaluation config is one line naming the command it goes to."""
    from ..core.config import ConfigError
    from ..run.train_config import TrainConfig

    if not isinstance(cfg, TrainConfig):
        raise ConfigError(f"config is a {type(cfg).__name__}; memjax.train expects a TrainConfig (an evaluation "
                          "config goes to python -m memjax.evaluate)")
    return cfg


def _train(cfg) -> dict:
    from ..core.outdir import claim_kind
    from ..loop.run import train

    _training(cfg)
    claim_kind(cfg.out_dir, "training", "python -m memjax.train")  # an evaluation's directory is refused
    return train(cfg)


def main(argv: list[str] | None = None) -> int:
    from ..parallel.startup import check_env
    from .check import check_train

    return run_cli("python -m memjax.train", __doc__, argv, _default_config, _train,
                   check=lambda cfg: check_train(_training(cfg)),
                   precheck=check_env)


if __name__ == "__main__":
    sys.exit(main())
