"""MemAgent on LongMemEval for `python -m memjax.evaluate configs/memagent/longmemeval.py` (LongMemEvalConfig.system =
"memagent"): the haystack is MemAgent's long document, read chunk by chunk into its overwritten memory, then answered.

Owns: `haystack_document(q)`, `memagent_lme_predictor`.
The document is the sessions in haystack order, each as "### Session k:" with its date and one "role: content"
paragraph per turn (the plain-text history layout of LongMemEval's generation code, our code); the problem is
"Current Date: <question_date>" then "Question: <question>" (LongMemEval's answer prompts give the date the same way;
without `question_date`, the question alone). Greedy, one rollout, `chunk_tokens` per memory update and
`memory_tokens` of memory (MemAgent's reference prompts, memjax/systems/memagent/workflow.py).
The hypothesis is the last \\boxed{} content, or the whole final text when there is none (the judge reads responses;
the record says which, as `boxed`). MemAgent keeps no memory bank, so no evidence-recall columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...data.longmemeval import LmeQuestion
from ...evaluation.longmemeval import register_longmemeval_system
from ...rewards import last_boxed
from .workflow import MemAgent, MemAgentConfig


def haystack_document(q: LmeQuestion) -> str:
    parts = []
    for k, s in enumerate(q.sessions, start=1):
        turns = "".join(f"\n\n{t.role}: {t.content.strip()}" for t in s.turns)
        parts.append(f"\n### Session {k}:\nSession Date: {s.date}\nSession Content:\n{turns}\n")
    return "".join(parts)


def memagent_lme_predictor(cfg, questions: Sequence[LmeQuestion]):
    """Load the policy (cfg.model) on cfg.engine and return the batch predictor (cfg: a LongMemEvalConfig)."""
    from ...engine import Engine

    model, tok = cfg.model.load()
    engine = Engine(model, cfg.engine)
    mc = MemAgentConfig(chunk_tokens=cfg.chunk_tokens, max_memory_tokens=cfg.memory_tokens,
                        max_final_tokens=cfg.max_response_tokens, temperature=0.0, record_conversations=False)
    agent = MemAgent(engine, tok, mc)

    def predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        samples = [{"context": haystack_document(q), "answers": [q.answer],
                    "question": f"Current Date: {q.question_date}\nQuestion: {q.question}" if cfg.question_date
                    else q.question} for q in qs]
        res = agent.run(samples)
        out = []
        for t in sorted(res.traces, key=lambda t: t["sample"]):
            boxed = last_boxed(t["final"])
            out.append({"answer": t["final"] if boxed is None else boxed, "boxed": boxed is not None})
        return out

    return predict


register_longmemeval_system("memagent", lambda cfg, qs: (memagent_lme_predictor(cfg, qs), ""))
