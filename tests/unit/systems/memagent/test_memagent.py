"""memjax.systems.memagent.workflow: templates, token-level prompt assembly, the trajectory loop, RolloutBatch.

Uses a Qwen2.5-architecture model with the real vocabulary and random weights (the golden checkpoints
have 512-1000-token vocabularies, too small for the Qwen tokenizer): assertions are structural."""

import math

import numpy as np
import pytest

import memjax
from memjax.systems.memagent.workflow import FINAL_TEMPLATE, MEMORY_TEMPLATE, MemAgent, MemAgentConfig, build_prompt
from memjax.engine import Engine, EngineConfig
from memjax.model import init_model, presets

from conftest import GOLDEN  # noqa: F401  (sets fp32 matmul precision)

WINDOW = 512


@pytest.fixture(scope="module")
def tok():
    return memjax.Tokenizer.default()


@pytest.fixture(scope="module")
def engine():
    m = init_model(presets.get("tiny-qwen-vocab"), seed=0)
    return Engine(m, EngineConfig(max_slots=8, page_size=16, window=WINDOW, prefill_slots=4, prefill_chunk=64,
                                  progress=False))


CFG = dict(chunk_tokens=96, max_query_tokens=32, max_memory_tokens=12, max_final_tokens=8, group_size=2)


def _samples(tok):
    text = ("Document 1:\nThe Eiffel Tower in Paris was completed in 1889 for the Exposition Universelle. "
            "Gustave Eiffel's company designed and built it.\n\nDocument 2:\nCafé Zürich opened in 1902. ") * 3
    return [{"context": text, "query": "When was the Eiffel Tower completed?", "answers": ["1889"]},
            {"context": text[:150], "query": "Who built it?", "answers": ["Gustave Eiffel"]},
            {"context": "", "query": "Anything?", "answers": ["no"]}]


def test_templates_are_verbatim_and_ids_decode_to_them(tok):
    assert MEMORY_TEMPLATE.startswith("You are presented with a problem, a section of an article")
    assert "<problem> \n{prompt}\n</problem>" in MEMORY_TEMPLATE and MEMORY_TEMPLATE.endswith("Updated memory:\n")
    assert "put the answer in \\boxed{{}}." in FINAL_TEMPLATE and FINAL_TEMPLATE.endswith("Your answer:\n")
    q, mem, chunk = tok.encode("Qué pasó?"), tok.encode("memory: 1889"), tok.encode("Section text, naïve.")
    got = tok.decode(build_prompt(tok, q, mem, chunk))
    want = tok.render_chat([{"role": "user", "content": MEMORY_TEMPLATE.format(
        prompt="Qué pasó?", memory="memory: 1889", chunk="Section text, naïve.")}])
    assert got == want
    final = tok.decode(build_prompt(tok, q, None, None))
    assert final == tok.render_chat([{"role": "user", "content": FINAL_TEMPLATE.format(
        prompt="Qué pasó?", memory="No previous memory")}])
    assert "\\boxed{}" in final


def test_rollout_structure(tok, engine):
    agent = MemAgent(engine, tok, MemAgentConfig(**CFG))
    samples = _samples(tok)
    res = agent.run(samples)
    b = res.batch
    doc_tokens = [len(tok.encode(s["context"])) for s in samples]
    per_traj = [math.ceil(n / CFG["chunk_tokens"]) + 1 for n in doc_tokens for _ in range(2)]
    assert res.stats["conversations"] == sum(per_traj) == b.num_rows
    assert np.bincount(b.sample).tolist() == per_traj
    assert b.num_samples == 6 and b.sample_group.tolist() == [0, 0, 1, 1, 2, 2]
    assert (b.lengths <= WINDOW).all()
    assert b.is_final.sum() == 6 and (b.role[b.is_final] == 1).all() and (b.role[~b.is_final] == 0).all()
    assert res.stats["engine_shared_pages"] > 0  # group members share their first prompt
    # each prompt is rebuilt from the previous turn's generated ids (stop token stripped), spliced verbatim
    stop = set(agent.stop_ids)
    for s in range(b.num_samples):
        rows = np.nonzero(b.sample == s)[0]
        traj = s // 2
        query = tok.encode(samples[traj]["query"])
        doc = tok.encode(samples[traj]["context"])
        memory = None
        for k, r in enumerate(rows):
            prompt = b.input_ids[r, : b.prompt_len[r]].tolist()
            chunk = doc[k * 96:(k + 1) * 96] if not b.is_final[r] else None
            assert prompt == build_prompt(tok, query, memory, chunk)
            resp = b.input_ids[r, b.prompt_len[r]: b.lengths[r]].tolist()
            assert b.loss_mask[r].sum() == len(resp) and b.turn[r] == k
            memory = [i for i in (resp[:-1] if resp and resp[-1] in stop else resp) if i < tok.vocab_size]
    assert len(res.traces) == 6 and all(len(t["memories"]) == t["chunks"] for t in res.traces)


def test_results_do_not_depend_on_scheduling(tok, engine):
    samples = _samples(tok)[:2]
    a = MemAgent(engine, tok, MemAgentConfig(**CFG, seed=3)).run(samples)
    b = MemAgent(engine, tok, MemAgentConfig(**CFG, seed=3, max_active=1)).run(samples)
    np.testing.assert_array_equal(a.batch.input_ids, b.batch.input_ids)
    np.testing.assert_allclose(a.batch.old_logp, b.batch.old_logp, atol=1e-6)
    c = MemAgent(engine, tok, MemAgentConfig(**CFG, seed=4)).run(samples)
    assert not np.array_equal(a.batch.input_ids, c.batch.input_ids)


def test_budget_validation(tok, engine):
    with pytest.raises(ValueError, match="memory-update prompt can reach"):
        MemAgent(engine, tok, MemAgentConfig(**{**CFG, "chunk_tokens": 450}))
    with pytest.raises(ValueError, match="final prompt"):
        MemAgent(engine, tok, MemAgentConfig(**{**CFG, "max_final_tokens": 400}))
    with pytest.raises(ValueError, match="group_size"):
        MemAgentConfig(group_size=0)
