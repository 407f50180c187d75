"""The Memory-R2 workflow and the engine answer agent on the real Engine (random tiny model with the Qwen2.5
vocabulary, `tiny-qwen-vocab`): chats continue their retained KV, random output is a counted no-op, no page
is left retained, and the recorded log-probs are the engine's."""

import numpy as np
import pytest
from flax import nnx

import memjax
from memjax.agents import run_workflow
from memjax.systems.memory_r2.workflow import MemoryR2, MemoryR2Config, R2Sample
from memjax.systems.memory_r2.reward import EngineAnswerAgent, OverlapAnswerAgent
from memjax.data.locomo import Conversation, Session
from memjax.engine import Engine, EngineConfig, KVCacheOptions
from memjax.memory import HashedBowEmbedder, MemoryBank
from memjax.model import Qwen2, presets

from r2_fixtures import CONV

TOK = memjax.Tokenizer.default()


@pytest.mark.slow  # ~30 s of CPU (engine compilation for ~2k-token prompts)
def test_episode_and_answer_agent_on_the_engine():
    model = Qwen2(presets.get("tiny-qwen-vocab"), rngs=nnx.Rngs(0))
    engine = Engine(model, EngineConfig(max_slots=8, page_size=16, window=3072, prefill_slots=4, prefill_chunk=512,
                                        progress=False, kv=KVCacheOptions(kv_cache_bytes=64 << 20)))
    conv = Conversation("conv-y", "Ann", "Bob", (Session(1, "1 May", CONV.sessions[0].turns[:4]),),
                        CONV.questions[:1])
    # prompt_revision f6d3e04: its shorter system prompts fit the 3k-token window sized for this CPU test
    cfg = MemoryR2Config(chunks_per_session=2, group_size=2, local_prob=1.0, local_rollouts=2, max_response_tokens=6,
                         max_prompt_tokens=3000, prompt_revision="f6d3e04")
    emb = HashedBowEmbedder(64)
    wf = MemoryR2(TOK, cfg, emb, OverlapAnswerAgent(emb))
    res = run_workflow(engine, wf, [R2Sample(conv, seed=0)], group_size=2, seed=1)
    b = res.batch
    # 2 rollouts x (2 chunks x 2 roles) + one anchor's 2 local branches x 4 calls
    assert b.num_rows == 8 + 8 and res.stats["local_branches"] == 2
    assert engine.stats["continued_tokens"] > 0 and engine.retained_pages == 0
    assert res.stats["facts_bad_json"] + res.stats["ops_bad_json"] > 0  # random weights: counted no-ops
    assert np.isfinite(b.old_logp).all() and (b.old_logp[b.loss_mask > 0] < 0).all()
    # the engine answer agent: qa.txt on a frozen model, a missing <answer> tag is a counted empty answer
    bank = MemoryBank()
    bank.add("Adopted a puppy named Rex", speaker="Ann", session_time="1 May")
    agent = EngineAnswerAgent(engine, TOK, emb, max_tokens=4)
    out = agent.answer(bank, ("Ann", "Bob"), ["What is the puppy's name?", "Where?"])
    assert len(out) == 2 and agent.stats.asked == 2 and agent.stats.no_answer_tag + sum(map(bool, out)) >= 2
    assert "Adopted a puppy named Rex" in agent.prompts(bank, ("Ann", "Bob"), ["What is the puppy's name?"])[0]
