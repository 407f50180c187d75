"""scripts/gpu_block_47.sh (BUILD.md, issue 47's GPU block) without a GPU and without running a benchmark: the script
parses, a bad part exits 2 with one line, and with a recording PYTHON each part runs the lines BUILD.md describes,
every module exists, every `--engine KEY=VALUE` is a valid EngineConfig override and every greedy-token comparison
reads files that a sweep of its part saves. (The benchmarks themselves ran
at tiny size in the dry run recorded in BUILD.md: I47_DRY=1.)"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.engine_options import engine_overrides, with_overrides
from memjax.engine.config import EngineConfig

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gpu_block_47.sh"
REC = """import os, shlex, sys
flags = os.environ.get("XLA_FLAGS")  # recorded after the arguments, when set
open(sys.argv[1], "a").write(shlex.join(sys.argv[2:] + (["XLA_FLAGS=" + flags] if flags else [])) + "\\n")
"""


def _record(tmp_path, part: str, dry: bool) -> list[list[str]]:
    log = tmp_path / f"calls_{part}_{dry}.txt"
    rec = tmp_path / "rec.py"
    rec.write_text(REC)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(PYTHON=f"{sys.executable} {rec} {log}", I47_DRY="1" if dry else "0")
    p = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out"), part], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / f"i47_part{part}.tgz").exists()
    return [shlex.split(line) for line in log.read_text().splitlines() if line.startswith("-m ")]


def test_script_parses_and_refuses_a_bad_part(tmp_path):
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    p = subprocess.run(["bash", str(SCRIPT), str(tmp_path), "6"], capture_output=True, text=True)
    assert p.returncode == 2 and "PART must be 1, 2, 3, 4 or 5" in p.stderr


@pytest.mark.parametrize("dry", [False, True])
def test_each_part_runs_its_lines(tmp_path, dry):
    calls = {part: _record(tmp_path, part, dry) for part in ("1", "2", "3", "4", "5")}
    mods = {part: [c[1] for c in cs] for part, cs in calls.items()}
    tput, lin, match = "benchmarks.rollout_throughput", "benchmarks.memagent.linearity", "benchmarks.greedy_match"
    assert mods["1"] == [tput] * 3 + [match] * 4 + [lin, tput]
    assert mods["2"] == [tput] * 3 + [match] * 3 + [lin] + [tput] * 2
    assert mods["3"] == ["pytest"] + [tput] * 2 + [match] * 2
    assert mods["4"] == [tput] * 3 + [match] * 2
    assert mods["5"] == ["pytest", "benchmarks.sampler_truncation"] + [tput] * 2
    for cs in calls.values():
        for c in cs:
            if c[1] == "pytest":  # part 3: the GPU tier's kernel tests, selected by -k; part 5: the sampler's tests
                path = next(a for a in c if a.endswith(".py"))
                assert (ROOT / path).is_file() and ("decode_merged" in (ROOT / path).read_text()
                                                    or path == "tests/unit/engine/test_sampler.py"), c
                continue
            assert (ROOT / (c[1].replace(".", "/") + ".py")).is_file(), c
            pairs = [c[i + 1] for i, a in enumerate(c) if a == "--engine"]
            with_overrides(EngineConfig(), engine_overrides(pairs))
    engines = {part: [" ".join(a for i, a in enumerate(c) if i and c[i - 1] == "--engine") for c in cs]
               for part, cs in calls.items()}
    new = "kernels.layers=unrolled kernels.fuse_projections=true"
    assert engines["1"][:3] == ["", new, new + " kernels.fuse_rope_kv=true"] and engines["1"][-2:] == [new, new]
    assert engines["2"][1] == engines["2"][6] == "schedule=mixed" and engines["2"][2] == "kernels.prefill_buckets=8"
    assert engines["2"][7] == engines["2"][8] == "kv.kv_dtype=float8_e4m3fn"
    assert engines["3"][1:3] == [new + " kernels.fuse_rope_kv=true",
                                 new + " kernels.fuse_rope_kv=true kernels.fuse_split_combine=true"]
    assert engines["4"][:3] == ["", "", new + " kernels.fuse_rope_kv=true"]
    assert engines["5"] == ["", "", new + " kernels.fuse_rope_kv=true", new + " kernels.fuse_rope_kv=true"]
    top_p = [c[c.index("--top-p") + 1] if "--top-p" in c else None for c in calls["5"]]
    assert top_p == [None, None, None, "0.95"]  # the plain sweep samples as the RL recipes do, the other as the eval
    flags = {part: [c[-1] for c in cs if c[-1].startswith("XLA_FLAGS=")] for part, cs in calls.items()}
    assert flags == {"1": [], "2": [], "3": [], "4": ["XLA_FLAGS=--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"] * 2,
                     "5": []}
    assert all(not c[-1].startswith("XLA_FLAGS=") for c in calls["4"][:1])  # the first sweep: XLA's defaults
    # every greedy comparison reads files a sweep of the same part writes (--greedy-tokens, --tag, --out-dir)
    for part, cs in calls.items():
        saved = set()
        for c in cs:
            if c[1] == tput and "--greedy-tokens" in c:
                out, tag, pre = c[c.index("--out-dir") + 1], c[c.index("--tag") + 1], c[c.index("--preset") + 1]
                bs = c[c.index("--batches") + 1: c.index("--batches") + 3]
                saved |= {f"{out}/greedy_{pre}{tag}_b{b}.npy" for b in bs if b.isdigit()}
        for c in cs:
            if c[1] == match:
                assert c[2] in saved and c[3] in saved, (c, saved)
    presets = {c[c.index("--preset") + 1] for cs in calls.values() for c in cs if "--preset" in c}
    assert presets == ({"tiny", "tiny-qwen-vocab"} if dry else {"qwen2.5-1.5b", "qwen2.5-7b"})
