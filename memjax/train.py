"""`python -m memjax.train [CONFIG.py] [--set key=value ...]`: Multi-Conv DAPO/GRPO training of MemAgent.

Owns: TrainConfig and the training loop:
  data (grain, RULER-HotpotQA) -> MemAgent rollout on the engine with the current weights -> rewards
  (+ DAPO overlong shaping) -> dynamic sampling (optional) -> Trainer.update (old/ref log-probs,
  advantages, PPO epochs x mini-batches x micro-batches, AdamW) -> in-process weight hand-off to the
  engine -> metrics (JSONL + terminal) -> orbax checkpoint.
Invariants: rollout seeds derive from (seed, step, generation batch) -- that is the whole RNG state -- and
the data order from the grain iterator state saved with each checkpoint, so a run resumed from its latest
checkpoint reproduces the uninterrupted run bit for bit (on the same device kind), also after SIGKILL.
A checkpoint (orbax, written asynchronously, committed atomically by rename) holds the parameters, the
optimizer state, the step, the seed and the data iterator state; the last `keep_checkpoints` are kept.
A checkpoint that fails to restore is moved aside into checkpoints_corrupt/ with a warning and the
previous one is used; every save is verified (memjax.checkpoint.run_checkpoints). The whole config is
validated and out_dir locked (memjax.runio) before the model loads; on resume, metrics.jsonl and
traces.jsonl are cut back to the restored step, so no line is repeated, and TensorBoard is told to purge
events past it (tensorboardX purge_step). A non-finite loss or gradient
stops the run before the update is applied (OptimConfig.on_nonfinite), leaving the last good checkpoint
as the latest and no hf/ export. Outputs in out_dir:
metrics.jsonl, TensorBoard events (tb/), traces.jsonl, checkpoints/, and hf/ (the final policy as a
Hugging Face checkpoint).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from rich.console import Console

from . import flops
from .agents import MemAgent, MemAgentConfig
from .checkpoint import save_hf
from .checkpoint.run_checkpoints import RunCheckpoints, one_line
from .config import ConfigError, run_cli
from .data import HotpotQASource, RulerHotpotQAConfig, load_hotpotqa, make_pipeline
from .engine import Engine, EngineConfig
from .modelsource import ModelSource
from .parallel import initialize, make_mesh
from .rl.advantages import AdvantageConfig
from .rl.dapo import DynamicSampler, overlong_penalty
from .rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig
from .runio import JsonlLog, OutDirLock, prepare_out_dir, tb_writer


@dataclass(frozen=True)
class DataConfig:
    path: str = ""  # HotpotQA JSON (RULER-HotpotQA synthesis)
    num_docs: int = 200  # documents per context (200 ~ 28K tokens: the paper's training set)
    prompts_per_step: int = 4  # questions per generation batch (x memagent.group_size trajectories)
    seed: int = 0

    def __post_init__(self):
        if self.prompts_per_step <= 0 or self.num_docs <= 0:
            raise ValueError(f"DataConfig: prompts_per_step and num_docs must be > 0 (got {self})")


@dataclass(frozen=True)
class TrainConfig:
    model: ModelSource = field(default_factory=ModelSource)
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(max_slots=16, window=1024, page_size=16,
                                                                      prefill_slots=4, prefill_chunk=256))
    memagent: MemAgentConfig = field(default_factory=lambda: MemAgentConfig(
        chunk_tokens=256, max_query_tokens=64, max_memory_tokens=64, max_final_tokens=32, group_size=4))
    data: DataConfig = field(default_factory=DataConfig)
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    update: UpdateConfig = field(default_factory=UpdateConfig)
    steps: int = 10
    dynamic_sampling: bool = False
    max_gen_batches: int = 3
    overlong_buffer: int = 0  # > 0: DAPO overlong penalty on the final answer in its last N tokens
    overlong_penalty: float = 1.0
    mesh_data: int = -1  # data-parallel axis size (-1: all devices)
    seed: int = 0
    out_dir: str = "out/train"
    checkpoint_every: int = 5
    keep_checkpoints: int = 2
    resume: bool = True

    def __post_init__(self):
        for f in ("steps", "checkpoint_every", "max_gen_batches", "keep_checkpoints"):
            if getattr(self, f) <= 0:
                raise ValueError(f"TrainConfig.{f} must be >= 1, got {getattr(self, f)}")
        if not self.out_dir:
            raise ValueError("TrainConfig.out_dir must not be empty")
        if self.overlong_buffer < 0 or not np.isfinite(self.overlong_penalty):
            raise ValueError("TrainConfig: overlong_buffer must be >= 0 and overlong_penalty finite")
        if self.mesh_data == 0 or self.mesh_data < -1:
            raise ValueError(f"TrainConfig.mesh_data must be -1 (all devices) or >= 1, got {self.mesh_data}")


def _shape_rewards(cfg: TrainConfig, batch):
    if cfg.overlong_buffer <= 0:
        return batch
    final = batch.is_final
    resp_len = np.zeros(batch.num_samples, np.int64)
    resp_len[batch.sample[final]] = (batch.lengths - batch.prompt_len)[final]
    pen = overlong_penalty(resp_len, cfg.memagent.max_final_tokens, cfg.overlong_buffer, cfg.overlong_penalty)
    return batch.replace(reward=(batch.reward + pen).astype(np.float32))


class Run:
    """One training run: builds everything from a TrainConfig and steps it; `run()` loops to cfg.steps."""

    def __init__(self, cfg: TrainConfig, console: Console | None = None):
        self.cfg, self.con = cfg, console or Console()
        initialize()
        if not cfg.data.path:
            raise ConfigError("data.path is not set: give a HotpotQA JSON file (--set data.path=...)")
        if not Path(cfg.data.path).is_file():
            raise ConfigError(f"data.path={cfg.data.path}: file not found")
        self.out = prepare_out_dir(cfg.out_dir)  # before any model is loaded: a bad out_dir fails at once
        self._lock = OutDirLock(self.out).acquire()
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        cfg = self.cfg
        try:  # the mesh must match the devices: checked before the model loads
            mesh = make_mesh(data=cfg.mesh_data)
        except ValueError as e:
            raise ConfigError(f"mesh_data={cfg.mesh_data}: {e} (jax sees {jax.device_count()} device(s))") from None
        corpus = load_hotpotqa(cfg.data.path)
        self.model, self.tok = cfg.model.load()
        ref = copy.deepcopy(self.model) if cfg.loss.kl_coef else None
        self.trainer = Trainer(self.model, cfg.optim, cfg.loss, cfg.update, cfg.advantage, ref_model=ref, mesh=mesh)
        self.engine = Engine(self.model, cfg.engine)
        source = HotpotQASource(corpus, RulerHotpotQAConfig(num_docs=cfg.data.num_docs, seed=cfg.data.seed))
        self.data = iter(make_pipeline(source, batch_size=cfg.data.prompts_per_step, seed=cfg.data.seed,
                                       num_epochs=None, drop_remainder=True))
        self.ckpts = RunCheckpoints(self.out / "checkpoints", cfg.keep_checkpoints,
                                    warn=lambda m: self.con.print(m, style="yellow", markup=False))
        self.step = 0
        if cfg.resume:
            self.ckpts.restore_latest(lambda _, step: self._restore(step))
        elif self.ckpts.all_steps():
            raise ConfigError(f"out_dir={cfg.out_dir}: holds checkpoints {self.ckpts.all_steps()} and resume=false; "
                              "use a new out_dir (or resume=true)")
        self.metrics_log, self.traces_log = JsonlLog(self.out / "metrics.jsonl"), JsonlLog(self.out / "traces.jsonl")
        for log in (self.metrics_log, self.traces_log):  # lines past the restored step were never checkpointed
            log.truncate(self.step)
        self._tb = None  # TensorBoard writer, opened on the first step and closed at the end of run()

    # -- checkpoints ----------------------------------------------------------------------------------
    def _state(self):
        return {"model": nnx.state(self.model, nnx.Param).to_pure_dict(),
                "opt": nnx.state(self.trainer.optimizer).to_pure_dict()}

    def save(self) -> None:
        meta = {"step": self.step, "seed": self.cfg.seed, "data": self.data.get_state(),
                "config": dataclasses.asdict(self.cfg)}
        self.ckpts.save(self.step, args=ocp.args.Composite(  # waits for (and verifies) the previous save
            state=ocp.args.StandardSave(self._state()), meta=ocp.args.JsonSave(json.loads(json.dumps(meta, default=str)))))

    def close(self) -> None:
        """Finish (and verify) the save in flight, close the checkpoint manager, release out_dir's lock."""
        try:
            if getattr(self, "ckpts", None) is not None:
                self.ckpts.close()
                self.ckpts = None
            if getattr(self, "_tb", None) is not None:
                self._tb.close()
                self._tb = None
        finally:
            if getattr(self, "_lock", None) is not None:
                self._lock.release()
                self._lock = None

    def _restore(self, step: int) -> None:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, self._state())
        try:
            got = self.ckpts.mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                                       meta=ocp.args.JsonRestore()))
        except Exception:
            self._check_same_model(step)  # another model's checkpoint is a config mistake, not corruption
            raise
        try:  # the checkpoint read back: failing to apply it is a config mismatch, not corruption
            params = nnx.state(self.model, nnx.Param)
            params.replace_by_pure_dict(got["state"]["model"])
            opt = nnx.state(self.trainer.optimizer)
            opt.replace_by_pure_dict(got["state"]["opt"])
            self.data.set_state(got["meta"]["data"])
        except Exception as e:
            raise ConfigError(f"out_dir={self.cfg.out_dir}: checkpoint {step} does not fit this config "
                              f"({one_line(e)}); use a new out_dir") from None
        nnx.update(self.model, params)
        nnx.update(self.trainer.optimizer, opt)
        self.step = int(got["meta"]["step"])
        self.engine.update_weights(self.model)
        self.con.print(f"resumed from {self.out / 'checkpoints'} at step {self.step}")

    def _check_same_model(self, step: int) -> None:
        try:
            meta = self.ckpts.mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
            saved = meta["config"]["model"]
        except Exception:
            return  # unreadable metadata: corruption, handled by the caller
        now = dataclasses.asdict(self.cfg.model)
        diff = [k for k in ("hf_path", "preset", "dtype") if k in saved and saved[k] != now[k]
                and not (k == "preset" and now["hf_path"])]
        if diff:
            raise ConfigError(f"out_dir={self.cfg.out_dir}: checkpoint {step} is of another model ("
                              + ", ".join(f"model.{k}={saved[k]!r}, this config {now[k]!r}" for k in diff)
                              + "); use a new out_dir")

    # -- one step ------------------------------------------------------------------------------------
    def rollout(self):
        cfg = self.cfg
        sampler = DynamicSampler(cfg.data.prompts_per_step, cfg.max_gen_batches if cfg.dynamic_sampling else 1,
                                 pad_id=self.tok.pad_id)
        traces, stats = [], {}
        g = 0
        while True:
            samples = next(self.data)
            mcfg = dataclasses.replace(cfg.memagent, seed=cfg.seed * 1_000_003 + self.step * 97 + g)
            res = MemAgent(self.engine, self.tok, mcfg).run(samples)
            batch = _shape_rewards(cfg, res.batch)
            traces += res.traces
            for k, v in res.stats.items():
                stats[k] = stats.get(k, 0.0) + v
            g += 1
            if not cfg.dynamic_sampling:
                return batch, traces, stats
            if sampler.add(batch):
                kept, info = sampler.take()
                stats.update({f"dyn_{k}": float(v) for k, v in info.items()})
                return kept, traces, stats

    def train_step(self) -> dict:
        t0 = time.perf_counter()
        batch, traces, rstats = self.rollout()
        t1 = time.perf_counter()
        metrics = {"step": self.step + 1, "rollout_s": t1 - t0, "score": float(np.mean([t["reward"] for t in traces])),
                   **{f"rollout_{k}": v for k, v in rstats.items() if not k.startswith("engine_")}}
        mcfg = self.model.cfg
        conv_lens = [] if batch is None else batch.lengths.tolist()
        rollout_flops = flops.estimate(mcfg, [t for t in conv_lens if t > 0], training=False) if conv_lens else 0.0
        if batch is not None:
            metrics.update(self.trainer.update(batch, seed=self.cfg.seed * 7919 + self.step))
            self.engine.update_weights(self.model)
        metrics["update_s"] = time.perf_counter() - t1
        if conv_lens:
            u = self.cfg.update
            passes = u.ppo_epochs * 3 + (1 if u.recompute_old_logp else 0) + (1 if self.cfg.loss.kl_coef else 0)
            train_flops = flops.estimate(mcfg, conv_lens, training=False) * passes
            metrics.update({"conversations": len(conv_lens), "tokens_per_s": sum(conv_lens) / metrics["rollout_s"],
                            "rollout_mfu": flops.mfu(rollout_flops, metrics["rollout_s"]),
                            "update_mfu": flops.mfu(train_flops, metrics["update_s"]),
                            "mean_conversation_tokens": float(np.mean(conv_lens))})
        metrics = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in metrics.items()}
        if self._tb is None:  # opened at the first logged step: the restored step when resuming
            self._tb = tb_writer(self.out / "tb", resumed_step=self.step)
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                self._tb.add_scalar(k, v, self.step + 1)
        self.step += 1
        self.metrics_log.write(metrics)
        self.traces_log.write(*({"step": self.step, **t} for t in traces[:4]))
        if self.step % self.cfg.checkpoint_every == 0 or self.step == self.cfg.steps:
            self.save()
        return metrics

    def run(self) -> list[dict]:
        from rich.progress import Progress

        history = []
        try:
            with Progress(transient=True, console=self.con) as bar:
                task = bar.add_task("training", total=self.cfg.steps, completed=self.step)
                while self.step < self.cfg.steps:
                    m = self.train_step()
                    history.append(m)
                    bar.update(task, completed=self.step)
                    self._print(m)
            self.ckpts.finish()
            save_hf(self.model, self.out / "hf")
        finally:
            self.close()
        self.con.print(f"metrics: {self.out / 'metrics.jsonl'}  tensorboard: {self.out / 'tb'}  "
                       f"checkpoints: {self.out / 'checkpoints'}  policy (HF): {self.out / 'hf'}")
        return history

    def _print(self, m: dict) -> None:
        self.con.print(f"step {m['step']}/{self.cfg.steps}  score {m['score']:.3f}  "
                       f"rollout {m['rollout_s']:.1f}s  update {m['update_s']:.1f}s  "
                       f"mismatch {m.get('logp_mismatch_mean') or float('nan'):.2e}  grad {m.get('grad_norm') or 0:.3g}")


def _train(cfg) -> None:
    """A TrainConfig runs the MemAgent loop above; the embedded tiny task's TinyRLConfig (configs/tiny.py)
    runs its own small loop (memjax.tiny.rl), built from the same engine, workflow and trainer."""
    if isinstance(cfg, TrainConfig):
        Run(cfg).run()
        return
    from .tiny.rl import TinyRLConfig, run

    if not isinstance(cfg, TinyRLConfig):
        raise ConfigError(f"config is a {type(cfg).__name__}; expected TrainConfig or TinyRLConfig")
    run(cfg)


def main(argv: list[str] | None = None) -> int:
    return run_cli("python -m memjax.train", __doc__, argv, TrainConfig(), _train)

if __name__ == "__main__":
    sys.exit(main())
