"""benchmarks.e2e_memagent's resume check starts from what a run stopped after step steps-1 leaves: the copy has no
last checkpoint, no hf/ export and no result.json, so the same command resumes instead of reporting the run finished
(the GPU block's resume check was a no-op while the copy kept result.json: found by its CPU dry run, 2026-11-29).
The whole check at tiny scale (run, copy, resume, byte-equal exports): `E2E_SCALES=tiny MEMJAX_GPU_TIER_ANYWHERE=1
scripts/gpu_block_46.sh OUT`, in BUILD.md's issue-46 block."""

import json
import types

from benchmarks.e2e_memagent import copy_for_resume
from memjax.run.identity import finished


def _finished_run(d, steps):
    for s in range(1, steps + 1):
        (d / "checkpoints" / str(s)).mkdir(parents=True)
        (d / "checkpoints" / str(s) / "state").write_text(str(s))
    (d / "hf").mkdir()
    (d / "hf" / "model.safetensors").write_bytes(b"w")
    (d / ".memjax.lock").write_text("")
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, steps + 1)))
    (d / "result.json").write_text(json.dumps({"history": [{"step": s} for s in range(1, steps + 1)]}))


def test_copy_for_resume_is_a_run_stopped_one_step_early(tmp_path):
    run, resumed = tmp_path / "run", tmp_path / "resumed"
    run.mkdir()
    _finished_run(run, 3)
    cfg = types.SimpleNamespace(resume=True, steps=3)
    assert finished(run, cfg) is not None  # the original: the same command would do nothing
    copy_for_resume(run, resumed, 3)
    assert finished(resumed, cfg) is None  # the copy: the same command resumes
    assert sorted(p.name for p in (resumed / "checkpoints").iterdir()) == ["1", "2"]
    assert not (resumed / "hf").exists() and not (resumed / ".memjax.lock").exists()
    assert (resumed / "metrics.jsonl").read_text() == (run / "metrics.jsonl").read_text()
