"""Memory-R2 on LongMemEval for `python -m memjax.evaluate configs/memory_r2/longmemeval.py` (LongMemEvalConfig.system
= "memory_r2"): the held-out episode of MemoryR2System.evaluate (extractor and manager over each session's chunks,
greedy, no local branch, every question answered on the final bank) over each question's haystack.

Owns: `memory_r2_lme_predictor` and `RankingAnswerAgent`. Per question the haystack becomes a LoCoMo conversation
(memjax/data/longmemeval_locomo.py); the policy (cfg.model) builds the bank; the frozen answer agent is
`answer_hf_path` when given, else a copy of the policy's initial weights (MemoryR2System's "policy_copy").
"retrieved" (the evidence-recall view) is the final bank ranked by the answer agent's own embedder cosine to the
question, expanded to its records' dia_ids; questions whose text repeats within one predictor call get none (the
answer agent sees question texts only, so their banks cannot be told apart). A rollout whose prompt outgrew
max_prompt_tokens ends without answers (MemoryR2's rule): its record has answer None and `truncated` true.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...data.longmemeval import LmeQuestion
from ...data.longmemeval_locomo import as_locomo
from ...evaluation.longmemeval import register_longmemeval_system
from .system import MemoryR2Section, MemoryR2System
from .workflow import R2Sample


class RankingAnswerAgent:
    """Wraps an answer agent: on every `answer(bank, speakers, questions)` it also ranks the bank for each question
    (cosine of the agent's VectorCache vectors, best first) and keeps the dia_ids under the question text."""

    def __init__(self, agent):
        self.agent, self.ranked = agent, {}

    def __getattr__(self, name):
        return getattr(self.agent, name)

    def answer(self, bank, speakers, questions):
        records = list(bank)
        if not records:                                 # an empty bank recalls nothing
            self.ranked.update({q: [] for q in questions})
        elif questions:
            vecs = self.agent.cache.vectors([r.content for r in records])
            qv = self.agent.cache.vectors(list(questions))
            for j, q in enumerate(questions):
                order = np.argsort(-(vecs @ qv[j]), kind="stable")
                self.ranked[q] = list(dict.fromkeys(d for i in order for d in records[i].dia_ids))
        return self.agent.answer(bank, speakers, questions)


def memory_r2_lme_predictor(cfg, questions: Sequence[LmeQuestion]):
    """Load the policy (cfg.model) and the answer agent, return the batch predictor (cfg: a LongMemEvalConfig)."""
    import jax

    from ...agents.heldout import run_heldout
    from ...checkpoint.source import ModelSource
    from ...engine import Engine
    from ...engine.placement import spanned

    section = MemoryR2Section(embedder="hashed" if cfg.embedder == "hashbow" else "wordllama",
                              max_prompt_tokens=cfg.max_prompt_tokens, max_response_tokens=cfg.max_response_tokens,
                              answer_max_tokens=min(cfg.max_response_tokens, 512),
                              answer_kv_cache_bytes=cfg.engine.kv.kv_cache_bytes or 4 << 30)
    system = MemoryR2System(section)
    model, tok = cfg.model.load()
    answer_model = ModelSource(hf_path=cfg.answer_hf_path, dtype=cfg.model.dtype).load()[0] if cfg.answer_hf_path \
        else model
    ecfg = system.engine_config(cfg.engine)
    system.place_frozen(spanned(ecfg, jax.local_devices()))  # the answer agent: over the policy engine's devices
    system.setup(answer_model, tok)
    engine = Engine(model, ecfg)
    workflow = system.workflow(engine, tok, train=False)
    ranking = RankingAnswerAgent(workflow.agent)
    workflow.agent = ranking

    def predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        views = [as_locomo(q, question_date=cfg.question_date) for q in qs]
        samples = [R2Sample(conv, (lq,), local=False, all_questions=True) for conv, lq in views]
        ranking.ranked.clear()
        res = run_heldout(engine, workflow, samples, group_size=1, progress=False)
        texts = [lq.question for _, lq in views]
        out = []
        for t, text in zip(res.traces, texts):
            rec = {"answer": t["questions"][0]["answer"], "truncated": bool(t["truncated"])}   # a rollout cut at
            # max_prompt_tokens answers nothing (MemoryR2's rule): no answer, counted, and said here
            if texts.count(text) == 1 and text in ranking.ranked:
                rec["retrieved"] = ranking.ranked[text]
            out.append(rec)
        return out

    return predict


register_longmemeval_system("memory_r2", lambda cfg, qs: (memory_r2_lme_predictor(cfg, qs), ""))
