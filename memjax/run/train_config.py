"""TrainConfig: the whole configuration of one `python -m memjax.train` run (typed, frozen, validated).

Owns: the TrainConfig dataclass (its sections and their defaults) and its validation; nothing runs here.
It lives apart from the CLI module so that `python -m memjax.train`, which executes memjax/cli/train.py as
`__main__`, and the config files (`from memjax.run.train_config import TrainConfig`) see one and the same class.
Invariant: a TrainConfig that constructs is a config memjax.train accepts (every field checked in __post_init__).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..checkpoint.source import ModelSource
from ..core.compile_cache import check_compile_cache
from ..engine import EngineConfig
from ..parallel import MeshConfig
from ..rl.advantages import AdvantageConfig
from ..rl.credit import CriticConfig
from ..rl.trainer import LossConfig, OptimConfig, UpdateConfig
from ..systems import AgentSection, MemAgentSection
from .curriculum import check_choices

ABLATIONS = ("none", "shuffle_rewards", "zero_advantages")
SCHEDULES = ("sync", "colocated_async", "split_async")


@dataclass(frozen=True)
class TrainConfig:
    agent: AgentSection = field(default_factory=MemAgentSection)  # the system (agent.name) and its settings
    model: ModelSource = field(default_factory=ModelSource)
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(max_slots=16, window=1024, page_size=16,
                                                                      prefill_slots=4, prefill_chunk=256))
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)  # PPO critic (advantage.estimator="gae")
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    update: UpdateConfig = field(default_factory=UpdateConfig)
    prompts_per_step: int = 4  # samples (questions) per generation batch, x agent group_size trajectories
    steps: int = 10
    eval_every: int = 0  # held-out evaluation every N steps (0 = only before and after training and at stage ends)
    # "sync": generate the step's batch, then update; "colocated_async": later generation batches keep running
    # while the oldest's stragglers finish, paused between turns for the update (memjax/loop/stream.py, docs/async.md)
    # "split_async": `rollout_split` devices generate ahead with weights at most max_staleness updates old while
    # the trainer updates on the others (memjax/loop/split.py; the engine never sleeps: engine_sleep is not used)
    schedule: str = "sync"
    max_staleness: int = 1  # async schedules: generation batches ahead of the one trained (0 = sync's order)
    rollout_split: int = 0  # split_async: devices of the process that roll out (the first ones); 0 with other schedules
    dynamic_sampling: bool = False  # DAPO: refill from more generation batches until prompts_per_step groups vary
    max_gen_batches: int = 3
    filter_flat_groups: bool = False  # drop groups whose rewards are all equal (DAPO's filter without refill)
    ablation: str = "none"  # "shuffle_rewards": permute rewards over the batch; "zero_advantages": all equal
    mesh: MeshConfig = field(default_factory=MeshConfig)  # data x fsdp x tensor (default: all devices on fsdp)
    # hybrid engine: free the engine's KV pool and rollout weights while the trainer updates, so that the
    # two memory peaks do not add (memjax.plan counts the larger of the two phases)
    engine_sleep: bool = True
    # where the engine rolls out (memjax/parallel/placement.py): "all" = every device of the process, data-parallel
    # groups with tensor parallelism only where weights/KV need it (memjax.plan picks); "config" = exactly
    # engine.data_parallel x engine.tensor_parallel (data_parallel=1: one device)
    rollout_devices: str = "all"
    min_kv_gib: float = 16.0  # start-up memory plan (memjax.plan, on GPUs): refuse a config leaving less KV cache
    plan_hbm_gib: float = 0.0  # start-up plan's memory per device; 0 = the devices' own limit (none on CPU: then
    # only the sharding is checked)
    seed: int = 0
    # where metrics go: metrics.jsonl and TensorBoard always; "wandb" / "mlflow" add those trackers (pip install
    # memjax[track]; memjax/loop/trackers.py, docs/trackers.md)
    loggers: tuple[str, ...] = ("jsonl", "tensorboard")
    # persistent XLA compilation cache (memjax/core/compile_cache.py): "auto" = JAX_COMPILATION_CACHE_DIR if set, else on
    # GPUs ~/.cache/memjax/xla (or $XDG_CACHE_HOME/memjax/xla, $MEMJAX_CACHE_DIR/xla), none on CPU; "none"; a folder
    compile_cache: str = "auto"
    out_dir: str = "out/train"
    checkpoint_every: int = 5
    keep_checkpoints: int = 2
    resume: bool = True
    # curriculum stages (System.stage; memjax/run/curriculum.py)
    select_metric: str = ""  # evaluation metric that picks each stage's best checkpoint ("" = no selection)
    select_mode: str = "max"  # "max" | "min"
    stage_restart: str = "best"  # "best": a stage starts from the previous stage's best; "none": continues
    stage_optimizer: str = "reset"  # at a restart: "reset" optimizer state and lr schedule, or "keep" them
    stage_reference: str = "best"  # at a restart the KL reference becomes the restored weights, or "initial"

    def __post_init__(self):
        from ..core.config import check_types

        check_types(self, "TrainConfig")  # a config file's wrong type names its field (as --set does)
        for f in ("steps", "checkpoint_every", "max_gen_batches", "keep_checkpoints", "prompts_per_step"):
            if getattr(self, f) <= 0:
                raise ValueError(f"TrainConfig.{f} must be >= 1, got {getattr(self, f)}")
        if not self.out_dir:
            raise ValueError("TrainConfig.out_dir must not be empty")
        check_compile_cache("TrainConfig", self.compile_cache)
        bad = [n for n in self.loggers if n not in ("jsonl", "tensorboard", "wandb", "mlflow")]
        if bad or not {"jsonl", "tensorboard"} <= set(self.loggers):
            raise ValueError(f"TrainConfig.loggers: jsonl and tensorboard plus any of wandb, mlflow, got {self.loggers}")
        if self.eval_every < 0:
            raise ValueError(f"TrainConfig.eval_every must be >= 0, got {self.eval_every}")
        if self.ablation not in ABLATIONS:
            raise ValueError(f"TrainConfig.ablation must be one of {ABLATIONS}, got {self.ablation!r}")
        if self.rollout_devices not in ("all", "config"):
            raise ValueError(f"TrainConfig.rollout_devices must be 'all' or 'config', got {self.rollout_devices!r}")
        if not self.min_kv_gib >= 0:
            raise ValueError(f"TrainConfig.min_kv_gib must be >= 0, got {self.min_kv_gib}")
        if not (self.plan_hbm_gib >= 0 and self.plan_hbm_gib < float("inf")):
            raise ValueError(f"TrainConfig.plan_hbm_gib must be >= 0 (0 = the devices' limit), got {self.plan_hbm_gib}")
        if not isinstance(self.agent, AgentSection) or not self.agent.name:
            raise ValueError(f"TrainConfig.agent must be a system section (agent.name), got {self.agent!r}")
        check_choices(self)
        if self.dynamic_sampling and self.filter_flat_groups:
            raise ValueError("TrainConfig: dynamic_sampling already drops flat groups; unset filter_flat_groups")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"TrainConfig.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not 0 <= self.max_staleness <= 16:
            raise ValueError(f"TrainConfig.max_staleness must be in 0..16, got {self.max_staleness}")
        if self.schedule == "split_async" and self.rollout_split < 1:
            raise ValueError(f"TrainConfig: schedule=split_async needs rollout_split >= 1 (the devices that roll out), "
                             f"got {self.rollout_split}")
        if self.schedule != "split_async" and self.rollout_split:
            raise ValueError(f"TrainConfig.rollout_split={self.rollout_split} splits the devices for "
                             f"schedule=split_async; schedule={self.schedule} rolls out on the trainer's devices")
        if self.schedule != "sync" and self.dynamic_sampling:
            raise ValueError(f"TrainConfig: schedule={self.schedule} trains one generation batch per step; "
                             "dynamic_sampling refills from several: use filter_flat_groups or schedule=sync")
        off = self.loss.offpolicy
        if off.on and not self.update.recompute_old_logp:
            raise ValueError(f"TrainConfig: loss.offpolicy.mode={off.mode!r} weights by pi_prox / pi_behave, the "
                             "trainer's recomputed log-probs over the engine's: keep update.recompute_old_logp=true")
        if off.on and off.level == "sequence" and self.update.pack:
            raise ValueError("TrainConfig: loss.offpolicy.level='sequence' weights a row as one sequence; packed rows "
                             "hold several: set update.pack=false or loss.offpolicy.level='token'")
        if self.engine.kv.kv_dtype != "compute" and not self.update.recompute_old_logp:
            raise ValueError(f"TrainConfig: engine.kv.kv_dtype={self.engine.kv.kv_dtype!r} makes the rollout's "
                             "log-probs approximate (docs/engine.md, float8 KV cache): keep update.recompute_old_logp=true, so the ratio's "
                             "old log-probs come from the trainer")
