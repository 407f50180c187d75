"""Nothing lost, nothing silent: whole-config validation before any model loads, one-line errors
(exit 2) for user mistakes, the out_dir lock, the demo's marker directory, converter arguments, HF config
and weight checks, text that is not Unicode, sub-EM on empty golds, and JSONL logs cut back on resume."""

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from conftest import golden_dir
from safetensors.numpy import load_file, save_file

from memjax import load_hf, save_hf
from memjax.checkpoint import CheckpointError
from memjax.checkpoint.hf import load_config
from memjax.checkpoint.source import ModelSource
from memjax.cli import convert, demo, evaluate, train
from memjax.core.config import ConfigError
from memjax.core.outdir import JsonlLog, OutDirLock, claim_marked_dir
from memjax.core.tokenizer import Tokenizer
from memjax.rewards import squad_scores

DATA = Path(__file__).parent.parent / "fixtures" / "data" / "hotpotqa_dev_excerpt.json"


@pytest.fixture
def no_model(monkeypatch):
    """Any attempt to load a model fails the test: errors must come before."""
    def boom(self):
        raise AssertionError("model loaded before the config was validated")
    monkeypatch.setattr(ModelSource, "load", boom)


@pytest.mark.parametrize("override,field", [
    ("keep_checkpoints=0", "keep_checkpoints"), ("optim.lr=nan", "lr"), ("optim.lr=inf", "lr"),
    ("loss.kl_estimator=k9", "kl_estimator"), ("agent.memagent.temperature=-1", "temperature"),
    ("update.temperature=0", "temperature"), ("optim.on_nonfinite=ignore", "on_nonfinite"),
    ("mesh.data=0", "MeshConfig"), ("model.dtype=int8", "dtype"), ("model.compute_dtype=fp8", "compute_dtype")])
def test_out_of_range_config_is_refused_before_loading(override, field, tmp_path, capsys, no_model):
    rc = train.main(["--set", f"agent.data.path={DATA}", "--set", f"out_dir={tmp_path}", "--set", override])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and field in err and len(err.splitlines()) == 1, err


def test_out_dir_that_is_a_file_and_a_locked_out_dir(tmp_path, capsys, no_model):
    f = tmp_path / "file"
    f.write_text("x")
    assert train.main(["--set", f"agent.data.path={DATA}", "--set", f"out_dir={f}"]) == 2
    assert "not a directory" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    with OutDirLock(busy):  # another run holds it
        assert train.main(["--set", f"agent.data.path={DATA}", "--set", f"out_dir={busy}"]) == 2
        assert f"in use by another run (pid {os.getpid()})" in capsys.readouterr().err
        assert evaluate.main(["--set", f"data_path={DATA}", "--set", "num_docs=10,20", "--set", f"out_dir={busy}"]) == 2
        assert "in use by another run" in capsys.readouterr().err
    with OutDirLock(busy):  # released: free again
        pass


def test_evaluate_given_a_training_config(tmp_path, capsys, no_model):
    cfg = tmp_path / "train_cfg.py"
    cfg.write_text("from memjax.train import TrainConfig\nconfig = TrainConfig()\n")
    assert evaluate.main([str(cfg)]) == 2
    assert "expects an EvalConfig" in capsys.readouterr().err


def test_demo_never_empties_a_directory_it_did_not_create(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    assert demo.main(["--out", str(mine), "--rl-steps", "0"]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err and (mine / "thesis.tex").read_text() == "years of work"
    ours = claim_marked_dir(tmp_path / "ours", demo.MARKER)
    (ours / "old_output").write_text("x")
    again = claim_marked_dir(tmp_path / "ours", demo.MARKER)  # ours (marker): emptied and rewritten
    assert sorted(p.name for p in again.iterdir()) == [demo.MARKER]


def test_convert_argument_errors(tmp_path, capsys):
    src = golden_dir("untied_kv2")
    f = tmp_path / "file"
    f.write_text("x")
    assert convert.main(["hf2hf", str(src), str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err
    for bad in ("nan", "-1", "0", "inf"):
        with pytest.raises(SystemExit) as e:
            convert.main(["hf2hf", str(src), str(tmp_path / "o"), "--max-shard-gb", bad])
        assert e.value.code == 2 and "finite number of GiB" in capsys.readouterr().err


def test_hf_config_errors_and_weights(tmp_path, recwarn):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="must hold a JSON object, got a list"):
        load_config(d)
    hf = json.loads((golden_dir("untied_kv2") / "config.json").read_text())
    for bad in ("four", 2.5):
        (d / "config.json").write_text(json.dumps({**hf, "num_attention_heads": bad}))
        with pytest.raises(CheckpointError, match="num_attention_heads must be an integer"):
            load_config(d)
    # NaN weights load with a warning naming the tensor; written files are readable by others (not 0600)
    model = load_hf(golden_dir("untied_kv2"))
    out = save_hf(model, tmp_path / "nan")
    mode = stat.S_IMODE((out / "model.safetensors").stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask
    tensors = load_file(out / "model.safetensors")
    tensors["model.norm.weight"][0] = np.nan
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    with pytest.warns(RuntimeWarning, match="NaN or inf values: model.norm.weight"):
        load_hf(out)


def test_tokenizer_and_scoring_edges():
    tok = Tokenizer.default()
    with pytest.raises(ValueError, match="lone surrogate"):
        tok.encode("Paris is in Fr\ud800ance")
    assert squad_scores("Paris", ["the"])["sub_em"] == 0.0  # gold normalises to "": not a substring hit
    assert squad_scores("the", ["a"])["sub_em"] == 1.0  # both empty: an exact match
    assert squad_scores("in Paris", ["Paris"])["sub_em"] == 1.0


def test_tokenizer_model_vocab_mismatch_is_caught_at_load():
    with pytest.raises(ConfigError, match="151,6.. tokens but the model's vocabulary has 1,000 rows"):
        ModelSource(hf_path=str(golden_dir("untied_kv2"))).load()


def test_jsonl_log_truncates_to_the_restored_step(tmp_path):
    log = JsonlLog(tmp_path / "metrics.jsonl")
    log.write({"step": 1}, {"step": 2}, {"step": 3})
    with log.path.open("a") as f:
        f.write('{"step": 4, "tor')  # killed mid-write
    assert log.truncate(2) == 2
    assert [json.loads(x)["step"] for x in log.path.read_text().splitlines()] == [1, 2]


def test_evaluation_results_are_written_after_every_length(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    calls = []

    def fails_at_second_length(engine, agent, samples, **kw):  # stands in for the MemAgent rollouts of a length
        calls.append(len(samples))
        if len(calls) == 2:
            raise RuntimeError("killed at the last length")
        traces = [{"sample": i, "final": f"\\boxed{{{s['answers'][0]}}}", "answers": list(s["answers"]), "memories": [],
                   "reward": 1.0, "chunks": 1} for i, s in enumerate(samples)]
        return SimpleNamespace(traces=traces, stats={"conversations": 2 * len(samples)})

    from memjax.systems.memagent import length_eval

    monkeypatch.setattr(length_eval, "run_heldout", fails_at_second_length)
    out = tmp_path / "eval"
    with pytest.raises(RuntimeError, match="killed"):
        evaluate.main(["--set", f"data_path={DATA}", "--set", "num_docs=10,12", "--set", "num_samples=2",
                       "--set", "baseline=false", "--set", f"out_dir={out}"])
    assert "N=10 (1/2): 2 questions" in capsys.readouterr().out  # progress before a length runs
    res = json.loads((out / "results.json").read_text())
    assert [r["num_docs"] for r in res["rows"]] == [10] and res["complete"] is False and res["rows"][0]["sub_em"] == 1
    assert len((out / "traces.jsonl").read_text().splitlines()) == 2 and "| 10 |" in (out / "results.md").read_text()


def test_truncated_orbax_file_is_one_line(tmp_path):
    from memjax.checkpoint.params_orbax import load_params, save_params

    root = save_params(load_hf(golden_dir("untied_kv2")), tmp_path / "orbax")
    data = max((p for p in (root / "params").rglob("*") if p.is_file() and p.parent.name == "d"),
               key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # truncated by a crash or a bad copy
    with pytest.raises(CheckpointError) as e:
        load_params(root)
    assert "cannot restore parameters" in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 600


def test_out_dir_under_a_file(tmp_path, capsys, no_model):
    (tmp_path / "f").write_text("x")
    assert train.main(["--set", f"agent.data.path={DATA}", "--set", f"out_dir={tmp_path / 'f' / 'run'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot create the directory" in err and len(err.splitlines()) == 1


def test_mesh_that_does_not_match_the_devices(tmp_path, capsys, no_model):
    import jax

    rc = train.main(["--set", f"agent.data.path={DATA}", "--set", f"out_dir={tmp_path}",
                     "--set", f"mesh.fsdp={jax.device_count() + 1}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("memjax.train: error: mesh=") and "device(s)" in err and len(err.splitlines()) == 1


def test_small_gradient_norms_are_printed_with_significant_digits(tmp_path):
    import io

    from rich.console import Console

    from memjax.loop.run_log import RunLog
    from memjax.loop.run_state import RunState
    from memjax.loop.trackers import Trackers

    buf = io.StringIO()
    log = RunLog(tmp_path, False, Console(file=buf, width=200), 2, RunState(), Trackers({}))
    log.print_step({"step": 1, "reward": 0.0, "rollout_s": 1.0, "update_s": 1.0, "logp_mismatch_mean": 0.0,
                    "grad_norm": 3.7e-5})
    assert "grad 3.7e-05" in buf.getvalue()  # was "grad 0.000"


def test_tensorboard_purges_events_past_the_resumed_step(tmp_path):
    """A resumed run's TensorBoard writer opens with a SessionLog START at step k + 1, which makes
    TensorBoard discard the interrupted run's events at steps > k (no step drawn twice)."""
    import struct

    from tensorboardX.proto import event_pb2

    from memjax.core.outdir import tb_writer

    def events(path):
        data, out, i = path.read_bytes(), [], 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            e = event_pb2.Event()
            e.ParseFromString(data[i + 12:i + 12 + n])
            out.append(e)
            i += 12 + n + 4
        return out

    for resumed, logdir in ((0, tmp_path / "fresh"), (7, tmp_path / "resumed")):
        w = tb_writer(logdir, resumed_step=resumed)
        w.add_scalar("loss", 1.0, resumed + 1)
        w.close()
        (f,) = logdir.glob("events.*")
        starts = [e.step for e in events(f) if e.HasField("session_log") and e.session_log.status == 1]
        assert starts == ([8] if resumed else []), (resumed, starts)
