"""benchmarks.e2e_memagent's resume check starts from what a run stopped after step steps-1 leaves: the copy has no
last checkpoint, no hf/ export and no result.json, so the same command resumes instead of reporting the run finished,
and its checkpoint ledger names step steps-1, so the resume is not refused for a missing checkpoint (the GPU block's
CPU dry run found both: the copy kept result.json, then the ledger).
The whole check at tiny scale (run, copy, resume, byte-equal exports): `E2E_SCALES=tiny MEMJAX_GPU_TIER_ANYWHERE=1
scripts/gpu_block_46.sh OUT`, in BUILD.md's issue-46 block."""

import json
import types

import pytest

from benchmarks.e2e_memagent import LEDGER, copy_for_resume
from memjax.core.config import ConfigError
from memjax.loop import checkpointer
from memjax.loop.checkpointer import Checkpointer
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
    (d / LEDGER).write_text(json.dumps({"committed": steps}) + "\n")


def _ledger_check(out_dir):
    """memjax's own check, before a resume, that the checkpoint its ledger names is there (ConfigError if not)."""
    ck = types.SimpleNamespace(ledger=out_dir / LEDGER, cfg=types.SimpleNamespace(out_dir=str(out_dir)))
    ck._recorded = lambda: Checkpointer._recorded(ck)
    Checkpointer._check_ledger(ck, out_dir / "checkpoints")


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
    # the ledger says step 2, as a run stopped there leaves it: naming 3, it makes the resume refuse
    assert LEDGER == checkpointer.LEDGER and json.loads((resumed / LEDGER).read_text()) == {"committed": 2}
    _ledger_check(resumed)
    (resumed / LEDGER).write_text(json.dumps({"committed": 3}))
    with pytest.raises(ConfigError, match="committed checkpoint 3"):
        _ledger_check(resumed)
