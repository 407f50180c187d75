"""The engine in bf16 (the real recipes' compute dtype) against the fp32 model: greedy agreement rate.

Method: the bf16 engine decodes greedily; the fp32 model then scores the engine's own sequences in one full
forward (teacher forcing, so one early disagreement does not derail the rest). At every generated position
the fp32 argmax must equal the engine's token unless fp32 itself nearly ties there (top-1 minus the engine
token's logit below TIE), the agreement rate must be at least MIN_AGREE, and the engine's reported
log-probs must match fp32's log-softmax within LP_TOL (bf16 activations: ~3 significant digits).
The CPU test uses the tiny model (random weights, reference attention); the GPU-tier test (`make test-gpu`)
a Qwen2.5-0.5B-shaped model (random weights, vocab 151,936) with the Pallas paged-attention kernel.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import on_gpu
from memjax.engine import Engine, EngineConfig, KVCacheOptions, KernelOptions, SamplingParams
from memjax.model import init_model, presets
from tests.engine_shapes import SMALL

TIE = 0.1  # fp32 logit gap under which bf16 may pick the other token
MIN_AGREE = 0.9
LP_TOL = 0.1


def _agreement(preset: str, *, n_prompts: int, prompt_len: int, new_tokens: int, engine_cfg: dict) -> dict:
    fp32 = init_model(presets.get(preset), seed=0)
    bf16 = init_model(presets.get(preset, dtype="bfloat16"), seed=0)  # same fp32 master weights, bf16 compute
    rng = np.random.default_rng(0)
    vocab = fp32.cfg.vocab_size
    prompts = [rng.integers(0, vocab, prompt_len).tolist() for _ in range(n_prompts)]
    eng = Engine(bf16, EngineConfig(progress=False, **engine_cfg))
    outs = eng.generate(prompts, SamplingParams(temperature=0.0, max_tokens=new_tokens))
    seqs = jnp.asarray([p + o.token_ids for p, o in zip(prompts, outs)], jnp.int32)
    got = np.asarray([o.token_ids for o in outs])
    lp_engine = np.asarray([o.logprobs for o in outs])
    forward = jax.jit(lambda m, x: m(x)[:, prompt_len - 1: -1])  # predicts each generated token
    gap, lp_ref, agree = [], [], []
    for i in range(0, n_prompts, 8):  # 8 sequences at a time: with vocabulary 151,936 the fp32 logits of 32 take
        logits = np.asarray(forward(fp32, seqs[i:i + 8]), np.float64)  # 3.7 GB, 7.5 GB more as float64
        g = got[i:i + 8]
        chosen, top = np.take_along_axis(logits, g[..., None], -1)[..., 0], logits.max(-1)
        gap.append(top - chosen)
        lp_ref.append(chosen - (np.log(np.exp(logits - top[..., None]).sum(-1)) + top))
        agree.append(logits.argmax(-1) == g)
    gap, lp_ref, agree = (np.concatenate(x) for x in (gap, lp_ref, agree))
    return dict(agree_rate=float(agree.mean()), worst_gap=float(gap.max()), tokens=int(got.size),
                lp_err=float(np.abs(lp_engine - lp_ref).max()))


def _check(r: dict) -> None:
    print(f"bf16 engine vs fp32: {r}")
    assert r["worst_gap"] < TIE, r
    assert r["agree_rate"] >= MIN_AGREE, r
    assert r["lp_err"] < LP_TOL, r


def test_bf16_engine_greedy_agrees_with_fp32_tiny():
    # the loop test_weights.py's bf16 engine compiles (tests/engine_shapes.py)
    _check(_agreement("tiny", n_prompts=8, prompt_len=24, new_tokens=32,
                      engine_cfg={k: v for k, v in SMALL.items() if k != "progress"}))


@pytest.mark.gpu
def test_bf16_engine_greedy_agrees_with_fp32_gpu():
    if on_gpu():
        _check(_agreement("qwen2.5-0.5b", n_prompts=32, prompt_len=128, new_tokens=64,
                          engine_cfg=dict(max_slots=32, page_size=16, window=256, prefill_chunk=128,
                                          kv=KVCacheOptions(kv_cache_gib=2.0),
                                          kernels=KernelOptions(attention="pallas"))))
    else:  # the GPU tier on CPU (MEMJAX_GPU_TIER_ANYWHERE=1: the command runs on the image's packages): the 151,936
        # vocabulary at a quarter of the tokens (the fp32 scoring in float64 numpy was 21 s of the tier's 44 s)
        _check(_agreement("tiny-qwen-vocab", n_prompts=8, prompt_len=64, new_tokens=32,
                          engine_cfg=dict(max_slots=8, page_size=16, window=128, prefill_chunk=64,
                                          kv=KVCacheOptions(kv_cache_gib=2.0),
                                          kernels=KernelOptions(attention="reference"))))
