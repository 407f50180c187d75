"""benchmarks.engine_options: `--engine KEY=VALUE` converts to the EngineConfig field's type and refuses bad input
with one line (the GPU blocks time the old and new engine paths with it, e.g. kv_dtype=float8_e4m3fn k_scale=0.5)."""

import pytest

from benchmarks.engine_options import engine_overrides
from memjax.engine.config import EngineConfig


def test_values_take_the_fields_types():
    got = engine_overrides(["layers=unrolled", "fuse_projections=true", "prefill_buckets=8",
                            "kv_dtype=float8_e4m3fn", "k_scale=0.5", "v_scale=2"])
    assert got == {"layers": "unrolled", "fuse_projections": True, "prefill_buckets": 8,
                   "kv_dtype": "float8_e4m3fn", "k_scale": 0.5, "v_scale": 2.0}
    assert isinstance(got["v_scale"], float)
    EngineConfig(**got)


@pytest.mark.parametrize("pair,msg", [("nope=1", "EngineConfig field"), ("layers", "KEY=VALUE"),
                                      ("fuse_projections=yes", "true or false"), ("prefill_buckets=x", "an int"),
                                      ("k_scale=big", "a number")])
def test_bad_pairs_exit_with_one_line(pair, msg):
    with pytest.raises(SystemExit, match=msg):
        engine_overrides([pair])
