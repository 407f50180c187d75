"""Issue 47's engine options on CPU: the engine's own weight layout (layers="unrolled", fuse_projections) and the
length-bucketed prefill (prefill_buckets) give the default path's greedy tokens and log-probs (fp32), and have
the structure the GPU measurement ties to speed: no layer scan (no weight read at a loop-dependent offset),
4 weight GEMMs per layer instead of 7, and < 10% prefill padding on the sweep's workload (50% before). The fused decode
prologue (fuse_rope_kv: memjax/kernels/rope_kv.py) gives the same tokens and log-probs, with one kernel call per layer
and no K/V scatter left in the decode round, also with the attention merging its own splits (fuse_split_combine:
memjax/kernels/decode_merged.py); their settings are validated."""

import numpy as np
import pytest

import jax
import jax.extend
from flax import nnx

from benchmarks.gpu_aot_rounds import mixed_padding, prefill_padding
from memjax.engine.config import EngineConfig, KernelOptions, SamplingParams
from memjax.engine.engine import Engine
from memjax.engine.loop import make_rounds
from memjax.engine.state import init_counters, init_pool, init_ring, init_slots
from memjax.engine.weights import engine_layout
from memjax.kernels import engine_attend
from memjax.model import init_model, presets

BASE = dict(max_slots=4, window=128, page_size=16, prefill_slots=2, prefill_chunk=32, schedule="split",
            progress=False)
NEW = dict(layers="unrolled", fuse_projections=True, prefill_buckets=4)


@pytest.fixture(scope="module")
def model():
    return init_model(presets.get("tiny", num_layers=3), 0)


@pytest.fixture(scope="module")
def runs(model):
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 512, size=n).tolist() for n in (5, 17, 40, 3, 70)]
    out = {}
    for name, extra in (("old", {}), ("new", NEW)):
        eng = Engine(model, EngineConfig(**BASE, kernels=KernelOptions(**extra)))
        out[name] = (eng.generate(prompts, SamplingParams(temperature=0, max_tokens=10)), dict(eng.stats))
    return out


@pytest.mark.slow(seconds=80)
def test_unrolled_fused_bucketed_engine_matches_default(runs):
    (old, st_old), (new, st_new) = runs["old"], runs["new"]
    assert [c.token_ids for c in new] == [c.token_ids for c in old]
    np.testing.assert_allclose(np.concatenate([c.logprobs for c in new]), np.concatenate([c.logprobs for c in old]),
                               atol=1e-5, rtol=0)
    assert st_new["prefill_tokens"] == st_old["prefill_tokens"] == 135
    # every old prefill round ran [2, 32] rows; the bucketed ones ran at 8/16/24/32 tokens
    assert st_old["prefill_executed"] == 2 * 32 * st_old["prefill_rounds"]
    assert st_old["prefill_tokens"] <= st_new["prefill_executed"] < st_old["prefill_executed"]


def _weight_gemms(jaxpr, shapes) -> tuple[int, int]:
    """(dot_generals with a weight-shaped 2-D right operand, scans whose body holds one), sub-jaxprs walked once."""
    gemms = scans = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general" and tuple(eqn.invars[1].aval.shape) in shapes:
            gemms += 1
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            g, s = _weight_gemms(sub, shapes)
            gemms, scans = gemms + g, scans + s + (eqn.primitive.name == "scan" and g > 0)
    return gemms, scans


@pytest.mark.parametrize("extra,layer_scan,gemms", [({}, True, 7), (NEW, False, 4 * 3)])
def test_decode_round_structure(model, extra, layer_scan, gemms):
    cfg, ecfg = model.cfg, EngineConfig(**BASE, kernels=KernelOptions(**extra))
    h, i, q, kv = cfg.hidden_size, cfg.intermediate_size, cfg.q_size, cfg.kv_size
    shapes = {(h, q), (h, kv), (q, h), (h, i), (i, h), (h, q + 2 * kv), (h, 2 * i)}
    params = nnx.state(model, nnx.Param)
    if extra:
        params = engine_layout(params, cfg, ecfg)
    rounds = make_rounds(nnx.graphdef(model), cfg, ecfg)
    jaxpr = jax.make_jaxpr(rounds.decode)(params, init_slots(ecfg), init_pool(cfg, ecfg, 40), init_ring(ecfg),
                                          init_counters())
    n, scans = _weight_gemms(jaxpr.jaxpr, shapes)
    assert scans == int(layer_scan)  # a scan over layers reads layer i's weights at a loop-dependent offset
    assert n == gemms  # scan: 7 in the body, run L times; unrolled + fused: qkv, o, gate_up, down per layer


def test_bucketed_prefill_padding_on_the_sweep_workload():
    sweep = dict(max_slots=256, prefill_slots=8, window=2048, page_size=64, prefill_chunk=2048)
    old = prefill_padding([1024] * 256, EngineConfig(**sweep))
    new = prefill_padding([1024] * 256, EngineConfig(**sweep, kernels=KernelOptions(prefill_buckets=8)))
    assert old["padding"] == 0.5 and new["padding"] == 0.0 and new["useful_tokens"] == old["useful_tokens"]
    # uneven prompts (MemAgent-like 4.9-6.2K in 64 rows): lengths cut the padding from 32% to 11%; the rest is the
    # last round's ragged remainders, which one length per round cannot fit (BUILD.md, issue 47: ragged rows)
    rng = np.random.default_rng(0)
    lens = rng.integers(4900, 6200, size=64).tolist()
    mem = dict(max_slots=64, prefill_slots=64, window=8192, page_size=64, prefill_chunk=2048)
    assert prefill_padding(lens, EngineConfig(**mem))["padding"] > 0.3
    assert prefill_padding(lens, EngineConfig(**mem, kernels=KernelOptions(prefill_buckets=16)))["padding"] < 0.12
    # the mixed schedule (ragged rows; on a GPU through memjax/kernels/ragged_paged_attention.py): the round's unused
    # rows only, 0.02% here (tests/unit/engine/test_mixed.py checks this count against the engine's own stats)
    mixed = mixed_padding(lens, EngineConfig(**mem, schedule="mixed"))
    assert mixed["useful_tokens"] == sum(lens) and mixed["padding"] < 0.01, mixed


ROPE_KV = {"scan, reference attention": dict(fuse_rope_kv=True),
           "unrolled + fused, pallas attention": dict(fuse_rope_kv=True, attention="pallas", **NEW),
           "scan, pallas attention, splits merged in the kernel": dict(fuse_rope_kv=True, fuse_split_combine=True,
                                                                     attention="pallas")}


@pytest.mark.slow(seconds=20)
@pytest.mark.parametrize("extra", list(ROPE_KV.values()), ids=list(ROPE_KV))
def test_fused_rope_kv_decode_matches_default(model, runs, extra):
    """EngineConfig.kernels.fuse_rope_kv (memjax/kernels/rope_kv.py, interpreted on CPU): the default's greedy tokens and
    log-probs (fp32), its decode rounds through the kernel (one per layer, no K/V scatter left in the round)."""
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 512, size=n).tolist() for n in (5, 17, 40, 3, 70)]
    eng = Engine(model, EngineConfig(**BASE, kernels=KernelOptions(**extra)))
    got = eng.generate(prompts, SamplingParams(temperature=0, max_tokens=10))
    old = runs["old"][0]
    assert [c.token_ids for c in got] == [c.token_ids for c in old]
    np.testing.assert_allclose(np.concatenate([c.logprobs for c in got]), np.concatenate([c.logprobs for c in old]),
                               atol=1e-5, rtol=0)
    def decode_primitives(ecfg):
        params = nnx.state(model, nnx.Param)
        if ecfg.kernels.layers != "scan":
            params = engine_layout(params, model.cfg, ecfg)
        pallas = ecfg.kernels.attention == "pallas"
        attend = engine_attend(impl="pallas", num_splits=2) if pallas else None  # as Engine's
        jaxpr = jax.make_jaxpr(make_rounds(nnx.graphdef(model), model.cfg, ecfg, attend).decode)(
            params, init_slots(ecfg), init_pool(model.cfg, ecfg, 40), init_ring(ecfg), init_counters())
        return _primitives(jaxpr.jaxpr)

    layers = 1 if extra.get("layers") != "unrolled" else model.cfg.num_layers  # a scan body holds one layer
    plain = decode_primitives(EngineConfig(**BASE, kernels=KernelOptions(**{k: v for k, v in extra.items()
                                                                                 if not k.startswith("fuse_")})))
    fused = decode_primitives(EngineConfig(**BASE, kernels=KernelOptions(**extra)))
    assert (plain.count("scatter:pool"), plain.count("pallas_call:rope_kv")) == (2 * layers, 0)  # K and V
    assert (fused.count("scatter:pool"), fused.count("pallas_call:rope_kv")) == (0, layers)
    # fuse_split_combine (memjax/kernels/decode_merged.py): each layer's attention merges its own splits
    merged = layers if extra.get("fuse_split_combine") else 0
    assert (fused.count("pallas_call:decode_merged"), fused.count("pallas_call:paged_attention")) == (
        merged, 0 if merged or extra.get("attention") != "pallas" else layers)


def _primitives(jaxpr) -> list[str]:
    """Primitive names of every equation (sub-jaxprs walked once); pallas calls as `pallas_call:<name>`, scatters
    whose operand is pool-shaped (5-D) as `scatter:pool`."""
    out = []
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":
            name += ":" + str(eqn.params.get("name_and_src_info", eqn.params.get("name", ""))).split(" ")[0]
        elif name.startswith("scatter") and eqn.invars[0].aval.ndim == 5:
            name = "scatter:pool"
        out.append(name)
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            out += _primitives(sub)
    return out


def test_fused_rope_kv_validation(model):
    with pytest.raises(ValueError, match="fuse_rope_kv must be a bool"):
        EngineConfig(kernels=KernelOptions(fuse_rope_kv=1))
    with pytest.raises(ValueError, match="single-device"):
        EngineConfig(data_parallel=2, kernels=KernelOptions(fuse_rope_kv=True))
    with pytest.raises(ValueError, match="split schedule's decode rounds"):
        EngineConfig(schedule="mixed", kernels=KernelOptions(fuse_rope_kv=True))
    with pytest.raises(ValueError, match="fuse_split_combine must be a bool"):
        EngineConfig(kernels=KernelOptions(fuse_rope_kv=True, fuse_split_combine="yes"))
    with pytest.raises(ValueError, match="set fuse_rope_kv=True too"):
        EngineConfig(kernels=KernelOptions(fuse_split_combine=True))
    auto = dict(BASE, schedule="auto")
    assert Engine(model, EngineConfig(**auto)).config.schedule == ("mixed" if jax.default_backend() == "cpu" else "split")
    assert Engine(model, EngineConfig(**auto, kernels=KernelOptions(fuse_rope_kv=True))).config.schedule == "split"
