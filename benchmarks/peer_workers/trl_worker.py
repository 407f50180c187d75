"""TRL (PyTorch) side of benchmarks/peers.py: what TRL's GRPOTrainer generates and scores with when it runs without
vLLM (`use_vllm=False`): the Hugging Face transformers model and its `generate`, on the checkpoint memjax.save_hf
wrote, one JSON request per line.

Runs in its own virtual environment (scripts/make_peer_venv.sh trl: CPU torch, transformers, trl), never imports
memjax. Generation: `model.generate(..., do_sample=False)` under torch.inference_mode with transformers' default
dynamic KV cache (HF's documented static-cache + torch.compile path is not used: on CPU its compile takes minutes
per shape), eos none (every request runs to max tokens, as memjax's does), left padding with pad id = vocab - 1
(never in a prompt). Log-probs: log_softmax of the generation scores (`compute_transition_scores`, normalised).
torch threads: every core (torch.get_num_threads(), printed). Requests and replies as benchmarks/peer_workers/
tunix_worker.py: generate -> {"tokens", "logprobs", "seconds"}; score -> {"logprobs"}; quit.
"""

import json
import sys
import time


def main():
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    ckpt = sys.argv[1]
    model = AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=torch.float32).eval()
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
                out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=req["max_new"],
                                     min_new_tokens=req["max_new"], do_sample=False, pad_token_id=pad,
                                     eos_token_id=None, return_dict_in_generate=True, output_scores=True)
                lp = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
            toks = out.sequences[:, width:].tolist()
            sec = time.perf_counter() - t0
            print(json.dumps({"tokens": toks, "logprobs": lp.double().tolist(), "seconds": sec}), flush=True)
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
