"""Memory-R2 on LongMemEval through `python -m memjax.evaluate configs/memory_r2/longmemeval.py`, the engine scripted
(the copying policy of r2_fixtures.py: extractor = one fact per turn, manager = INSERT each; the answer agent replies
with its first listed memory): one bank per question's haystack built session by session, the frozen answer agent on
the final bank, recall@k of the `has_answer` turns from the bank ranked for the question."""

import re
from types import SimpleNamespace

from memjax import Tokenizer

from memjax.data.longmemeval import load_longmemeval

from longmemeval_cli import FIXTURE, run_longmemeval, scripted_engine
from tests.unit.systems.memory_r2.r2_fixtures import copy_policy
import pytest

pytestmark = pytest.mark.e2e

SMALL = ["embedder=hashbow", "model.preset=tiny-qwen-vocab", "model.dtype=float32", "engine.window=8192",
         "max_prompt_tokens=6000", "max_response_tokens=1000", "engine.kv.kv_cache_bytes=33554432"]


def policy(text):
    if "intelligent memory assistant" not in text:
        return copy_policy(text, SimpleNamespace(seed=0))
    first = re.search(r'"content": "([^"]*)"', text)        # the user's best memory (the prompt lists it first)
    return "Answer: " + (first.group(1) if first else "unknown")


def test_memjax_evaluate_memory_r2_longmemeval(tmp_path):
    tok = Tokenizer.default()
    res, lines, engines = run_longmemeval("memory_r2", tmp_path / "ev",
                                          lambda cfg: scripted_engine(tok, policy, cfg.window), SMALL)
    assert len(engines) == 2                           # the policy's engine and the frozen answer agent's
    assert res["table"]["overall"]["n"] == 8 and res["counts"]["predictor_errors"] == 0
    data = load_longmemeval(FIXTURE)
    own = [x["hypothesis"] in {t.content for s in q.sessions for t in s.turns} for x, q in zip(lines, data.questions)]
    assert sum(own) >= 4 and all(o or x["hypothesis"] == "unknown" for o, x in zip(own, lines))  # a memory of its
    # own haystack, or "unknown" when no memory passes the answer agent's similarity floor
    ku = next(x for x in lines if x["question_id"] == "mj_ku_1")   # every turn inserted: the bank holds them all
    assert sorted(ku["retrieved"]) == ["D1:1", "D1:2", "D2:1", "D2:2", "D3:1", "D3:2"]
    assert ku["recall"]["turn_recall_all@10"] == 1.0 and res["table"]["knowledge-update"]["n"] == 1
    assert all("recall" not in x for x in lines if x["abstention"]) and not any(x["truncated"] for x in lines)


def test_ranking_answer_agent_ranks_the_bank_and_an_empty_bank_recalls_nothing():
    from memjax.memory import HashedBowEmbedder, MemoryBank
    from memjax.systems.memory_r2.longmemeval_eval import RankingAnswerAgent
    from memjax.systems.memory_r2.reward import OverlapAnswerAgent

    agent = RankingAnswerAgent(OverlapAnswerAgent(HashedBowEmbedder(256)))
    assert agent.answer(MemoryBank(), ("user", "assistant"), ["where is my dog?"]) == [""]
    assert agent.ranked == {"where is my dog?": []}
