"""`python -m memjax.train [CONFIG.py] [--set key=value ...]`: the one RL training loop of every agent system.

Owns: the loop (its config, TrainConfig, lives in memjax/run/train_config.py)
  system data stream -> the system's workflow on the engine with the current weights (memjax/agents
  run_workflow) -> rewards (+ the system's shaping) -> [ablation] -> group filter / dynamic sampling
  (optional) -> credit assignment (memjax/rl/credit.py: GRPO, or GAE with the PPO critic; or the system's
  own) -> Trainer.update (old/ref log-probs, PPO epochs x mini-batches x micro-batches, AdamW; token- or
  step-level ratios; the engine sleeps through it, its KV pool and rollout weights freed, when
  `engine_sleep`) -> in-process weight hand-off to the engine -> metrics (JSONL + TensorBoard +
  terminal) -> held-out evaluation (System.evaluate: before, every `eval_every` steps, after) -> orbax
  checkpoint.
Rollouts: `engine.data_parallel=-1` spreads the engine over the mesh's devices (D groups of
engine.tensor_parallel = T devices, T = mesh.tensor keeps the trainer's tensor groups; one slot group and 1/D of
the KV pool each, weights resharded from the trainer's layout at every hand-off; engine.max_slots,
prefill_slots, num_pages and kv_cache_bytes are then totals; it also applies when the system brings its own
engine config); the default 1 runs it on one device.
Several processes (memjax.launch, jax.distributed): each process rolls out its block of whole groups on its own
devices and keeps its rollouts' token arrays: the trainer (and the critic with GAE) assemble the global arrays
from every process's own rows (memjax/rl/assemble.py). Only rewards, statistics, row lengths, kept-group counts
(dynamic sampling), scalar sums (GAE's whitening and metrics) and, with a reward ablation, the per-sample (and
per-credit-unit) rewards are exchanged: the ablation permutes or averages the global reward vector and each
process keeps its slice, so every path gives the one-process result.
The system is chosen by `agent.name` from the registry in memjax/systems (memagent, tiny, ...); `--set
agent.name=X` swaps the `agent` section for X's defaults. The sampling temperature has one source: the
system's (`agent...temperature`); the trainer's log-probs use it (`update.temperature` must be left at
its default 1.0 or equal it).
Invariants: rollout seeds derive from (seed, step, generation batch) -- that is the whole RNG state besides
the data stream and the ablation's permutations -- and the data stream's and the ablation generator's states
are saved with each checkpoint, so a run resumed from its latest checkpoint reproduces the uninterrupted run
bit for bit (on the same device kind), also after SIGKILL. A checkpoint (orbax, written asynchronously, committed atomically by rename) holds the parameters,
the optimizer state (and the critic's with GAE), the step, the seed, the data stream state and the
evaluations so far; the last `keep_checkpoints` are kept. A checkpoint that fails to restore is moved aside
into checkpoints_corrupt/ with a warning and the previous one is used; every save is verified
(memjax.checkpoint.run_checkpoints). The whole config is validated and out_dir locked (memjax.runio) before
the model loads; on resume, metrics.jsonl, traces.jsonl and evals.jsonl are cut back to the restored step,
so no line is repeated, and TensorBoard is told to purge events past it (tensorboardX purge_step). A
non-finite loss or gradient stops the run before the update is applied (OptimConfig.on_nonfinite), leaving
the last good checkpoint as the latest and no hf/ export. Outputs in out_dir: metrics.jsonl, evals.jsonl,
TensorBoard events (tb/), traces.jsonl, result.json (config, evaluations before/after, per-step history),
reward_curve.png, checkpoints/, hf/ (the final policy as a Hugging Face checkpoint), report.html (memjax.report) and
run.json (memjax/run/identity.py: what the run is; a resume of another config refuses, a finished run re-run is a
no-op, an extended one keeps what its result.json held).
Curriculum stages (System.stage; memjax/run/curriculum.py): each stage ends with an evaluation and a checkpoint;
with `select_metric` each stage's best evaluated weights go to checkpoints_best/, and `stage_restart="best"`
starts each stage from the previous stage's best (`stage_optimizer`, `stage_reference`: what else restarts).
"""

from __future__ import annotations

# The CLI only: `Run` and `train` live in memjax/loop/run.py and TrainConfig in memjax/run/train_config.py, imported when
# first used, so that --help-less bad arguments and a bad launch environment (memjax.parallel.startup.check_env)
# end before jax loads (tests/e2e/test_imports.py). `from memjax.train import Run, TrainConfig, train` still works.

import sys

from ..config import run_cli
from ..lazy import exports, names

__getattr__, __dir__ = exports(globals(), {**names("..loop.run", "Run", "train"),
                                          **names("..run.train_config", "ABLATIONS", "TrainConfig")})


def _default_config():
    from ..run.train_config import TrainConfig

    return TrainConfig()


def _training(cfg):
    """`cfg` when it is a TrainConfig; an evaluation config is one line naming the command it goes to."""
    from ..config import ConfigError
    from ..run.train_config import TrainConfig

    if not isinstance(cfg, TrainConfig):
        raise ConfigError(f"config is a {type(cfg).__name__}; memjax.train expects a TrainConfig (an evaluation "
                          "config goes to python -m memjax.evaluate)")
    return cfg


def _train(cfg) -> dict:
    from ..loop.run import train
    from ..runio import claim_kind

    _training(cfg)
    claim_kind(cfg.out_dir, "training", "python -m memjax.train")  # an evaluation's directory is refused
    return train(cfg)


def main(argv: list[str] | None = None) -> int:
    from .check import check_train
    from ..parallel.startup import check_env

    return run_cli("python -m memjax.train", __doc__, argv, _default_config, _train,
                   check=lambda cfg: check_train(_training(cfg)),
                   precheck=check_env)


if __name__ == "__main__":
    sys.exit(main())
