"""memjax.parallel.placement: the engine spans every device of the process by default, tensor parallel only where the
weights or the KV need it; rollout_devices="config" keeps engine.data_parallel x tensor_parallel and is warned when it
spans fewer devices than the run trains on; `--check` of the 7B recipe on 8 host devices prints the rollout on all 8.
The expected T is worked out here from the byte counts (an independent rule: the least divisor that leaves the KV)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.engine import EngineConfig, KernelOptions
from memjax.parallel.placement import place

ROOT = Path(__file__).resolve().parents[3]
G = 1 << 30
E = EngineConfig(max_slots=256, page_size=64, window=8192, prefill_slots=16, prefill_chunk=2048)


def test_all_devices_by_default_without_a_memory_size():
    p = place(E, 8, heads=4)
    assert (p.data_parallel, p.tensor_parallel, p.spans, p.warning, p.error) == (8, 1, 8, "", "")


@pytest.mark.parametrize("hbm,weights,resident,expect_t", [(80, 15, 6, 1), (48, 40, 6, 2), (40, 60, 6, 4)])
def test_tensor_parallel_only_where_the_weights_need_it(hbm, weights, resident, expect_t):
    # least t in {1, 2, 4} (divisors of 8 that divide 4 heads) with hbm - resident - weights / t >= 16
    t = next(t for t in (1, 2, 4) if hbm - resident - weights / t >= 16)
    assert t == expect_t
    p = place(E, 8, heads=4, weight_bytes=weights * G, resident_bytes=resident * G, hbm_bytes=hbm * G,
              min_kv_bytes=16 * G)
    assert (p.data_parallel, p.tensor_parallel, p.spans) == (8 // t, t, 8) and not p.warning


def test_no_placement_that_fits_is_an_error_line():
    p = place(E, 8, heads=4, weight_bytes=200 * G, resident_bytes=6 * G, hbm_bytes=40 * G, min_kv_bytes=16 * G)
    assert p.error.startswith("no engine placement over the 8 devices fits") and "\n" not in p.error


def test_totals_that_do_not_split_take_a_larger_group():
    e = EngineConfig(max_slots=16, window=1024, page_size=16, prefill_slots=4, prefill_chunk=256)
    p = place(e, 8, heads=2)  # 4 prefill slots do not split over 8 groups: 4 groups of 2
    assert (p.data_parallel, p.tensor_parallel) == (4, 2)


def test_config_mode_keeps_one_device_and_warns():
    p = place(E, 8, heads=4, mode="config")
    assert (p.data_parallel, p.tensor_parallel) == (1, 1)
    assert p.warning.startswith("the rollout spans 1 of the 8 devices") and "\n" not in p.warning
    assert place(E, 1, heads=4, mode="config").warning == ""


def test_single_device_engine_options_are_warned():
    import dataclasses
    p = place(dataclasses.replace(E, kernels=KernelOptions(fuse_rope_kv=True)), 8, heads=4)
    assert p.spans == 1 and "fuse_rope_kv" in p.warning


def _check(*sets):
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")
    data = ROOT / "tests/fixtures/data/hotpotqa_dev_excerpt.json"
    args = [sys.executable, "-m", "memjax.train", "configs/memagent/train.py", "--set", f"agent.data.path={data}",
            "--set", "out_dir=/nonexistent-scale-check/out", "--check"]
    for s in sets:
        args += ["--set", s]
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
def test_check_of_the_7b_recipe_rolls_out_on_all_8_devices():
    p = _check("plan_hbm_gib=80")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "rollout: 8 of 8 device(s): data_parallel 8 x tensor_parallel 1" in p.stdout, p.stdout
    p = _check("rollout_devices=config")
    assert p.returncode == 0 and "warning: the rollout spans 1 of the 8 devices" in p.stdout, p.stdout
    p = _check("plan_hbm_gib=20")  # 7B's 15 GiB of bf16 weights leave no 16 GiB KV at any T
    assert p.returncode == 2 and "no engine placement over the 8 devices fits" in p.stderr, p.stderr[-2000:]
