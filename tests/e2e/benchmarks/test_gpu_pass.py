"""benchmarks.gpu_pass as a user types it: the smoke pass runs every GPU item at tiny shapes on CPU, and memjax
plus the benchmark drivers import with only what the GPU image has (grain, bm25s, wordllama, tensorboardX, nltk
blocked)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import with_fast_llvm
from tests.import_blocker import blocker

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
GPU_IMAGE_LACKS = ("grain", "bm25s", "wordllama", "tensorboardX", "nltk")
BLOCKER = blocker(GPU_IMAGE_LACKS, "not on the GPU image")


def _env():
    """The children compile with FAST_LLVM: on CPU they check that the pass and the tier run and what they compare,
    not machine-code speed."""
    return with_fast_llvm(dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT)))


def test_memjax_and_benchmarks_import_without_packages_the_gpu_image_lacks():
    code = BLOCKER + """
import memjax, memjax.rl.trainer, memjax.rl.update_programs, memjax.engine, memjax.kernels
import benchmarks.gpu_pass, benchmarks.train_step, benchmarks.kernel_speed, benchmarks.rollout_throughput
import benchmarks.paged_attention, benchmarks.forward_throughput, benchmarks.memagent.linearity
print("imported", sorted(m for m in sys.modules if m.split(".")[0] in %r))
""" % (GPU_IMAGE_LACKS,)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "imported []" in p.stdout


def test_grain_pipeline_names_the_missing_package():
    code = BLOCKER + """
from memjax.data.sources import make_pipeline

try:
    make_pipeline([], batch_size=1, seed=0)
except ImportError as e:
    print("ERR", e)
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True)
    assert "ERR memjax.data pipelines need grain" in p.stdout, p.stdout + p.stderr[-2000:]


@pytest.mark.slow(seconds=60)
def test_gpu_pass_smoke_runs_every_item(tmp_path):
    code = BLOCKER + "import runpy, sys; sys.argv = ['gpu_pass'] + sys.argv[1:]; " \
        "runpy.run_module('benchmarks.gpu_pass', run_name='__main__')"
    # gpu_pass gives its items the compilation cache DIR/jax_cache: here DIR/jax_cache is the test session's cache
    # (tests/conftest.py), so the GPU tier's run below of the same train_step command as train_1.5b's smoke (on CPU:
    # tests/unit/rl/test_update_programs_memory_gpu.py) gets the executables this pass compiled instead of compiling them again
    (tmp_path / "jax_cache").symlink_to(os.environ["JAX_COMPILATION_CACHE_DIR"], target_is_directory=True)
    p = subprocess.run([sys.executable, "-c", code, "--out", str(tmp_path), "--smoke"], cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    res = json.loads((tmp_path / "gpu_pass.json").read_text())
    from benchmarks.gpu_pass import ITEMS
    assert [r["name"] for r in res["items"]] == [i.name for i in ITEMS]
    assert all(r["status"] == "ok" and r["files"] for r in res["items"]), res["items"]
    md = (tmp_path / "gpu_pass.md").read_text()
    assert all(f"| {i.name} |" in md for i in ITEMS)
    # an item whose smoke path another item runs is checked, not run again; each smoke run wrote its own log
    same = {i.name: i.smoke_same_as for i in ITEMS if i.smoke_same_as}
    assert same and all(r.get("smoke_same_as", "") == same.get(r["name"], "") for r in res["items"])
    assert sorted(f.stem for f in (tmp_path / "logs").glob("*.log")) == sorted(i.name for i in ITEMS
                                                                              if i.name not in same)


def test_every_item_command_line_parses_and_a_bad_one_does_not():
    """check_args parses each item's GPU-scale and smoke command lines with the module's own parser (what --smoke
    does for the items it does not run again), and reports an argument the module does not take."""
    import dataclasses

    from benchmarks.gpu_pass import ITEMS, check_args

    assert {i.name: check_args(i) for i in ITEMS} == {i.name: "" for i in ITEMS}
    by = {i.name: i for i in ITEMS}
    for name, item in by.items():  # a smoke path is shared only within one module, never with itself
        if item.smoke_same_as:
            assert by[item.smoke_same_as].module == item.module and item.smoke_same_as != name
    train_3b = by["train_3b"]
    assert "--bogus" in check_args(dataclasses.replace(train_3b, args=train_3b.args + ("--bogus",)))
    assert "invalid choice" in check_args(dataclasses.replace(by["decode_7b"], smoke=("--mode", "nope")))


def test_gpu_pass_rejects_bad_arguments(tmp_path):
    for args in (["--minutes", "0"], ["--only", "nope"]):
        p = subprocess.run([sys.executable, "-m", "benchmarks.gpu_pass", "--out", str(tmp_path), *args], cwd=ROOT,
                           env=_env(), capture_output=True, text=True)
        assert p.returncode == 2 and "error" in p.stderr


def _build_md_gpu_tier() -> list[str]:
    """The GPU tier's modules exactly as BUILD.md's device-image commands list them (GPU_TIER=...)."""
    text = (ROOT / "BUILD.md").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith('GPU_TIER="'))
    return line.split('"')[1].split()


@pytest.mark.slow(seconds=200)  # the module: this ~80 s + the smoke pass ~117 s in the last CI run
def test_build_md_gpu_tier_covers_every_gpu_test_and_runs_on_the_gpu_image(tmp_path):
    """Every module holding a `gpu`-marked test is in BUILD.md's GPU_TIER, and that command runs with the GPU image's
    packages only (blocker) — here on CPU at small shapes (MEMJAX_GPU_TIER_ANYWHERE=1), so the tier cannot rot."""
    tier = _build_md_gpu_tier()
    gpu_mark = re.compile(r"^(@pytest\.mark\.gpu\b|pytestmark = pytest\.mark\.gpu\b)", re.M)
    marked = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                    if gpu_mark.search(p.read_text()))
    assert sorted(tier) == marked
    code = BLOCKER + "import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))"
    env = dict(_env(), MEMJAX_GPU_TIER_ANYWHERE="1")
    p = subprocess.run([sys.executable, "-c", code, "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-m", "gpu",
                        *tier], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert " passed" in p.stdout and " failed" not in p.stdout


def test_a_timed_out_item_records_where_it_was_stuck(tmp_path):
    """A child past its limit gets SIGUSR2 first: it prints every thread's Python stack, main thread first, and the
    record names the innermost benchmark/memjax frames (on the H200 a silent 300 s timeout said nothing); then SIGABRT
    (PYTHONFAULTHANDLER: a dump even from inside C code). The child's progress bar runs a thread of its own: the
    fatal-signal dump alone once crashed in it before reaching the main thread (2026-11-28, CI-shaped run)."""
    from benchmarks import gpu_pass

    (tmp_path / "results").mkdir()
    (tmp_path / "logs").mkdir()
    item = gpu_pass.Item("slow", "a forward loop that outlives its limit", "forward_throughput",
                         ("--preset", "tiny", "--batch", "1", "--seqlen", "8", "--iters", "100000000",
                          "--dtype", "float32"), (), 1, 1)
    rec = gpu_pass.run_item(item, tmp_path, smoke=False, env=_env(), limit_s=12)
    assert rec["status"] == "timeout" and rec["returncode"] == 124
    log = (tmp_path / rec["log"]).read_text()
    assert "SIGABRT for a traceback" in log and "Fatal Python error: Aborted" in log
    first = log.split("[gpu_pass] thread ", 1)[1]
    assert first.startswith("MainThread (most recent call first):"), log[-3000:]
    assert "benchmarks/forward_throughput.py" in first.split("[gpu_pass] thread ", 1)[0], log[-3000:]
    assert any("benchmarks/forward_throughput.py" in f or "/memjax/" in f for f in rec["stuck_at"]), rec
    assert rec["command"].startswith("python -m benchmarks.forward_throughput --preset tiny")
    assert log.startswith("$ python -m benchmarks.forward_throughput --preset tiny")
