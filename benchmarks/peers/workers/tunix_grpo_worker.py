"""tunix (google-tunix) side of benchmarks/peers/grpo.py: `tunix.rl.grpo.grpo_learner.GRPOLearner.train` on the
checkpoint memjax.save_hf wrote, driven one training step at a time over stdin (one JSON request per line, one reply
per line).

Runs in tunix's virtual environment (scripts/make_peer_venv.sh tunix), never imports memjax. argv: checkpoint
directory, settings JSON (benchmarks.peers.grpo.GRPOSettings fields + "prompt_ids"). The model: tunix's Qwen2 from
`create_model_from_safe_tensors` (as benchmarks/peers/workers/tunix_worker.py). Token ids are the text: a tokenizer
that reads and writes space-separated ids (bos none, pad id V - 1, never in a prompt; eos -1, never produced: every
completion runs to max_tokens_to_generate, as memjax's do).
Set-up: one CPU device, a (1, 1) ("fsdp", "tp") mesh shared by the actor and the rollout roles (so the rollout model
IS the actor: no weight sync), no reference model; RLCluster with the "vanilla" rollout engine (tunix's Sampler:
static [B, prompt + new] KV cache, jitted prefill + while_loop decode), RolloutConfig temperature 1, top_p 1,
top_k None, max_prompt_length = prompt length, max_tokens_to_generate = new; RLTrainingConfig with the whole batch
as one mini-batch and one micro-batch (defaults: prompts x group sequences), actor optimizer
optax.chain(clip_by_global_norm(1), adamw(lr, 0.9, 0.999, 1e-8, weight_decay 0.01)); GRPOConfig num_generations =
group, num_iterations 1 (no old-policy forward: old = the current log-probs detached), beta 0 (no reference forward),
epsilon 0.2 (upper clip = epsilon), loss_agg_mode "token-mean", advantages (r - mean) / (std ddof 1 + 1e-6).
What one step does (RLLearner.train's global step): `_generate_and_compute_advantage` (the sampler call on the
prompts repeated group times, the reward function on the decoded completions, the advantages) = "rollout"; then
`rl_cluster.update_actor` (the jitted train step: forward of prompt + completion, per-token log-probs, the clipped
surrogate, backward, optimizer) = "update", timed until the new parameters are ready (jax.block_until_ready).
Total: from the data iterator handing out the step's prompts to it being asked for the next step's (so it includes
tunix's own bookkeeping between the two: queues, metrics buffering).
Requests: {"cmd": "step"} -> {"rollout_s", "update_s", "total_s", "reward_mean", "completion_tokens",
"adv_nonzero" (the fraction of sequences with a non-zero advantage)}; {"cmd": "quit"}.
"""

import json
import sys
import time

from tunix_worker import IdTokenizer, model_config  # this folder is on sys.path: the worker runs as a script


def reward_fn(prompts, completions, **_):
    """benchmarks.peers.grpo.reward: the fraction of a completion's tokens with an even id."""
    out = []
    for c in completions:
        ids = [int(t) for t in c.split()]
        out.append(sum(1 for t in ids if t % 2 == 0) / max(len(ids), 1))
    return out


def main():
    import jax
    import numpy as np
    import optax
    from flax import nnx
    from tunix.models.qwen2 import params as qparams
    from tunix.rl import rl_cluster as rlc
    from tunix.rl.grpo import grpo_learner
    from tunix.rl.rollout import base_rollout

    ckpt, s = sys.argv[1], json.loads(sys.argv[2])
    hf = json.load(open(f"{ckpt}/config.json"))
    cfg = model_config(hf)
    mesh = jax.make_mesh((1, 1), ("fsdp", "tp"), devices=jax.devices()[:1],
                         axis_types=(jax.sharding.AxisType.Auto,) * 2)  # tunix shards with Auto axes
    with mesh:
        model = qparams.create_model_from_safe_tensors(ckpt, cfg, mesh)
    tok = IdTokenizer(hf["vocab_size"] - 1)
    n = s["prompts"] * s["group"]
    optimizer = optax.chain(optax.clip_by_global_norm(s["grad_clip"]),
                            optax.adamw(s["lr"], b1=0.9, b2=0.999, eps=1e-8, weight_decay=s["weight_decay"]))
    cluster_config = rlc.ClusterConfig(
        role_to_mesh={rlc.Role.ACTOR: mesh, rlc.Role.REFERENCE: mesh, rlc.Role.ROLLOUT: mesh},
        rollout_engine="vanilla", offload_to_cpu=False,
        training_config=rlc.RLTrainingConfig(actor_optimizer=optimizer, eval_every_n_steps=10**9, max_steps=10**9,
                                             pbar_description=None),
        rollout_config=base_rollout.RolloutConfig(max_tokens_to_generate=s["new"], max_prompt_length=s["prompt_len"],
                                                  kv_cache_size=s["prompt_len"] + s["new"] + 8,
                                                  temperature=s["temperature"], top_p=1.0, top_k=None,
                                                  eos_tokens=[-1]))
    cluster = rlc.RLCluster(actor=model, reference=None, tokenizer=tok, cluster_config=cluster_config)
    algo = grpo_learner.GRPOConfig(num_generations=s["group"], num_iterations=1, beta=0.0, epsilon=s["clip"],
                                   loss_agg_mode="token-mean")
    learner = grpo_learner.GRPOLearner(rl_cluster=cluster, algo_config=algo, reward_fns=reward_fn)
    timing = {}

    gen = learner._generate_and_compute_advantage

    def timed_rollout(training_input, mode=rlc.Mode.TRAIN):
        t = time.perf_counter()
        ex = gen(training_input, mode)
        jax.block_until_ready(ex.advantages)
        timing["rollout_s"] = time.perf_counter() - t
        mask = np.asarray(ex.completion_mask)
        ids = np.asarray(ex.completion_ids)
        timing["completion_tokens"] = int(mask.sum())
        timing["reward_mean"] = float(np.mean([np.mean(r[m] % 2 == 0) for r, m in zip(ids, mask.astype(bool))]))
        timing["adv_nonzero"] = float(np.mean(np.abs(np.asarray(ex.advantages)) > 1e-6))
        return ex

    learner._generate_and_compute_advantage = timed_rollout
    upd = cluster.update_actor

    def timed_update(train_ds, eval_ds, skip_jit=False):
        t = time.perf_counter()
        upd(train_ds, eval_ds, skip_jit)
        jax.block_until_ready(nnx.state(cluster.actor_trainer.model))
        timing["update_s"] = time.perf_counter() - t

    cluster.update_actor = timed_update
    prompts = [tok.decode(p) for p in s["prompt_ids"]]

    def steps():
        """The training data: one batch of the prompts per "step" request; asked for the next one, it first
        answers the previous step (whose update has finished by then)."""
        while True:
            line = sys.stdin.readline()
            req = json.loads(line) if line.strip() else {"cmd": "quit"}
            if req["cmd"] == "quit":
                return
            if req["cmd"] != "step":
                print(json.dumps({"error": f"unknown cmd {req['cmd']!r}"}), flush=True)
                return
            t0 = time.perf_counter()
            yield {"prompts": np.asarray(prompts)}  # an array: the learner np.repeat-s every leaf group times
            print(json.dumps({**timing, "total_s": time.perf_counter() - t0}), flush=True)  # the step is done
            timing.clear()

    print(json.dumps({"ready": True, "jax": jax.__version__, "backend": jax.default_backend(),
                      "sequences_per_step": n}), flush=True)
    with mesh:
        learner.train(steps())


if __name__ == "__main__":
    main()
