"""memjax.engine rollout weights: the engine's own copy in EngineConfig.kernels.weight_dtype, refreshed without
recompiling, bit-identical to casting the master at use."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from memjax.engine import Engine, EngineConfig, KernelOptions, SamplingParams
from memjax.model import init_model, presets
from tests.engine_shapes import SMALL as CFG  # the loop other modules compile too


def _prompts(n, seed):
    r = np.random.default_rng(seed)
    return [r.integers(0, 512, int(k)).tolist() for k in r.integers(3, 30, n)]


def test_bf16_copy_of_fp32_master_equals_cast_at_use_and_refreshes_without_recompile():
    # fp32 master, bf16 compute: what the real configs use
    master = init_model(presets.get("tiny", dtype="bfloat16", param_dtype="float32"), seed=1)
    prompts = _prompts(3, 0)
    params = [SamplingParams(temperature=1.0, max_tokens=8, seed=i) for i in range(3)]
    eng = Engine(master, EngineConfig(**CFG))  # weight_dtype="compute" -> bf16
    assert {a.dtype for a in jax.tree.leaves(eng._params)} == {jnp.dtype(jnp.bfloat16)}
    # keeps fp32, casts in the forward
    at_use = Engine(master, EngineConfig(**CFG, kernels=KernelOptions(weight_dtype="float32")))
    a, b = eng.generate(prompts, params), at_use.generate(prompts, params)
    assert [o.token_ids for o in a] == [o.token_ids for o in b]
    assert [o.logprobs for o in a] == [o.logprobs for o in b]  # bit-identical
    runs, casts = eng._run._cache_size(), eng._cast._cache_size()
    # a trainer step: new fp32 master values, refreshed twice
    other = init_model(master.cfg, seed=2)
    for m in (other, master):
        eng.update_weights(nnx.state(m, nnx.Param))
    assert eng._run._cache_size() == runs and eng._cast._cache_size() == casts == 1
    assert [o.token_ids for o in eng.generate(prompts, params)] == [o.token_ids for o in a]
    eng.update_weights(other)
    assert [o.token_ids for o in eng.generate(prompts, params)] != [o.token_ids for o in a]
    assert eng._run._cache_size() == runs


def test_weight_dtype_validated():
    with pytest.raises(ValueError, match="KernelOptions.weight_dtype"):
        EngineConfig(kernels=KernelOptions(weight_dtype="int8"))


def test_committed_weights_compile_the_loop_once():
    """A multi-process trainer hands the engine weights committed to a device (its process's copy). The loop's
    state is committed to the same device, so every call sees one set of argument shardings: one compile for
    generation, weight refreshes and the ring's reset between calls (it compiled twice when the state was not)."""
    model = init_model(presets.get("tiny"), seed=1)
    nnx.update(model, jax.device_put(nnx.state(model, nnx.Param), jax.devices()[0]))
    eng = Engine(model, EngineConfig(**CFG))
    params = [SamplingParams(temperature=1.0, max_tokens=6, seed=i) for i in range(3)]
    for seed in range(3):  # each generate() is several device calls (the ring is reset after each)
        eng.generate(_prompts(3, seed), params)
        eng.update_weights(jax.device_put(nnx.state(init_model(model.cfg, seed=seed + 2), nnx.Param),
                                          jax.devices()[0]))
    assert eng._run._cache_size() == 1
