"""EasyDeL side of benchmarks/peers/generation.py: loads the Hugging Face checkpoint that memjax.save_hf wrote with EasyDeL's own
loader and serves generation and scoring requests, one JSON object per line.

Runs in EasyDeL's virtual environment (scripts/make_peer_venv.sh easydel), never imports memjax. Generation uses
EasyDeL's recommended inference engine, eSurge (continuous batching over a paged KV cache; on a non-GPU backend its
default attention is `ragged_page_attention_v3`), built from the checkpoint path the documented way
(`eSurge(model=path, ...)`: it calls AutoEasyDeLModelForCausalLM.from_pretrained itself), fp32 (torch_dtype
float32 too: without it EasyDeL's Hugging Face conversion loads the checkpoint as float16, so the "fp32" weights are
fp16-rounded; measured: the loaded embedding is exactly the fp16 rounding of the checkpoint's), greedy
(temperature 0), ignore_eos (every request runs to its max_tokens, as memjax's do), one request per prompt, each
with its own max_tokens (the skewed workload uses eSurge's own continuous batching). Settings (SETTINGS below:
page size, max_num_seqs = the largest batch asked for, max_model_len, prefix caching off since every prompt is
distinct) go into the ready line, so into the results JSON. Prompts are token ids: a word-level Hugging Face
tokenizer whose words are the decimal ids ("17 4 9" <-> [17, 4, 9]) stands in for a text tokenizer, so both
frameworks see identical ids; eSurge's tokenizer and detokenizer workers run on it as they would on a real one.
Log-probs: a second copy of the model from AutoEasyDeLModelForCausalLM.from_pretrained (its default attention, fp32, no
cache), one full forward.
Requests: {"cmd": "generate", "prompts": [[id, ...]], "max_new": N or [N, ...] (one per prompt), "prompt_len": P}
-> {"tokens": [[...]], "logprobs": null, "seconds": s} (seconds: eSurge.generate, ids in and out);
{"cmd": "score", "seqs": [[...]]} -> {"logprobs": [[...]]}; {"cmd": "quit"}.
"""

import json
import os
import sys
import tempfile
import time

PAGE_SIZE = 16  # memjax's page size in benchmarks/peers/generation.py (eSurge's default, 128, is sized for GPUs)
# eSurge sizes its page pool as hbm_utilization x the device's free memory; a CPU device reports no memory stats, and
# then EasyDeL (easydel.caching.ragged_page.cache.per_device_hbm_budget_bytes) falls back to 4 GiB whatever
# hbm_utilization says (65,536 pages of this model, 6 GB resident). On CPU the worker replaces that fallback with
# the bytes of max_num_seqs full-length sequences: the pool memjax's engine gets in benchmarks/peers/generation.py.
HBM_UTILIZATION = 0.9
# eSurge's default attention on a non-GPU backend first (ragged_page_attention_v3); if it fails, the error is kept
# and the next is tried
ATTENTION = ("default", "ragged_page_attention_v2")


def id_tokenizer(vocab: int, folder: str):
    """A fast tokenizer that maps the word "i" to id i (whitespace-split), saved where eSurge's workers load it. Its
    only special token is str(vocab - 1) (pad and eos, never in a prompt): a special token is matched inside words,
    so a shorter one ("0") would split "145580" into "14558" "0"."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({str(i): i for i in range(vocab)}, unk_token=str(vocab - 1)))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token=str(vocab - 1), eos_token=str(vocab - 1))
    tok.save_pretrained(folder)
    tok = PreTrainedTokenizerFast.from_pretrained(folder)
    probe = [1, 145580, 10, 0, 9, vocab - 2, 151]
    assert tok(tok.decode(probe), add_special_tokens=True)["input_ids"] == probe, "id tokenizer does not round-trip"
    return tok


def main():
    # replies go to the original stdout; anything EasyDeL prints (progress bars, logs) goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def reply(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    import easydel as ed
    from easydel.inference.sampling_params import SamplingParams

    ckpt, cache_size = sys.argv[1], int(sys.argv[2])
    max_seqs = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    hf = json.load(open(f"{ckpt}/config.json"))
    vocab = hf["vocab_size"]
    tokdir = tempfile.mkdtemp(prefix="easydel-idtok-")
    tok = id_tokenizer(vocab, tokdir)
    max_model_len = -(-(cache_size + max_seqs + PAGE_SIZE) // PAGE_SIZE) * PAGE_SIZE  # reserve_tokens = max_seqs
    settings = dict(max_model_len=max_model_len, max_num_seqs=max_seqs, page_size=PAGE_SIZE, dtype="float32",
                    enable_prefix_caching=False, hbm_utilization=HBM_UTILIZATION, reasoning_parser="off",
                    tool_parser="off")
    if jax.default_backend() == "cpu":
        import easydel.caching.ragged_page.cache as ragged

        kv_heads, head_dim = hf["num_key_value_heads"], hf["hidden_size"] // hf["num_attention_heads"]
        pages = max_seqs * -(-max_model_len // PAGE_SIZE)
        pool = pages * 2 * hf["num_hidden_layers"] * PAGE_SIZE * kv_heads * head_dim * 4  # K and V, fp32
        ragged.per_device_hbm_budget_bytes = lambda *_, **__: pool
        settings["cpu_page_pool"] = f"{pages} pages ({pool / 2**20:.0f} MiB), replacing EasyDeL's 4 GiB CPU fallback"
    wanted: dict[str, int] = {}  # request id -> max_tokens, read by eSurge's per-request sampling callback

    def per_request(sp, meta):
        sp.max_tokens = wanted.get(meta["request_id"], sp.max_tokens)
        return sp

    def make(**extra):
        return ed.eSurge(model=ckpt, tokenizer=tok, dtype=jnp.float32, torch_dtype=torch.float32, max_model_len=max_model_len,
                         max_num_seqs=max_seqs, page_size=PAGE_SIZE, enable_prefix_caching=False,
                         hbm_utilization=HBM_UTILIZATION, sampling_params_callback=per_request, silent_mode=True,
                         reasoning_parser="", tool_parser="", **extra)

    failed = {}  # attention mechanism -> the exact error eSurge raised with it
    engine = None
    for attn in ATTENTION:
        try:
            engine = make(**({"attn_mechanism": attn} if attn != "default" else {}))
            break
        except Exception as e:
            failed[attn] = f"{type(e).__name__}: {e}"
            print(f"easydel_worker: eSurge with attention {attn} failed: {failed[attn]}", file=sys.stderr, flush=True)
    if engine is None:
        reply({"error": f"eSurge did not start: {failed}"})
        os._exit(1)
    settings["attn_mechanism"] = str(getattr(engine.runner.model.config, "attn_mechanism", None))
    settings["attention_tried_and_failed"] = failed
    # attention in fp32 too (EasyDeL's attn_dtype defaults to bfloat16; eSurge sets it to its dtype, as here)
    model = ed.AutoEasyDeLModelForCausalLM.from_pretrained(
        ckpt, dtype=jnp.float32, param_dtype=jnp.float32, precision=jax.lax.Precision.DEFAULT, verbose=False,
        torch_dtype=torch.float32,
        config_kwargs=ed.EasyDeLBaseConfigDict(attn_dtype=jnp.float32, kvdtype=jnp.float32,
                                               attn_softmax_dtype=jnp.float32))

    @jax.jit
    def score(graphstate, tokens):
        m = model.merge_module(model.graphdef, graphstate, model.graphother)
        logits = m(input_ids=tokens).logits
        lp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
        return jnp.take_along_axis(lp[:, :-1], tokens[:, 1:, None], -1)[..., 0]

    import importlib.metadata as md

    reply({"ready": True, "easydel": md.version("easydel"), "jax": jax.__version__, "flax": md.version("flax"),
           "backend": jax.default_backend(), "engine": "eSurge", "per_request_max_tokens": True, "settings": settings})
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        try:
            if req["cmd"] == "generate":
                prompts = req["prompts"]
                news = req["max_new"] if isinstance(req["max_new"], list) else [req["max_new"]] * len(prompts)
                t0 = time.perf_counter()
                ids = [f"r{time.monotonic_ns()}-{i}" for i in range(len(prompts))]
                wanted.clear()
                wanted.update(zip(ids, news))
                outs = engine.generate([tok.decode(p) for p in prompts],
                                       SamplingParams(max_tokens=max(news), temperature=0.0, ignore_eos=True),
                                       request_id=ids, use_tqdm=False)
                by_id = {o.request_id: o for o in outs}
                toks = [list(by_id[i].outputs[0].token_ids) for i in ids]
                sec = time.perf_counter() - t0
                reply({"tokens": toks, "logprobs": None, "seconds": sec})
            elif req["cmd"] == "score":
                with model.mesh:  # EasyDeL's modules run under their device mesh
                    lp = score(model.graphstate, jnp.asarray(req["seqs"], jnp.int32))
                reply({"logprobs": np.asarray(lp, np.float64).tolist()})
            else:
                reply({"error": f"unknown cmd {req['cmd']!r}"})
        except Exception as e:  # the exact error goes back to benchmarks/peers/generation.py and into its JSON
            reply({"error": f"{type(e).__name__}: {e}"})
    engine.terminate() if hasattr(engine, "terminate") else None
    os._exit(0)  # eSurge's scheduler and worker threads would otherwise keep the process alive


if __name__ == "__main__":
    main()
