"""`--check` of memjax.train / memjax.evaluate (memjax/cli/check.py): it resolves what a run resolves before its
model loads -- the system and its data paths, the model's config.json, the mesh -- prints it and exits 0, and a
problem is the run's own one-line error (exit 2); nothing is written."""

from pathlib import Path

from memjax.cli.evaluate import main as evaluate_main
from memjax.cli.train import main as train_main

HOTPOT = "tests/fixtures/data/hotpotqa_dev_excerpt.json"


def test_train_check_prints_what_would_run_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    assert train_main(["configs/memagent/train.py", "--set", f"agent.data.path={HOTPOT}", "--set",
                       "agent.data.num_docs=20", "--set", f"out_dir={out}", "--check"]) == 0
    text = capsys.readouterr().out
    assert "system 'memagent'" in text and "mesh: data 1 x fsdp 1 x tensor 1" in text and "check: ok" in text
    assert not out.exists()


def test_train_check_fails_like_the_run(tmp_path, capsys):
    assert train_main(["configs/memagent/train.py", "--check"]) == 2  # no data path
    assert "agent.data.path is not set" in capsys.readouterr().err
    assert train_main(["configs/tiny.py", "--set", "mesh.fsdp=3", "--check"]) == 2  # 1 CPU device
    assert "mesh=(data 1, fsdp 3, tensor 1)" in capsys.readouterr().err
    assert train_main(["configs/tiny.py", "--set", f"model.hf_path={tmp_path}", "--check"]) == 2
    assert "would ignore model.hf_path" in capsys.readouterr().err  # a tiny system runs its own model
    assert train_main(["configs/memagent/train.py", "--set", f"agent.data.path={HOTPOT}", "--set",
                       "agent.data.num_docs=20", "--set", f"model.hf_path={tmp_path}", "--check"]) == 2
    assert "not a Hugging Face model directory" in capsys.readouterr().err


def test_evaluate_check_dispatches_on_every_config_kind(capsys):
    assert evaluate_main(["configs/memagent/tiny_eval.py", "--check"]) == 0
    assert "held-out evaluation of system 'tiny'" in capsys.readouterr().out
    assert evaluate_main(["configs/memagent/eval.py", "--set", f"data_path={HOTPOT}", "--set", "num_docs=10,20",
                          "--check"]) == 0
    assert "MemAgent accuracy" in capsys.readouterr().out
    assert evaluate_main(["configs/locomo_answers.py", "--set", "data_path=missing.json", "--check"]) == 2
    assert "LoCoMo file not found" in capsys.readouterr().err


def test_check_covers_resume_false_and_an_unwritable_cache(tmp_path, capsys):
    from memjax.cli import train

    repo = Path(__file__).resolve().parents[3]
    run = tmp_path / "run"
    (run / "checkpoints" / "3").mkdir(parents=True)
    assert train.main([str(repo / "configs/tiny.py"), "--set", f"out_dir={run}", "--set", "resume=false",
                       "--check"]) == 2
    assert (f"out_dir={run}: holds a run (checkpoints or result.json) and resume=false; use a new out_dir"
            in capsys.readouterr().err)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert train.main([str(repo / "configs/tiny.py"), "--set", f"out_dir={tmp_path / 'o'}", "--set",
                       f"compile_cache={blocker}/cache", "--check"]) == 0
    assert (f"compilation cache: {blocker}/cache cannot be written ({blocker} is a file); the run compiles without a "
            "persistent cache") in capsys.readouterr().out


def test_an_unwritable_compile_cache_runs_uncached(tmp_path):
    from memjax.core.compile_cache import use_compile_cache

    blocker = tmp_path / "file"
    blocker.write_text("x")
    said = []
    assert use_compile_cache(str(blocker / "cache"), say=said.append) is None
    assert said == [f"compilation cache: {blocker}/cache cannot be written (Not a directory); running without a "
                    "persistent cache"]
