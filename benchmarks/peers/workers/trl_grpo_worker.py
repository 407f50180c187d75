"""TRL (PyTorch) side of benchmarks/peers/grpo.py: `trl.GRPOTrainer.train` without vLLM on the checkpoint memjax.save_hf
wrote, driven one optimizer step at a time over stdin (one JSON request per line, one reply per line).

Runs in TRL's virtual environment (scripts/make_peer_venv.sh trl: CPU torch, transformers, trl), never imports
memjax. argv: checkpoint directory, settings JSON (benchmarks.peers.grpo.GRPOSettings fields + "prompt_ids").
Token ids are the text: a word-level tokenizer whose vocabulary is the decimal ids ("0" .. "V-1", split on
whitespace), so TRL sees exactly memjax's prompt ids; pad id V - 1 (never in a prompt), eos = an extra token V that
the model cannot produce (every completion runs to max_completion_length, as memjax's do).
GRPOConfig: num_generations = group, per_device_train_batch_size = prompts x group (the whole rollout batch in one
micro-batch), gradient_accumulation_steps 1, steps_per_generation 1, num_iterations 1 (so TRL computes no old
log-probs: old = the current ones detached), beta 0 (no reference model is built), epsilon 0.2 (epsilon_high = epsilon),
loss_type "dapo" (token mean over the batch), scale_rewards "group" ((r - mean) / (std + 1e-4)), temperature 1,
top_p 1, top_k 0, max_completion_length = new, AdamW (torch) lr, betas (0.9, 0.999), eps 1e-8, weight decay 0.01,
max_grad_norm 1, constant schedule, no warm-up, fp32 on CPU, no shuffling, no logging, no checkpoints.
What one step does (GRPOTrainer.training_step): `_generate_and_score_completions` (the prompts tokenized,
`model.generate(do_sample=True)` with transformers' dynamic KV cache under torch.no_grad, the reward function,
group advantages; no log-prob forward with these settings) = "rollout"; then one forward of prompt + completion with
logits of the completion positions only, the clipped surrogate, backward, clip, AdamW step = "update" (total - rollout).
Timed: the step from the Trainer's on_step_begin to on_step_end callback; the worker blocks in on_step_end until
the next request. Requests: {"cmd": "step"} -> {"rollout_s", "update_s", "total_s", "reward_mean",
"completion_tokens",
"adv_nonzero" (the fraction of sequences with a non-zero advantage)}; {"cmd": "quit"}.
"""

import json
import sys
import time


def reward_fn(prompts, completions, completion_ids=None, **_):
    """benchmarks.peers.grpo.reward: the fraction of a completion's tokens with an even id."""
    return [sum(1 for t in ids if t % 2 == 0) / max(len(ids), 1) for ids in completion_ids]


def main():
    import tempfile

    import torch
    import transformers
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, TrainerCallback

    import trl
    from trl import GRPOConfig, GRPOTrainer

    ckpt, s = sys.argv[1], json.loads(sys.argv[2])
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    v = model.config.vocab_size
    vocab = {str(i): i for i in range(v)}
    vocab["<eos>"] = v  # outside the model's vocabulary: never sampled
    tk = Tokenizer(models.WordLevel(vocab, unk_token=str(v - 1)))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token=str(v - 1), eos_token="<eos>", unk_token=str(v - 1),
                                  padding_side="left")
    model.generation_config.eos_token_id = v
    model.generation_config.bos_token_id = None
    prompts = [" ".join(map(str, p)) for p in s["prompt_ids"]]
    assert [tok(p, add_special_tokens=False)["input_ids"] for p in prompts] == s["prompt_ids"]
    n = s["prompts"] * s["group"]
    out_dir = tempfile.mkdtemp(prefix="trl-grpo-")
    args = GRPOConfig(output_dir=out_dir, num_generations=s["group"], per_device_train_batch_size=n,
                      gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1, beta=0.0,
                      epsilon=s["clip"], loss_type="dapo", scale_rewards="group", temperature=s["temperature"],
                      top_p=1.0, top_k=0, max_completion_length=s["new"], learning_rate=s["lr"],
                      weight_decay=s["weight_decay"], adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
                      max_grad_norm=s["grad_clip"], lr_scheduler_type="constant", warmup_steps=0, max_steps=100_000,
                      shuffle_dataset=False, use_cpu=True, bf16=False, fp16=False, report_to="none",
                      save_strategy="no", logging_steps=100_000, seed=s["seed"], dataloader_num_workers=0,
                      remove_unused_columns=False, disable_tqdm=True, gradient_checkpointing=False)
    ds = Dataset.from_dict({"prompt": prompts})

    class Timed(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            t = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            self.rollout = {"rollout_s": time.perf_counter() - t,
                            "reward_mean": float(sum(reward_fn(None, None, out["completion_ids"].tolist())) / n),
                            "completion_tokens": int(out["completion_mask"].sum()),
                            "adv_nonzero": float((out["advantages"].abs() > 1e-6).float().mean())}
            return out

    class Drive(TrainerCallback):
        """Times each optimizer step and blocks after it until the next request."""

        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            total = time.perf_counter() - self.t0
            r = trainer.rollout
            print(json.dumps({**r, "update_s": total - r["rollout_s"], "total_s": total}), flush=True)
            if not wait_for_step():
                control.should_training_stop = True

    def wait_for_step() -> bool:
        for line in sys.stdin:
            req = json.loads(line)
            if req["cmd"] == "step":
                return True
            if req["cmd"] == "quit":
                return False
            print(json.dumps({"error": f"unknown cmd {req['cmd']!r}"}), flush=True)
        return False

    trainer = Timed(model=model, reward_funcs=reward_fn, args=args, train_dataset=ds, processing_class=tok,
                    callbacks=[Drive()])
    print(json.dumps({"ready": True, "torch": torch.__version__, "transformers": transformers.__version__,
                      "trl": trl.__version__, "threads": torch.get_num_threads(), "backend": "cpu",
                      "optimizer": str(args.optim)}), flush=True)
    if wait_for_step():
        trainer.train()


if __name__ == "__main__":
    main()
