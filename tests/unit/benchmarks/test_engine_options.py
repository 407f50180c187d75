"""benchmarks.engine_options: `--engine KEY=VALUE` (KEY an EngineConfig field's dotted path, as `--set engine.KEY`)
converts to the field's type and refuses bad input with one line (the GPU blocks time the old and new engine paths with
it, e.g. kv.kv_dtype=float8_e4m3fn kv.k_scale=0.5)."""

import pytest

from benchmarks.engine_options import engine_overrides, with_overrides
from memjax.engine.config import EngineConfig


def test_values_take_the_fields_types():
    got = engine_overrides(["kernels.layers=unrolled", "kernels.fuse_projections=true", "kernels.prefill_buckets=8",
                            "kv.kv_dtype=float8_e4m3fn", "kv.k_scale=0.5", "kv.v_scale=2", "schedule=split"])
    assert got == {"kernels.layers": "unrolled", "kernels.fuse_projections": True, "kernels.prefill_buckets": 8,
                   "kv.kv_dtype": "float8_e4m3fn", "kv.k_scale": 0.5, "kv.v_scale": 2.0, "schedule": "split"}
    assert isinstance(got["kv.v_scale"], float)
    cfg = with_overrides(EngineConfig(), got)
    assert (cfg.kernels.layers, cfg.kernels.prefill_buckets, cfg.kv.kv_dtype, cfg.kv.v_scale, cfg.schedule) == (
        "unrolled", 8, "float8_e4m3fn", 2.0, "split")


@pytest.mark.parametrize("pair,msg", [("nope=1", "EngineConfig field"), ("kernels.layers", "KEY=VALUE"),
                                      ("layers=unrolled", "EngineConfig field"),
                                      ("kernels.fuse_projections=yes", "true or false"),
                                      ("kernels.prefill_buckets=x", "an int"), ("kv.k_scale=big", "a number")])
def test_bad_pairs_exit_with_one_line(pair, msg):
    with pytest.raises(SystemExit, match=msg):
        engine_overrides([pair])
