"""memjax next to a peer framework on ONE GRPO step (issue 37 item 4): same weights, prompts, group size, completion
length, loss settings and machine, one run; rollout and update timed apart (benchmarks/results/peers_grpo_<peer>_
<backend>.json).

The step, the same in all three frameworks: --prompts prompts (default 8) of --prompt-len random token ids (32), each
sampled --group times (4) for exactly --new tokens (64; no stop token: every completion has the full length, the same
work everywhere) at temperature 1 (top-p 1, no top-k); reward = the fraction of a completion's tokens with an even id
(`reward`, the same function in every worker; a trivial reward with variance inside a group); GRPO advantages
(r - group mean) / (group std, ddof 1, + 1e-6); the clipped surrogate with eps 0.2 on both sides, token-mean over the
batch, no KL term and no reference model (beta 0), no entropy term; ONE optimizer update per rollout batch (one
iteration, one mini-batch, all group x prompts sequences in ONE micro-batch); AdamW lr --lr, betas (0.9, 0.999), eps
1e-8, weight decay 0.01, global-norm clip 1.0, no warm-up; fp32 everywhere.
What memjax runs (`MemjaxGRPO.step`): rollout = `Engine.generate` (paged KV cache, continuous batching, sampled
tokens and their log-probs from the engine) + the reward + `build_batch`; update = `Trainer.update` (GRPO advantages
of memjax.rl.advantages, one jitted program: fused vocabulary-tiled log-prob forward + backward, clipped surrogate,
AdamW, params donated; old log-probs = the engine's rollout log-probs: `recompute_old_logp=False`, so no extra
forward, as the peers, which take old = the current log-probs detached when there is one iteration) +
`Engine.update_weights` (the engine's own weight copy refreshed). The peers' steps: benchmarks/peers/workers/
tunix_grpo_worker.py (tunix.rl.grpo GRPOLearner.train) and trl_grpo_worker.py (trl.GRPOTrainer.train without vLLM),
each in its own virtual environment, each driven one step at a time over stdin.
Timing: --warmup steps of each (compilation excluded), then --repeats rounds in which a memjax step and a peer step
alternate (interleaved, so machine noise hits both); per step: rollout seconds, update seconds, total; reported min
and median of each and memjax / peer ratios of the totals (peer seconds / memjax seconds: > 1 = memjax faster).
Model: benchmarks/peers/generation.py's (random Qwen2, hidden 256, 4 layers, tied head, the 151,936-token vocabulary, init
scale 10). Run: `python -m benchmarks.peers.grpo --peer tunix` (after `scripts/make_peer_venv.sh tunix`); `--quick`
for a CI-sized run (2 prompts x group 2, 8-token prompts, 8 new tokens, vocabulary 4,096, 1 warm-up, 1 repeat).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
from flax import nnx

from memjax import save_hf
from memjax.engine import Engine, EngineConfig, KVCacheOptions, SamplingParams
from memjax.model import init_model
from memjax.model.config import ModelConfig
from memjax.rl.advantages import AdvantageConfig, grpo_advantages, with_advantages
from memjax.rl.batch import Conversation, build_batch
from memjax.rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig

from .generation import MODEL, RESULTS, ROOT, Worker

PEERS = {"tunix": "tunix_grpo_worker.py", "trl": "trl_grpo_worker.py"}


@dataclass(frozen=True)
class GRPOSettings:
    """One GRPO step's settings, shared by memjax and the peer worker (sent to it as JSON)."""

    prompts: int = 8
    group: int = 4
    prompt_len: int = 32
    new: int = 64
    lr: float = 1e-5
    clip: float = 0.2
    temperature: float = 1.0
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self):
        for f in ("prompts", "prompt_len", "new"):
            if getattr(self, f) <= 0:
                raise ValueError(f"GRPOSettings.{f} must be > 0, got {getattr(self, f)}")
        if self.group < 2:
            raise ValueError(f"GRPOSettings.group must be >= 2 (a group needs a baseline), got {self.group}")
        if self.lr <= 0 or self.clip <= 0 or self.temperature <= 0:
            raise ValueError(f"GRPOSettings: lr, clip and temperature must be > 0 (got {self})")


def reward(token_ids) -> float:
    """The step's reward, the same in every worker: the fraction of the completion's tokens with an even id."""
    ids = list(token_ids)
    return sum(1 for t in ids if t % 2 == 0) / max(len(ids), 1)


def make_model(scale: float, vocab: int, seed: int = 0):
    """benchmarks/peers/generation.py's model with vocabulary `vocab` (MODEL's for the real run, smaller for --quick)."""
    graphdef, state = nnx.split(init_model(ModelConfig(**{**MODEL, "vocab_size": vocab}), seed))
    return nnx.merge(graphdef, jax.tree.map(lambda x: x * scale if x.ndim >= 2 else x, state))


def make_prompts(s: GRPOSettings, vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(s.seed + 5)
    return rng.integers(1, vocab - 1, (s.prompts, s.prompt_len)).tolist()  # never the peers' pad id (vocab - 1)


class MemjaxGRPO:
    """memjax's GRPO step on plain prompts: the engine's rollout and the trainer's update (module docstring)."""

    def __init__(self, model, prompts: list[list[int]], s: GRPOSettings):
        self.model, self.s = model, s
        self.rows = [p for p in prompts for _ in range(s.group)]  # prompt i's group: rows i*G .. i*G+G-1
        n, window = len(self.rows), s.prompt_len + s.new
        self.engine = Engine(model, EngineConfig(max_slots=n, page_size=16, window=window, prefill_slots=min(n, 8),
                                                 prefill_chunk=s.prompt_len, progress=False,
                                                 kv=KVCacheOptions(num_pages=n * -(-window // 16) + 2)))
        self.trainer = Trainer(
            model, OptimConfig(lr=s.lr, warmup_steps=0, weight_decay=s.weight_decay, grad_clip=s.grad_clip),
            LossConfig(clip_low=s.clip, clip_high=s.clip, agg="token-mean", kl_coef=0.0),
            UpdateConfig(micro_rows=n, min_micro_batches=1, recompute_old_logp=False, temperature=s.temperature,
                         pad_tokens=16))
        self.advantage = AdvantageConfig(norm="mean_std", std_ddof=1, eps=1e-6)
        self.sp = SamplingParams(temperature=s.temperature, top_p=1.0, top_k=0, max_tokens=s.new)
        self.steps = 0

    def step(self) -> dict:
        s, t0 = self.s, time.perf_counter()
        outs = self.engine.generate(self.rows, self.sp)
        rewards = [reward(o.token_ids) for o in outs]
        convs = [Conversation(prompt_ids=p, response_ids=o.token_ids, response_logprobs=o.logprobs, sample=i,
                              group=i // s.group, turn=0, is_final=True) for i, (p, o) in enumerate(zip(self.rows, outs))]
        batch = build_batch(convs, rewards, [i // s.group for i in range(len(outs))])
        t1 = time.perf_counter()
        stats = self.trainer.update(with_advantages(batch, self.advantage), seed=self.steps)
        self.engine.update_weights(self.model)
        jax.block_until_ready(nnx.state(self.model, nnx.Param))
        t2 = time.perf_counter()
        self.steps += 1
        adv = grpo_advantages(batch.reward, batch.sample_group, norm="mean_std", eps=1e-6)  # reported, not timed
        return {"rollout_s": t1 - t0, "update_s": t2 - t1, "total_s": t2 - t0,
                "reward_mean": float(np.mean(rewards)), "adv_nonzero": float(np.mean(np.abs(np.asarray(adv)) > 1e-6)),
                "completion_tokens": sum(len(o.token_ids) for o in outs),
                "loss": stats.get("loss"), "grad_norm": stats.get("grad_norm"),
                "optimizer_steps": stats["optimizer_steps"]}


class GRPOWorker(Worker):
    """The peer's GRPO worker process (benchmarks/peers/workers/<peer>_grpo_worker.py): argv = checkpoint, settings
    JSON (GRPOSettings fields + "prompt_ids"); requests {"cmd": "step"} -> one timed step, {"cmd": "quit"}."""

    def __init__(self, python: str, peer: str, ckpt: Path, settings: dict):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JAX_COMPILATION_CACHE_DIR")}
        self.proc = subprocess.Popen([python, str(ROOT / "benchmarks" / "peers" / "workers" / PEERS[peer]), str(ckpt),
                                      json.dumps(settings)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        self.info = self._read()


def _summary(steps: list[dict]) -> dict:
    out = {}
    for k in ("rollout_s", "update_s", "total_s"):
        xs = [st[k] for st in steps]
        out[k] = xs
        out[k.replace("_s", "_min_s")] = min(xs)
        out[k.replace("_s", "_median_s")] = statistics.median(xs)
    return out


def run(args) -> dict:
    s = GRPOSettings(prompts=args.prompts, group=args.group, prompt_len=args.prompt_len, new=args.new, lr=args.lr)
    model = make_model(args.init_scale, args.vocab)
    prompts = make_prompts(s, args.vocab)
    python = args.python or str(ROOT / ".venv-peers" / args.peer / "bin" / "python")
    if not Path(python).exists():
        raise SystemExit(f"benchmarks.peers.grpo: no environment for {args.peer} at {python}; make it with "
                         f"scripts/make_peer_venv.sh {args.peer}")
    with tempfile.TemporaryDirectory(prefix="memjax-peers-grpo-") as tmp:
        save_hf(model, tmp)  # before memjax's first update: both start from the same weights
        worker = GRPOWorker(python, args.peer, Path(tmp), {**s.__dict__, "prompt_ids": prompts})
        try:
            ours = MemjaxGRPO(model, prompts, s)
            warm_ours = [ours.step() for _ in range(args.warmup)]
            warm_theirs = [worker.ask(cmd="step") for _ in range(args.warmup)]
            t_ours, t_theirs = [], []
            for i in range(args.repeats):
                t_ours.append(ours.step())
                t_theirs.append(worker.ask(cmd="step"))
                print(f"round {i}: memjax rollout {t_ours[-1]['rollout_s']:.2f}s update {t_ours[-1]['update_s']:.2f}s"
                      f" | {args.peer} rollout {t_theirs[-1]['rollout_s']:.2f}s update {t_theirs[-1]['update_s']:.2f}s",
                      flush=True)
        finally:
            worker.close()
    m, p = _summary(t_ours), _summary(t_theirs)
    ratio = {k: p[f"{k}_min_s"] / m[f"{k}_min_s"] for k in ("rollout", "update", "total")}
    ratio_median = {k: p[f"{k}_median_s"] / m[f"{k}_median_s"] for k in ("rollout", "update", "total")}
    print(f"GRPO step, min of {args.repeats}: memjax {m['total_min_s']:.2f}s (rollout {m['rollout_min_s']:.2f}, update "
          f"{m['update_min_s']:.2f})  {args.peer} {p['total_min_s']:.2f}s (rollout {p['rollout_min_s']:.2f}, update "
          f"{p['update_min_s']:.2f})  peer/memjax {ratio['total']:.2f}", flush=True)
    return {"benchmark": "peers_grpo", "peer": args.peer, "peer_info": worker.info, "memjax_jax": jax.__version__,
            "backend": jax.default_backend(), "device_kind": jax.devices()[0].device_kind,
            "model": {**MODEL, "vocab_size": args.vocab}, "init_scale": args.init_scale, "dtype": "float32",
            "settings": s.__dict__, "reward": "fraction of completion tokens with an even id",
            "warmup": args.warmup, "repeats": args.repeats,
            "memjax": {**m, "steps": t_ours, "warmup_steps": warm_ours},
            "peer_steps": {**p, "steps": t_theirs, "warmup_steps": warm_theirs},
            "ratio_peer_over_memjax_min": ratio, "ratio_peer_over_memjax_median": ratio_median}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", required=True, choices=sorted(PEERS))
    ap.add_argument("--python", default="", help="the peer environment's python (default .venv-peers/PEER)")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--vocab", type=int, default=MODEL["vocab_size"])
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--init-scale", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true", help="CI size: 2 prompts x 2, 8 + 8 tokens, vocab 4096, 1 + 1 step")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON path (default results/peers_grpo_<peer>_<backend>.json; --quick: not written)")
    args = ap.parse_args(argv)
    if args.quick:
        args.prompts, args.group, args.prompt_len, args.new, args.vocab, args.warmup, args.repeats = 2, 2, 8, 8, 4096, 1, 1
    if args.warmup < 0 or args.repeats <= 0 or args.vocab < 16:
        ap.error("--warmup must be >= 0, --repeats > 0, --vocab >= 16")
    try:
        GRPOSettings(prompts=args.prompts, group=args.group, prompt_len=args.prompt_len, new=args.new, lr=args.lr)
    except ValueError as e:
        ap.error(str(e))
    res = run(args)
    out = args.out or (None if args.quick else RESULTS / f"peers_grpo_{args.peer}_{res['backend']}.json")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {out}")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
