"""The System interface and registry: what the one training loop (`python -m memjax.train`) needs to know about one
agent system (MemAgent, the tiny task, SUMER, Memory-R1, Memory-R2, ...).

Owns: `AgentSection` (base class of every system's config section, TrainConfig's `agent`), `System` (the per-system
hooks), `register` / `get` / `names` (the registry keyed by `agent.name`). A system is a workflow plus its data
stream, reward shaping, held-out evaluation and config section; the rest is shared (memjax/rl, memjax/loop/).
Invariants:
- `agent.name` selects the system; `--set agent.name=X` swaps in X's default section, so every field is typed.
- The sampling temperature has one source of truth, `System.temperature`; the trainer's log-probs use it.
- `train_data` is a stateful stream (`next()` one generation batch, `get_state()` / `set_state()` saved in every
  checkpoint) that depends only on (section, seed), so a resumed run sees the same samples; with several processes
  the loop reads `shard_stream(stream, lo, hi)`, each process only its block of every batch.
- `stage(step)` splits training into curriculum stages (default one); `workflow(...)` returns a fresh Workflow,
  run with `run_workflow(engine, wf, samples, group_size=system.group_size, seed=<from (seed, step)>)`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol


@dataclass(frozen=True)
class HeldModel:
    """A model a system holds besides the policy (its reference and critic are the trainer's), served on its
    own Engine: `role` names the plan's rows (`answer_agent_weights`, `answer_agent_kv`, ...); the weights are the
    policy's architecture in its compute dtype (a frozen copy, or a checkpoint of the same model);
    `kv_cache_bytes` is that engine's pool on each device it spans, freed through the update
    (Engine.sleep(weights=False), System.frozen_engines) when the run's engine sleeps; `devices` is the section's
    frozen_devices (FROZEN_DEVICES): "engine" = a full copy and that pool on every device the run's engine spans
    (data-parallel), "one" = on one device. `judge` records how a system's judge is served ("rule", "remote": an
    OpenAI-compatible endpoint, nothing on these devices)."""

    role: str
    kv_cache_bytes: int
    devices: str = "engine"


# Where a frozen model's engine runs (each system section's `frozen_devices`): "engine" = data-parallel over the
# devices the run's policy engine spans on this process (a full copy, the per-device pool and slots on each);
# "one" = one device of them.
FROZEN_DEVICES = ("engine", "one")


def check_frozen_devices(section: str, value: str) -> None:
    """One-line ValueError unless `value` is one of FROZEN_DEVICES."""
    if value not in FROZEN_DEVICES:
        raise ValueError(f"{section}.frozen_devices must be one of {FROZEN_DEVICES}, got {value!r}")


def frozen_engine(model, ecfg, layout: str, devices=None):
    """A frozen model's Engine: `ecfg` is ONE device's config (its slots and KV pool); layout "engine" runs it
    data-parallel on each of `devices` (the totals multiplied by their count: EngineConfig.over_groups); "one", or
    at most one device given, runs it on the first of `devices` (none given: the process's first device)."""
    from ..engine import Engine

    check_frozen_devices("frozen_engine", layout)
    devs = list(devices or [])
    if layout == "engine" and len(devs) > 1:
        return Engine(model, ecfg.over_groups(len(devs)), devices=devs)
    return Engine(model, ecfg, devices=devs[:1] or None)


@dataclass(frozen=True)
class AgentSection:
    """Base of every system's config section; subclasses set a default `name` equal to their System.name
    and define `group_size` and `temperature` fields (and whatever else the system needs)."""

    name: str = ""

    def held_models(self) -> tuple[HeldModel, ...]:
        """The frozen models this system serves on its own engines during training (memjax.plan counts them);
        default none."""
        return ()

    def judge_served(self) -> str:
        """Where the training reward's judge runs: "none", "rule" (host code) or "remote" (an endpoint)."""
        judge = getattr(self, "judge", "")
        return {"": "none", "rule": "rule", "openai": "remote"}.get(judge, str(judge))


class DataStream(Protocol):
    def __next__(self) -> list[Any]: ...

    def get_state(self) -> Any: ...

    def set_state(self, state: Any) -> None: ...


class CountingStream:
    """A DataStream over a pure function `make(start, n) -> list[sample]` (sample i depends only on i):
    the state is the number of samples handed out. `shard(lo, hi)`: the same stream reading only records
    [pos + lo, pos + hi) of each batch of batch_size (one process's block of a generation batch: the others'
    records are never made); its state is the same global position, so every process's state is equal and a
    resume continues every shard exactly. `last_records`: the record indices of the last batch handed out."""

    def __init__(self, make, batch_size: int, lo: int = 0, hi: int | None = None):
        hi = batch_size if hi is None else hi
        if not 0 <= lo <= hi <= batch_size:
            raise ValueError(f"CountingStream: shard [{lo}, {hi}) is not inside a batch of {batch_size}")
        self.make, self.batch_size, self.pos, self.lo, self.hi = make, batch_size, 0, lo, hi
        self.last_records: list[int] = []

    def __iter__(self):
        return self

    def __next__(self) -> list[Any]:
        out = self.make(self.pos + self.lo, self.hi - self.lo) if self.hi > self.lo else []
        self.last_records = list(range(self.pos + self.lo, self.pos + self.hi))
        self.pos += self.batch_size
        return out

    def shard(self, lo: int, hi: int) -> "CountingStream":
        out = CountingStream(self.make, self.batch_size, lo, hi)
        out.pos = self.pos
        return out

    def get_state(self) -> dict:
        return {"pos": self.pos}

    def set_state(self, state: dict) -> None:
        self.pos = int(state["pos"])


class SlicedStream:
    """The block [lo, hi) of every batch of a DataStream that cannot read a shard by itself (a grain pipeline):
    it still reads whole batches and keeps its block; the state is the wrapped stream's."""

    def __init__(self, stream, lo: int, hi: int):
        self.stream, self.lo, self.hi = stream, lo, hi

    def __iter__(self):
        return self

    def __next__(self) -> list[Any]:
        return list(next(self.stream))[self.lo:self.hi]

    def get_state(self) -> Any:
        return self.stream.get_state()

    def set_state(self, state: Any) -> None:
        self.stream.set_state(state)


def shard_stream(stream, lo: int, hi: int):
    """This process's block [lo, hi) of each batch of `stream` (memjax.rl.shares.share): a CountingStream reads
    only its block, another stream is sliced (SlicedStream)."""
    return stream.shard(lo, hi) if hasattr(stream, "shard") else SlicedStream(stream, lo, hi)


class System(abc.ABC):
    """One trainable agent system. Subclass, set `name` and `section`, and decorate with `@register`."""

    name: ClassVar[str]
    section: ClassVar[type[AgentSection]]

    def __init__(self, cfg: AgentSection, *, seed: int = 0):
        if not isinstance(cfg, self.section):
            raise TypeError(f"{type(self).__name__} takes a {self.section.__name__}, got {type(cfg).__name__}")
        self.cfg, self.seed = cfg, seed

    # -- model ------------------------------------------------------------------------------------------
    def load_model(self, source) -> tuple[Any, Any]:
        """(model, tokenizer) for this run; default: the config's ModelSource (HF directory or preset).
        Systems with their own vocabulary (the tiny task) load their own."""
        return source.load()

    def engine_config(self, default):
        """The engine config to use given the TrainConfig's `engine` section (default: unchanged)."""
        return default

    def frozen_engines(self) -> list:
        """The engines of `held_models` that exist now (the loop frees their KV pools through the update)."""
        return []

    frozen_on: list | None = None  # the devices frozen engines may span (place_frozen); None: the default device

    def place_frozen(self, devices) -> None:
        """The devices the run's policy engine spans on this process (the loop calls this before `setup`; under
        split_async the rollout devices only): a frozen engine with frozen_devices="engine" runs data-parallel
        over them (`frozen_engine`)."""
        self.frozen_on = list(devices)

    def retained_kv(self) -> str:
        """What in the training workflow continues a turn's retained KV in the next turn (Request.retain /
        parent), as a clause of a sentence; "" when nothing does. Such a trajectory cannot pause across an
        update that frees the KV pool: schedule=colocated_async refuses it at --check and at start
        (memjax/loop/start.py `check_schedule`). Default: ""."""
        return ""

    def setup(self, model, tokenizer) -> None:
        """Called once after the model loads (before any rollout): e.g. build a frozen answer agent from a
        copy of the initial policy, or an embedder. Default: nothing."""

    # -- rollout ----------------------------------------------------------------------------------------
    @property
    def group_size(self) -> int:
        return int(self.cfg.group_size)

    @property
    def temperature(self) -> float:
        return float(self.cfg.temperature)

    @abc.abstractmethod
    def train_data(self, batch_size: int, seed: int) -> DataStream:
        """The training stream: each `next()` is one generation batch of `batch_size` samples."""

    @abc.abstractmethod
    def workflow(self, engine, tokenizer, *, train: bool = True):
        """A fresh Workflow for training rollouts (train=True: sampled at `temperature`) or evaluation."""

    def stage(self, step: int) -> int:
        """The curriculum stage (0, 1, ...) of 0-based training step `step`: 0 at step 0, growing by 0 or 1 per
        step. The loop evaluates at each stage's end and, with TrainConfig.stage_restart="best", starts the
        next stage from this one's best evaluated checkpoint (memjax/run/curriculum.py). Default: one stage."""
        return 0

    # -- rewards ----------------------------------------------------------------------------------------
    def shape(self, batch, traces: list[dict]):
        """Reward shaping on the built RolloutBatch (e.g. DAPO's overlong penalty); default: unchanged."""
        return batch

    def advantages(self, batch, cfg):
        """Credit assignment the system owns (e.g. Memory-R2's per-session LoGo-GRPO from its own per-row
        rewards): return the batch with `advantages` / `row_advantage` / `row_weight` filled, or None to
        use the configured estimator (TrainConfig.advantage: GRPO variants, or GAE with the critic)."""
        return None

    # -- evaluation -------------------------------------------------------------------------------------
    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        """Held-out metrics of the engine's current weights (floats; keys `traces` and `samples` may hold a
        few readable traces and the samples they belong to). Called before training, every `eval_every`
        steps and at the end. Default: none."""
        return {}


_REGISTRY: dict[str, type[System]] = {}


def register(cls: type[System]) -> type[System]:
    if not getattr(cls, "name", "") or not isinstance(getattr(cls, "section", None), type):
        raise TypeError(f"{cls.__name__}: a System needs a `name` and a `section` class")
    if cls.section().name != cls.name:
        raise TypeError(f"{cls.__name__}: {cls.section.__name__}().name is {cls.section().name!r}, expected "
                        f"{cls.name!r}")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"system {cls.name!r} registered twice ({_REGISTRY[cls.name].__name__}, {cls.__name__})")
    _REGISTRY[cls.name] = cls
    return cls


def get(name: str) -> type[System]:
    if name not in _REGISTRY:
        raise KeyError(f"unknown agent.name {name!r}; known: {', '.join(names())}")
    return _REGISTRY[name]


def names() -> list[str]:
    return sorted(_REGISTRY)


def frozen_copy(model):
    """A model with the same graph and freshly allocated copies of every array (never aliasing `model`), its
    floating-point parameters in the model's compute dtype: a frozen model is only served, so a bf16-compute
    policy's fp32 master weights become one bf16 copy (what its Engine holds anyway)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    graphdef, state = nnx.split(model)
    dt = model.cfg.jnp_dtype if hasattr(model, "cfg") else None
    cast = lambda x: jnp.array(x, dtype=dt if dt is not None and jnp.issubdtype(x.dtype, jnp.floating) else x.dtype,
                               copy=True)
    return nnx.merge(graphdef, jax.tree.map(cast, state))


def build(cfg: AgentSection, *, seed: int = 0) -> System:
    return get(cfg.name)(cfg, seed=seed)
