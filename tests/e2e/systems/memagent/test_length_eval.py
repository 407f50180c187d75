"""`python -m memjax.evaluate` on MemAgent's official eval files at small N (issue 49): the per-length table with the
paper's numbers beside it, the plot and the report page; resuming after a crash recomputes no finished item and
gives what an uncut run gives (sampled at the official temperature, so the seeds are what is checked)."""

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=240)]  # 238 s wall on the shared 2-core machine (39 s of CPU): five tiny runs

from memjax.cli import evaluate
from memjax.systems.memagent import length_eval

ROOT = Path(__file__).resolve().parents[4]
LAYOUTS = ROOT / "tests" / "fixtures" / "data" / "memagent_layouts"
SMALL = ["--set", "num_samples=6", "--set", "engine.window=1024", "--set", "engine.page_size=16",
         "--set", "engine.prefill_slots=4", "--set", "engine.max_slots=8", "--set", "engine.prefill_chunk=256",
         "--set", "memagent.chunk_tokens=300", "--set", "memagent.max_memory_tokens=6",
         "--set", "memagent.max_final_tokens=6", "--set", "memagent.max_query_tokens=32", "--set", "baseline=false",
         "--set", "memagent.temperature=0.7", "--set", "memagent.top_p=0.95", "--set", "batch_items=2"]


def _args(out, *more):
    return [str(ROOT / "configs" / "memagent" / "eval.py"), "--set", "model.preset=tiny-qwen-vocab", "--set",
            "model.dtype=float32", "--set", f"data_path={LAYOUTS}", "--set", f"docs_path={LAYOUTS / 'hotpot_docs.json'}",
            "--set", "num_docs=8,12800", *SMALL, "--set", f"out_dir={out}", *more]


def _finals(out):
    return {(t["num_docs"], t["item"]): t["final"] for t in map(json.loads, (out / "traces.jsonl").read_text().splitlines())}


@pytest.fixture(scope="module")
def uncut(tmp_path_factory):
    out = tmp_path_factory.mktemp("uncut")
    assert evaluate.main(_args(out)) == 0
    return out


def test_table_beside_the_paper_plot_and_report(uncut):
    res = json.loads((uncut / "results.json").read_text())
    assert res["complete"] and "Table 2" in res["paper"]
    rows = {r["num_docs"]: r for r in res["rows"]}
    assert set(rows) == {8, 12800} and all(r["samples"] == r["items"] == 6 for r in rows.values())
    assert rows[12800]["paper_tokens"] == "1.75M" and rows[12800]["paper_7b"] == 75.78 and "paper_7b" not in rows[8]
    assert rows[12800]["mean_tokens"] > rows[8]["mean_tokens"]  # the index-only file's 12 documents were built
    assert all(0 <= r["sub_em"] <= 1 for r in rows.values())
    md = (uncut / "results.md").read_text()
    assert "paper RL-MemAgent-7B" in md and "| 12800 |" in md and "75.78" in md
    assert (uncut / "accuracy.png").stat().st_size > 5000
    page = (uncut / "report.html").read_text()
    assert "paper RL-MemAgent-7B" in page and "75.78" in page


def test_resume_after_a_crash_recomputes_nothing_finished(uncut, tmp_path, monkeypatch, capsys):
    out = tmp_path / "cut"
    real, calls = length_eval.run_heldout, []

    def crash_on_third(engine, agent, records, **kw):
        calls.append((len(records), kw["first_trajectory"]))
        if len(calls) == 3:
            raise RuntimeError("simulated crash")
        return real(engine, agent, records, **kw)

    monkeypatch.setattr(length_eval, "run_heldout", crash_on_third)
    with pytest.raises(RuntimeError, match="simulated crash"):
        evaluate.evaluate(_cfg(out))
    assert len(_finals(out)) == 4 and not json.loads((out / "results.json").read_text())["complete"]
    calls.clear()
    monkeypatch.setattr(length_eval, "run_heldout", lambda *a, **kw: (calls.append(kw["first_trajectory"]),
                                                                       real(*a, **kw))[1])
    capsys.readouterr()
    assert evaluate.main(_args(out)) == 0
    assert calls == [4, 0, 2, 4]   # N=8: only items 4-5; N=12800: all three batches
    console = capsys.readouterr().out
    left = 2 * length_eval.turns_per_rollout(8, 300) + 6 * length_eval.turns_per_rollout(12800, 300)
    assert f"cost: 2 length(s), 12 question(s) x 1 rollout(s): about {left:,} model turns" in console, console
    assert "N=12800: items 6/6 done (" in console and "0s left at its " in console, console
    assert _finals(out) == _finals(uncut)
    res = json.loads((out / "results.json").read_text())
    assert res["complete"] and [r["samples"] for r in res["rows"]] == [6, 6]


def _cfg(out):
    from memjax.core.config import apply_overrides, load_config_file

    cfg = load_config_file(ROOT / "configs" / "memagent" / "eval.py")
    sets = [a for a in _args(out)[1:] if a != "--set"]
    return apply_overrides(cfg, sets)


def test_question_files_group_by_their_lengths_and_bad_data_is_one_line(tmp_path, capsys):
    import dataclasses

    from memjax.core.config import ConfigError

    cfg = _cfg(tmp_path / "x")

    sets = length_eval.length_sets(dataclasses.replace(cfg, data_path=str(LAYOUTS / "train.parquet")))
    assert [(n, k) for n, k, _ in sets] == [(8, 6)] and sets[0][2](1)["answers"] == ["Dmitri Vale"]
    sets = length_eval.length_sets(dataclasses.replace(cfg, data_path=str(LAYOUTS / "questions.jsonl")))
    assert [(n, k) for n, k, _ in sets] == [(0, 6)]
    with pytest.raises(ConfigError, match="docs_path"):
        length_eval.length_sets(dataclasses.replace(cfg, docs_path=""))
    assert evaluate.main(_args(tmp_path / "y", "--set", "num_docs=8,50")) == 2
    err = capsys.readouterr().err
    assert "eval_50.json" in err and len(err.strip().splitlines()) == 1
