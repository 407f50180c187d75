"""`python -m memjax.train`: the loop runs, checkpoints, survives SIGKILL and resumes bit-identically,
falls back from a corrupt checkpoint, and exports the policy.

A random-weight model earns no reward, so advantages are zero; a small entropy bonus keeps the gradients
(and so the parameters) moving, which is what the resume check needs to be meaningful."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from memjax import load_hf
from memjax.cli import train
from memjax.core.config import ConfigError, apply_overrides
from memjax.core.outdir import OutDirLock
from memjax.rl.trainer import NonFiniteError, Trainer

pytestmark = pytest.mark.e2e

DATA = Path(__file__).parent.parent / "fixtures" / "data" / "hotpotqa_dev_excerpt.json"
SETS = [f"agent.data.path={DATA}", "agent.data.num_docs=10", "prompts_per_step=1", "agent.memagent.group_size=2",
        "agent.memagent.chunk_tokens=720", "agent.memagent.max_query_tokens=48", "agent.memagent.max_memory_tokens=8",
        "agent.memagent.max_final_tokens=4", "engine.window=1024", "loss.entropy_coef=0.01", "optim.lr=1e-3",
        "optim.warmup_steps=0", "update.micro_rows=4", "update.pad_tokens=128", "checkpoint_every=1"]


def _cfg(out, steps):
    return apply_overrides(train.TrainConfig(), SETS + [f"out_dir={out}", f"steps={steps}"])


def _params(run):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(run.model, nnx.Param))]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    run = train.Run(_cfg(out, 2))
    hist = run.run()
    return out, run, hist


def test_metrics_outputs_and_export(uninterrupted):
    out, run, hist = uninterrupted
    assert len(hist) == 2 and hist[0]["grad_norm"] > 0 and hist[0]["conversations"] == 6
    assert hist[0]["logp_mismatch_mean"] < 1e-5  # engine vs trainer log-probs under the same weights
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2] and "tokens_per_s" in lines[0]
    assert list((out / "tb").glob("events.out.tfevents.*"))
    exported = load_hf(out / "hf")
    served = {p.name for p in (out / "hf").iterdir()}  # servable: tokenizer, sampling defaults, model card
    assert {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "README.md"} <= served
    assert "system: `memagent`" in (out / "hf" / "README.md").read_text()
    for a, b in zip(_params(run), [np.asarray(x) for x in jax.tree.leaves(nnx.state(exported, nnx.Param))]):
        assert np.array_equal(a, b)


def test_sigkill_then_resume_is_bit_identical(uninterrupted, tmp_path):
    _, full, hist = uninterrupted
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "memjax.train"] + [a for s in SETS + [f"out_dir={out}", "steps=2"] for a in ("--set", s)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    committed = out / "checkpoints" / "1" / "commit_success.txt"
    deadline = time.time() + 400
    while not committed.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert committed.exists(), proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "timeout"
    os.killpg(proc.pid, signal.SIGKILL)  # mid-run: step 2 is rolling out
    proc.wait()
    assert not (out / "checkpoints" / "2" / "commit_success.txt").exists()
    resumed = train.Run(_cfg(out, 2))
    assert resumed.step == 1
    resumed.run()
    for a, b in zip(_params(full), _params(resumed)):
        assert np.array_equal(a, b)
    again = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in again] == [1, 2]  # no repeated lines after the kill (issue 23, item 8)
    assert again[-1]["grad_norm"] == hist[1]["grad_norm"]


def test_corrupt_checkpoint_falls_back_and_the_run_keeps_saving(uninterrupted, tmp_path, capsys):
    src, full, _ = uninterrupted
    out = tmp_path / "corrupt"
    shutil.copytree(src, out)
    shutil.rmtree(out / "checkpoints" / "2" / "state" / "d")  # the array data of the latest checkpoint
    (out / "result.json").unlink()  # a crash after saving step 2, before the run finished (a finished run is a no-op)
    run = train.Run(_cfg(out, 2))
    assert run.step == 1
    assert "checkpoint 2" in capsys.readouterr().out
    assert (out / "checkpoints_corrupt" / "2").is_dir()  # moved aside, not deleted (issue 23, item 1)
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1]
    run.run()  # retrains step 2 and saves it (orbax used to decline, and retention then deleted step 1)
    assert sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit()) == [1, 2]
    for a, b in zip(_params(full), _params(run)):  # the retrained step 2 equals the uninterrupted one
        assert np.array_equal(a, b)


def test_nonfinite_update_stops_and_keeps_the_last_good_checkpoint(uninterrupted, tmp_path, monkeypatch, capsys):
    src, _, _ = uninterrupted
    out = tmp_path / "nan"
    shutil.copytree(src, out)
    shutil.rmtree(out / "hf")

    def nan_update(self, batch, seed=0, step=None, shard=None):
        raise NonFiniteError("non-finite loss (loss nan, gradient norm nan) at optimizer step 3; the update was "
                             "not applied")

    monkeypatch.setattr(Trainer, "update", nan_update)
    assert train.main([a for s in SETS + [f"out_dir={out}", "steps=3"] for a in ("--set", s)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("memjax.train: stopped: non-finite loss") and len(err.splitlines()) == 1
    assert sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit()) == [1, 2]
    assert not (out / "hf").exists()
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    with OutDirLock(out):  # the stopped run released out_dir
        pass


def test_errors(tmp_path, capsys):
    assert train.main(["--set", f"out_dir={tmp_path}"]) == 2
    assert "data.path is not set" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="must be one of"):
        apply_overrides(train.TrainConfig(), ["loss.agg=mean"])
    with pytest.raises(ConfigError, match="has no field 'nope'"):
        apply_overrides(train.TrainConfig(), ["optim.nope=1"])


@pytest.mark.parametrize("damage", ["deleted", "file"])
def test_vanished_checkpoints_refuse_before_any_log_is_cut(uninterrupted, tmp_path, damage):
    """A finished run whose checkpoints/ was deleted (or replaced by a file), extended by raising steps, refuses
    with one line naming the committed checkpoint instead of retraining from step 1 and cutting its logs."""
    src, _, _ = uninterrupted
    out = tmp_path / damage
    shutil.copytree(src, out)
    shutil.rmtree(out / "checkpoints")
    if damage == "file":
        (out / "checkpoints").write_text("not a directory\n")
    before = (out / "metrics.jsonl").read_text()
    with pytest.raises(ConfigError, match="committed checkpoint 2 .*put the checkpoints back") as e:
        train.Run(_cfg(out, 3))
    assert len(str(e.value).splitlines()) == 1
    assert (out / "metrics.jsonl").read_text() == before  # nothing cut back
    assert json.loads((src / "checkpoints.json").read_text()) == {"committed": 2}


class _StopAtEveryStep:
    """StopRequests whose stop is due at every step (a SIGTERM that arrived during it)."""
    code, signal_name = 143, "SIGTERM"

    def __init__(self, processes):
        pass

    def due(self, step):
        return True

    def restore(self):
        pass


def test_a_stop_during_the_last_step_still_writes_the_run_outputs(tmp_path, monkeypatch):
    from memjax.core.cli import Stopped
    from memjax.loop import run as run_module

    monkeypatch.setattr(run_module, "StopRequests", _StopAtEveryStep)
    early = tmp_path / "early"
    with pytest.raises(Stopped, match="at step 1; checkpoint 1 committed") as e:
        train.Run(_cfg(early, 2)).run()
    assert e.value.code == 143 and not (early / "result.json").exists()
    last = tmp_path / "last"
    with pytest.raises(Stopped, match="at step 1, the last; the run finished") as e:
        train.Run(_cfg(last, 1)).run()
    assert e.value.code == 143
    assert json.loads((last / "result.json").read_text())["history"][-1]["step"] == 1
    assert (last / "hf" / "config.json").exists() and (last / "report.html").exists()
