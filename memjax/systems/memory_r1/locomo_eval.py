"""Memory-R1 on LoCoMo for `python -m memjax.evaluate` (LocomoEvalConfig.system = "memory_r1").

Owns: `build_banks` (memory construction per conversation with the manager model, banks cached as
out_dir/banks/<conversation>.json so a resumed evaluation does not rebuild them), `answer_predictor` (the batch
predictor the harness calls: Fig. 11 prompt with the top 30 memories per speaker, greedy, answer after
`**Answer:**`; `distill=False` is the no-distillation ablation prompt) and `memory_r1_predictor` (loads the
models named by the config and wires both).
Invariants: construction then answering, never both engines at once (the manager's engine is released before the
answer model loads when they differ, so each may take the device's KV budget); evaluation is greedy (T = 0);
the predictor returns {"answer", "memory_dia_ids"} (the bank's dia_ids, for M-Fail) per question, in order.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...agents import run_workflow
from ...data.locomo import Conversation, Question
from ...evaluation.locomo import register_locomo_system
from ...memory import MemoryBank
from .data import MemoryIndex, answer_sample, make_embedder, qa_items
from .workflow import AnswerWorkflow, MemoryR1Config, construct


def build_banks(engine, tok, index: MemoryIndex, conversations: Sequence[Conversation], cfg: MemoryR1Config,
                cache_dir: str | Path | None = None) -> dict[str, MemoryBank]:
    """{conversation id: final bank}; banks found in cache_dir are loaded, the others built together and saved."""
    cache = Path(cache_dir) if cache_dir else None
    banks: dict[str, MemoryBank] = {}
    todo = []
    for c in conversations:
        f = cache / f"{c.sample_id}.json" if cache else None
        if f is not None and f.is_file():
            banks[c.sample_id] = MemoryBank.load(f)
        else:
            todo.append(c)
    if todo:
        built, _ = construct(engine, tok, index, todo, cfg)
        for c in todo:
            banks[c.sample_id] = built[c.sample_id]["bank"]
            if cache is not None:
                cache.mkdir(parents=True, exist_ok=True)
                banks[c.sample_id].save(cache / f"{c.sample_id}.json")
    return banks


def answer_predictor(engine, tok, index: MemoryIndex, banks: dict[str, MemoryBank],
                     conversations: Sequence[Conversation], cfg: MemoryR1Config):
    """A batch predictor (list[Question] -> list[{"answer", "memory_dia_ids"}]) over the built banks."""
    convs = {c.sample_id: c for c in conversations}
    cfg0 = dataclasses.replace(cfg, temperature=0.0)

    def predict(questions: list[Question]) -> list[dict[str, Any]]:
        samples = []
        for q, qa in zip(questions, qa_items(questions)):
            c = convs[q.conversation]
            samples.append(answer_sample(banks[c.sample_id], qa, (c.speaker_a, c.speaker_b), index, cfg0.answer_top_k))
        res = run_workflow(engine, AnswerWorkflow(tok, cfg0), samples, record=False)
        return [{"answer": t["answer"], "memory_dia_ids": sorted(banks[q.conversation].dia_ids())}
                for t, q in zip(res.traces, questions)]

    return predict


def memory_r1_predictor(cfg, questions: Sequence[Question]):
    """Load the manager (cfg.manager_hf_path, else cfg.model) and answer (cfg.model) models, build the banks of
    the questions' conversations, return the batch predictor (cfg: a LocomoEvalConfig)."""
    from ...checkpoint.source import ModelSource
    from ...data.locomo import load_locomo
    from ...engine import Engine

    data = load_locomo(cfg.data_path)
    wanted = list(dict.fromkeys(q.conversation for q in questions))
    convs = [data.conversation(c) for c in wanted]
    r1 = MemoryR1Config(distill=cfg.distill, max_extract_tokens=cfg.max_extract_tokens,
                        max_manager_tokens=cfg.max_response_tokens, max_answer_tokens=cfg.max_response_tokens,
                        max_prompt_tokens=cfg.max_prompt_tokens, temperature=0.0)
    index = MemoryIndex(make_embedder(cfg.embedder))
    model, tok = cfg.model.load()
    if cfg.manager_hf_path:
        mmodel, mtok = ModelSource(hf_path=cfg.manager_hf_path, dtype=cfg.model.dtype,
                                   compute_dtype=cfg.model.compute_dtype).load()
        mengine = Engine(mmodel, cfg.engine)
        banks = build_banks(mengine, mtok, index, convs, r1, Path(cfg.out_dir) / "banks")
        del mengine, mmodel
        gc.collect()
        engine = Engine(model, cfg.engine)
    else:
        engine = Engine(model, cfg.engine)
        banks = build_banks(engine, tok, index, convs, r1, Path(cfg.out_dir) / "banks")
    return answer_predictor(engine, tok, index, banks, convs, r1)


def _locomo_system(cfg, questions: Sequence[Question]):
    return memory_r1_predictor(cfg, questions), ("" if cfg.distill else ", no distillation")


register_locomo_system("memory_r1", _locomo_system)
