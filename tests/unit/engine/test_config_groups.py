"""memjax.engine.config: EngineConfig's groups (kv: KVCacheOptions, kernels: KernelOptions) take `--set
engine.kv.*` / `engine.kernels.*`, each group refuses its own bad values in one line naming the field, and
`per_device` / `resolve` return the nested form."""

import dataclasses

import pytest

from memjax.core.config import ConfigError, apply_overrides, describe
from memjax.engine import EngineConfig, KernelOptions, KVCacheOptions
from memjax.run.train_config import TrainConfig


def test_nested_overrides_reach_the_config():
    cfg = apply_overrides(TrainConfig(), ["engine.kernels.attention=reference", "engine.kv.kv_dtype=float8_e4m3fn",
                                          "engine.kv.kv_cache_gib=20", "update.recompute_old_logp=true"])
    assert cfg.engine.kernels.attention == "reference" and cfg.engine.kv.kv_dtype == "float8_e4m3fn"
    assert cfg.engine.kv.kv_cache_gib == 20.0 and isinstance(cfg.engine.kv, KVCacheOptions)
    lines = describe(TrainConfig())
    assert any(line.startswith("engine.kernels.attention: str = ") for line in lines)
    assert any(line.startswith("engine.kv.kv_cache_gib: ") for line in lines)
    with pytest.raises(ConfigError, match="has no field 'attention'"):  # one name per field: no flat alias
        apply_overrides(TrainConfig(), ["engine.attention=reference"])


@pytest.mark.parametrize("make,field", [
    (lambda: KVCacheOptions(kv_dtype="float8_e5m2"), "KVCacheOptions.kv_dtype"),
    (lambda: KVCacheOptions(kv_cache_gib=-1.0), "KVCacheOptions.kv_cache_gib"),
    (lambda: KVCacheOptions(num_pages=0), "KVCacheOptions.num_pages"),
    (lambda: KVCacheOptions(kv_dtype="float8_e4m3fn", k_scale=0.0), "KVCacheOptions.k_scale"),
    (lambda: KernelOptions(attention="triton"), "KernelOptions.attention"),
    (lambda: KernelOptions(decode_splits=-1), "KernelOptions.decode_splits"),
    (lambda: KernelOptions(layers="loop"), "KernelOptions.layers"),
    (lambda: KernelOptions(fuse_rope_kv=1), "KernelOptions.fuse_rope_kv"),
    (lambda: KernelOptions(small_rounds=-1), "KernelOptions.small_rounds"),
    (lambda: EngineConfig(prefill_chunk=8, kernels=KernelOptions(prefill_buckets=9)), "kernels.prefill_buckets"),
    (lambda: EngineConfig(window=64, page_size=16, kv=KVCacheOptions(num_pages=3)), "kv.num_pages"),
])
def test_bad_values_are_one_line_naming_the_field(make, field):
    with pytest.raises(ValueError) as e:
        make()
    assert field in str(e.value) and "\n" not in str(e.value)


def test_per_device_splits_the_kv_totals():
    cfg = EngineConfig(max_slots=16, prefill_slots=8, window=256, data_parallel=2,
                       kv=KVCacheOptions(num_pages=800, kv_cache_bytes=1001),
                       kernels=KernelOptions(attention="reference"))
    one = cfg.per_device(2)
    assert (one.max_slots, one.prefill_slots, one.data_parallel) == (8, 4, 1)
    assert (one.kv.num_pages, one.kv.kv_cache_bytes, one.kv.kv_cache_gib) == (400, 500, None)
    assert one.kernels == cfg.kernels
    gib = EngineConfig(max_slots=16, window=256, data_parallel=2, kv=KVCacheOptions(kv_cache_gib=3.0)).per_device(2)
    assert gib.kv.kv_cache_gib == 1.5 and gib.kv.budget_bytes == 3 << 29
    with pytest.raises(ValueError, match="kv.num_pages=801 is a total over data_parallel=2"):
        EngineConfig(max_slots=16, window=256, data_parallel=2, kv=KVCacheOptions(num_pages=801))


def test_resolve_on_cpu_is_concrete():
    cfg = EngineConfig().resolve("cpu")
    assert (cfg.schedule, cfg.kernels.attention) == ("mixed", "reference") and isinstance(cfg.kernels, KernelOptions)
    gpu = EngineConfig(page_size=16).resolve("gpu", head_dim=64)
    assert (gpu.schedule, gpu.kernels.attention) == ("split", "pallas")
    assert EngineConfig(page_size=8, window=2048).resolve("gpu").kernels.attention == "reference"
    assert EngineConfig(kernels=KernelOptions(attention="mosaic")).resolve("cpu").kernels.attention == "mosaic"
    fused = EngineConfig(kernels=KernelOptions(fuse_rope_kv=True)).resolve("cpu")
    assert fused.schedule == "split"
    assert dataclasses.replace(cfg, kernels=KernelOptions(attention="pallas")).kernels.attention == "pallas"


def test_spanned_devices_follow_data_and_tensor_parallel():
    """memjax.engine.placement.spanned: the devices an engine config runs on (what memjax.evaluate gives a system's
    frozen engines), the first D x T of those given; data_parallel=-1 takes every whole group."""
    from memjax.engine.placement import spanned

    devs = list("abcdefgh")  # placeholders: spanned only slices
    assert spanned(EngineConfig(), devs) == ["a"]
    assert spanned(EngineConfig(data_parallel=-1), devs) == devs
    assert spanned(EngineConfig(data_parallel=-1, tensor_parallel=2), devs[:7]) == devs[:6]
    assert spanned(EngineConfig(data_parallel=2, tensor_parallel=2), devs) == devs[:4]
