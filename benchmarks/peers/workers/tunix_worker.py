"""tunix (google-tunix) side of benchmarks/peers/generation.py: loads the Hugging Face checkpoint that memjax.save_hf wrote
with tunix's own Qwen2 loader and serves generation and scoring requests, one JSON object per line.

Runs in tunix's virtual environment (scripts/make_peer_venv.sh tunix), never imports memjax. What it uses is
tunix's documented fast path: `tunix.generate.sampler.Sampler` (jitted prefill + a jitted `while_loop` decode over a
static [B, cache_size] KV cache; greedy when temperature is 0), the model from
`tunix.models.qwen2.params.create_model_from_safe_tensors`. Prompts are token ids: a tokenizer that reads and writes
space-separated ids stands in for a text tokenizer (so the two frameworks see identical ids), bos none, pad id =
vocab - 1 (never in a prompt), eos -1 (never produced: every request runs to max tokens, as memjax's does).
Requests: {"cmd": "generate", "prompts": [[id, ...]], "max_new": N, "prompt_len": P} ->
{"tokens": [[...]], "logprobs": [[...]], "seconds": s} (seconds: the sampler call, host ids in and out);
{"cmd": "score", "seqs": [[...]]} -> {"logprobs": [[...]]} (log_softmax of a full forward at each next token);
{"cmd": "quit"}.
"""

import json
import sys
import time


class IdTokenizer:
    def __init__(self, pad: int):
        self.pad = pad

    def encode(self, text, **_):
        return [int(t) for t in text.split()]

    def decode(self, ids, **_):
        return " ".join(str(int(i)) for i in ids)

    def bos_id(self):
        return 0  # falsy: tunix prepends no bos

    def eos_id(self):
        return -1

    def pad_id(self):
        return self.pad


def model_config(hf: dict):
    """tunix's Qwen2 ModelConfig from a Hugging Face config.json (also used by tunix_grpo_worker.py)."""
    from tunix.models.qwen2 import model as qmodel

    return qmodel.ModelConfig(num_layers=hf["num_hidden_layers"], vocab_size=hf["vocab_size"],
                              embed_dim=hf["hidden_size"], hidden_dim=hf["intermediate_size"],
                              num_heads=hf["num_attention_heads"],
                              head_dim=hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
                              num_kv_heads=hf["num_key_value_heads"], rope_theta=int(hf["rope_theta"]),
                              norm_eps=hf["rms_norm_eps"], use_tied_embedding=hf["tie_word_embeddings"])


def main():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from tunix.generate.sampler import CacheConfig, Sampler
    from tunix.models.qwen2 import params as qparams

    ckpt, cache_size = sys.argv[1], int(sys.argv[2])
    hf = json.load(open(f"{ckpt}/config.json"))
    cfg = model_config(hf)
    model = qparams.create_model_from_safe_tensors(ckpt, cfg)
    tok = IdTokenizer(hf["vocab_size"] - 1)
    sampler = Sampler(model, tok, CacheConfig(cache_size=cache_size, num_layers=cfg.num_layers,
                                               num_kv_heads=cfg.num_kv_heads, head_dim=cfg.head_dim))

    @jax.jit
    def score(tokens):
        b, t = tokens.shape
        pos = jnp.broadcast_to(jnp.arange(t), (b, t))
        mask = jnp.broadcast_to(jnp.tril(jnp.ones((t, t), bool)), (b, t, t))
        logits, _ = model(tokens, pos, None, mask)
        lp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
        return jnp.take_along_axis(lp[:, :-1], tokens[:, 1:, None], -1)[..., 0]

    print(json.dumps({"ready": True, "jax": jax.__version__, "backend": jax.default_backend()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        if req["cmd"] == "generate":
            t0 = time.perf_counter()
            out = sampler([tok.decode(p) for p in req["prompts"]], max_generation_steps=req["max_new"],
                          max_prompt_length=req["prompt_len"], temperature=0.0, eos_tokens=[-1],
                          return_logprobs=True)
            toks = [np.asarray(t).tolist() for t in out.tokens]
            sec = time.perf_counter() - t0
            lps = [np.asarray(x, np.float64).tolist() for x in out.logprobs] if out.logprobs else None
            print(json.dumps({"tokens": toks, "logprobs": lps, "seconds": sec}), flush=True)
        elif req["cmd"] == "score":
            lp = score(jnp.asarray(req["seqs"], jnp.int32))
            print(json.dumps({"logprobs": np.asarray(lp, np.float64).tolist()}), flush=True)
        else:
            print(json.dumps({"error": f"unknown cmd {req['cmd']!r}"}), flush=True)


if __name__ == "__main__":
    main()
