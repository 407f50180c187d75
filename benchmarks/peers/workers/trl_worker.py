"""TRL (PyTorch) side of benchmarks/peers/generation.py: what TRL's GRPOTrainer generates and scores with when it runs without
vLLM (`use_vllm=False`): the Hugging Face transformers model and its `generate`, on the checkpoint memjax.save_hf
wrote, one JSON request per line.

Runs in its own virtual environment (scripts/make_peer_venv.sh trl: CPU torch, transformers, trl), never imports
memjax. Generation: `model.generate(..., do_sample=False)` under torch.inference_mode with transformers' default
dynamic KV cache (HF's documented static-cache + torch.compile path is not used: on CPU its compile takes minutes
per shape), eos none (every request runs to max tokens, as memjax's does), left padding with pad id = vocab - 1
(never in a prompt). Timed: `generate` alone (returning its [b, V] scores per step, 5 GB at batch 64 x 128 tokens,
ran out of memory). Log-probs: one forward over the finished rows, 8 at a time, after the clock stops (TRL's
GRPO computes them with a forward too; memjax's engine returns them with the tokens, inside its time).
torch threads: every core (torch.get_num_threads(), printed). Requests and replies as benchmarks/peers/workers/
tunix_worker.py: generate -> {"tokens", "logprobs", "seconds"}; score -> {"logprobs"}; quit.
"""

import json
import sys
import time


def logprobs(seqs, prompt_mask, width):
    """log p(generated token) of rows [n, width + new] by one forward (as TRL's GRPO computes its log-probs); the
    model is module-global."""
    import torch

    full = torch.cat([prompt_mask, torch.ones(seqs.shape[0], seqs.shape[1] - width, dtype=prompt_mask.dtype)], 1)
    with torch.inference_mode():
        logits = MODEL(seqs, attention_mask=full).logits[:, width - 1: -1].float()
        return torch.log_softmax(logits, -1).gather(-1, seqs[:, width:, None])[..., 0].double()


MODEL = None


def main():
    global MODEL
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    ckpt = sys.argv[1]
    model = MODEL = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    pad = model.config.vocab_size - 1
    import trl  # the framework whose generation path this is (imported so that a broken install shows here)

    print(json.dumps({"ready": True, "torch": torch.__version__, "transformers": transformers.__version__,
                      "trl": trl.__version__, "threads": torch.get_num_threads(), "backend": "cpu"}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        if req["cmd"] == "generate":
            t0 = time.perf_counter()
            prompts = req["prompts"]
            width = max(len(p) for p in prompts)
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
            with torch.inference_mode():
                seqs = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=req["max_new"],
                                      min_new_tokens=req["max_new"], do_sample=False, pad_token_id=pad,
                                      eos_token_id=None)
            sec = time.perf_counter() - t0  # generation only: the log-probs below are not timed
            toks = seqs[:, width:].tolist()
            lps = [row for i in range(0, len(prompts), 8)
                   for row in logprobs(seqs[i: i + 8], mask[i: i + 8], width).tolist()]
            print(json.dumps({"tokens": toks, "logprobs": lps, "seconds": sec}), flush=True)
        elif req["cmd"] == "score":
            with torch.inference_mode():
                seqs = torch.tensor(req["seqs"])
                logits = model(seqs).logits.float()
                lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, seqs[:, 1:, None])[..., 0]
            print(json.dumps({"logprobs": np.asarray(lp, np.float64).tolist()}), flush=True)
        else:
            print(json.dumps({"error": f"unknown cmd {req['cmd']!r}"}), flush=True)


if __name__ == "__main__":
    main()
