"""Memory-R1 on LongMemEval for `python -m memjax.evaluate configs/memory_r1/longmemeval.py` (LongMemEvalConfig.system
= "memory_r1"): the LoCoMo path (memjax/systems/memory_r1/locomo_eval.py) on each question's haystack.

Owns: `memory_r1_lme_predictor`. Per question the haystack becomes a LoCoMo conversation (speakers "user" and
"assistant", dates in LoCoMo's form: memjax/data/longmemeval_locomo.py); the manager builds its bank turn by turn
(`build_banks`, banks cached as out_dir/banks/<question_id>.json, so a resumed evaluation does not rebuild them),
then the answer agent answers greedily from the top memories per speaker (Fig. 11 prompt).
Invariant: construction then answering, as on LoCoMo; "retrieved" is the bank ranked for the question by the same
MemoryIndex (all speakers, best first), expanded to its records' dia_ids (the evidence-recall view).
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...data.longmemeval import LmeQuestion
from ...data.longmemeval_locomo import as_locomo
from ...evaluation.longmemeval import register_longmemeval_system
from .data import MemoryIndex, make_embedder
from .locomo_eval import answer_predictor, build_banks
from .workflow import MemoryR1Config


def ranked_dia_ids(index: MemoryIndex, bank, question: str) -> list[str]:
    """Every record of the bank ranked for the question (best first), as the dia_ids behind them, first seen kept."""
    recs = index.top_k(bank, question, len(bank))
    return list(dict.fromkeys(d for r in recs for d in r.dia_ids))


def memory_r1_lme_predictor(cfg, questions: Sequence[LmeQuestion]):
    """Load the manager (cfg.manager_hf_path, else cfg.model) and the answer model (cfg.model), build the banks of
    the questions' haystacks, return the batch predictor (cfg: a LongMemEvalConfig)."""
    from ...checkpoint.source import ModelSource
    from ...engine import Engine

    views = {q.question_id: as_locomo(q, question_date=cfg.question_date) for q in questions}
    convs = [c for c, _ in views.values()]
    r1 = MemoryR1Config(max_extract_tokens=cfg.max_extract_tokens, max_manager_tokens=cfg.max_response_tokens,
                        max_answer_tokens=cfg.max_response_tokens, max_prompt_tokens=cfg.max_prompt_tokens,
                        temperature=0.0)
    index = MemoryIndex(make_embedder(cfg.embedder))
    model, tok = cfg.model.load()
    cache = Path(cfg.out_dir) / "banks"
    if cfg.manager_hf_path:
        mmodel, mtok = ModelSource(hf_path=cfg.manager_hf_path, dtype=cfg.model.dtype,
                                   compute_dtype=cfg.model.compute_dtype).load()
        mengine = Engine(mmodel, cfg.engine)
        banks = build_banks(mengine, mtok, index, convs, r1, cache)
        del mengine, mmodel
        gc.collect()
        engine = Engine(model, cfg.engine)
    else:
        engine = Engine(model, cfg.engine)
        banks = build_banks(engine, tok, index, convs, r1, cache)
    answer = answer_predictor(engine, tok, index, banks, convs, r1)

    def predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        locomo_qs = [views[q.question_id][1] for q in qs]
        outs = answer(locomo_qs)
        return [{"answer": o["answer"], "retrieved": ranked_dia_ids(index, banks[q.question_id], lq.question)}
                for o, q, lq in zip(outs, qs, locomo_qs)]

    return predict


register_longmemeval_system("memory_r1", lambda cfg, qs: (memory_r1_lme_predictor(cfg, qs), ""))
