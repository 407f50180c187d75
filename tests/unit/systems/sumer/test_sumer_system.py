"""SumerSystem on real LoCoMo (skipped when ../shared/data/locomo is absent): the training stream is conv-48's
questions only, deterministic per (seed, position) and reshuffled per epoch; the full pipeline (prompt with
tools, engine continuation, judge, summary) runs on random tiny-qwen-vocab weights; bad sections fail fast."""

import math
from pathlib import Path

import numpy as np
import pytest

from memjax.agents import run_workflow
from memjax.checkpoint.source import ModelSource
from memjax.engine import Engine, EngineConfig
from memjax.systems import build, get
from memjax.systems.sumer.system import SumerSection
from memjax.systems.sumer.workflow import SumerConfig

REAL = Path(__file__).parents[4] / ".." / "shared" / "data" / "locomo" / "locomo10.json"
needs_real = pytest.mark.skipif(not REAL.exists(), reason="LoCoMo (CC BY-NC) not present at ../shared/data/locomo")


def test_section_validation():
    assert get("sumer").section is SumerSection
    with pytest.raises(ValueError, match="embedder"):
        SumerSection(embedder="qwen3")
    with pytest.raises(ValueError, match="judge"):
        SumerSection(judge="gpt")
    with pytest.raises(FileNotFoundError, match="agent.data_path"):
        build(SumerSection(data_path="/nonexistent.json")).train_data(4, 0)


@needs_real
def test_train_stream_and_samples():
    sys_ = build(SumerSection(data_path=str(REAL), embedder="hashed"), seed=3)
    s = sys_.train_data(64, seed=3)
    a = next(s) + next(s) + next(s) + next(s)  # 256 > 191: crosses an epoch
    assert all(x.qid.startswith("conv-48") for x in a) and len({x.qid for x in a[:191]}) == 191
    s2 = sys_.train_data(64, seed=3)
    s2.set_state({"pos": 128})
    assert [x.qid for x in next(s2)] == [x.qid for x in a[128:192]]
    assert a[0].user.startswith("The conversation is between Deborah and Jolene; it has 30 sessions, from ")
    assert a[0].tools is sys_.tools("conv-48") and a[0].category != 5
    ids = {r.id for r in a[0].tools.retriever.records}  # the evidence rides on the sample (search hit metrics)
    assert sum(bool(x.evidence) for x in a) > 0.9 * len(a) and all(e in ids for x in a for e in x.evidence)


@pytest.mark.slow  # ~50 s on CPU: compiles the engine for the 151,936-row vocabulary
@needs_real
def test_pipeline_on_random_weights():
    model, tok = ModelSource(preset="tiny-qwen-vocab").load()
    ep = SumerConfig(max_turn_tokens=6, max_turns=3)
    sec = SumerSection(data_path=str(REAL), embedder="hashed", eval_limit=3, episode=ep, group_size=2)
    sys_ = build(sec, seed=0)
    engine = Engine(model, EngineConfig(max_slots=4, page_size=64, window=2048, prefill_slots=2, prefill_chunk=512,
                                        progress=False))
    res = run_workflow(engine, sys_.workflow(engine, tok, train=True), next(sys_.train_data(2, 0)), group_size=2)
    b = res.batch
    assert b.num_rows == 4 and set(res.rewards) <= {-1.0} | set(np.linspace(0, 1, 101).round(2))
    for i in range(4):  # random weights: turns end without a tool call (or at the limits); only generated ids trained
        p, n = int(b.prompt_len[i]), int(b.lengths[i])
        assert (b.loss_mask[i, :p] == 0).all() and b.loss_mask[i, p:n].sum() >= 1
    ev = sys_.evaluate(engine, tok)
    assert {"reward", "no_answer", "mean_turns", "J_overall", "F1_overall", "B1_overall"} <= set(ev)
    assert ev["no_answer"] <= 3 and len(ev["traces"]) == 3
    assert engine.retained_pages == 0  # every retained turn given back


def test_summarize_uses_the_metric_profile():
    """SUMER's evaluation table takes F1 / B1 from SumerSection.metrics ('sumer': Mem0's set F1 and nltk BLEU-1)."""
    from memjax.data.locomo import Question
    from memjax.rewards.locomo import RuleBasedJudge
    from memjax.systems.sumer.system import SumerSection, summarize

    qs = [Question("conv-x", 0, "q?", 4, "The cat", None, ()), Question("conv-x", 1, "q2?", 1, "7 May 2023", None, ()),
          Question("conv-x", 2, "q3?", 2, "well known cats", None, ())]
    traces = [{"answer": "the cat, the cat."}, {"answer": None}, {"answer": "well-known cats"}]
    args = (qs, traces, [0.0, -1.0, 0.0], {}, RuleBasedJudge())
    s, m = summarize(*args, metrics="sumer"), summarize(*args, metrics="memjax")
    assert s["F1_single-hop"] == 100.0 and s["F1_multi-hop"] == 0.0             # sets, articles kept
    # nltk keeps 'well-known' one token: brevity penalty exp(1 - 3/2) x 1/2; memjax splits the hyphen
    assert s["B1_temporal"] == pytest.approx(100 * 0.5 * math.exp(-0.5), abs=0.005) and m["B1_temporal"] == 75.0
    assert SumerSection().metrics == "sumer"
    with pytest.raises(ValueError, match="unknown answer profile"):
        SumerSection(metrics="memagent")
