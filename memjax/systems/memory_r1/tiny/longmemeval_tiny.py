"""Memory-R1's tiny trained policies on a LongMemEval file in their vocabulary: `python -m memjax.evaluate
configs/memory_r1/longmemeval_tiny.py` (LongMemEvalConfig.system = "memory_r1_tiny").

Owns `manager_view(bank, fact)`, `build_tiny_banks` and `memory_r1_tiny_predictor`: Memory-R1's two stages with the
two tiny trained policies, each in its own task's format:
- construction (tiny/task.py): the haystack's turns in order are the incoming facts; the manager (`policy`) sees at
  most 3 records (`manager_view`: those about the fact's person first, then the latest others, ids 0..2), answers one
  op greedily, and the op is applied with the task's grammar by `apply_mem0` with the turn's dia_id; the
  questions' banks advance together, one fact a round;
- answering (tiny/answer_task.py): the answer agent (`answer_policy`) reads at most 8 records (those about K first)
  with the distillation prompt, through the same AnswerWorkflow (strict parser: no `answer P`, no answer).
"retrieved" (evidence recall): the bank's records about K first, then the rest in bank order, as their dia_ids.
Policies: "" the shipped warm starts, "random" the control, or a tiny training run's out_dir/hf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....agents.heldout import run_heldout
from ....data.longmemeval import LmeQuestion
from ....engine import SamplingParams
from ....evaluation.longmemeval import register_longmemeval_system
from ....memory import MemoryBank, OpStats, apply_mem0, mem0_view
from ....tiny.longmemeval import guarded, haystack_facts, load_policy, question_key
from ....tiny.model import engine_config
from ..data import QA, AnswerSample
from .answer_task import ANSWER_WORDS, answer_tokenizer, answer_workflow
from .task import R1_WORDS, parse_op, prompt_text, r1_tokenizer

MAX_SHOWN = 3      # records in a manager prompt (R1TaskConfig.max_bank: ids 0-2 are words)
MAX_READ = 8       # records in an answer prompt (1 + 7 distractors fill the 48-token window)


def _about(records, key: str) -> list:
    return [r for r in records if r.content.split()[:1] == [key]]


def manager_view(bank: MemoryBank, key: str) -> list:
    """The records the manager sees for a fact about `key`: K's records first, then the latest others; bank order."""
    recs = list(bank)
    mine = _about(recs, key)[:MAX_SHOWN]
    others = [r for r in recs if r not in mine][-(MAX_SHOWN - len(mine)):] if len(mine) < MAX_SHOWN else []
    keep = {r.id for r in mine + others}
    return [r for r in recs if r.id in keep]


def build_tiny_banks(engine, tok, qs: Sequence[LmeQuestion]) -> tuple[list[MemoryBank], OpStats]:
    """Each question's bank after the manager has seen every turn of its haystack (module docstring)."""
    streams = [[f for ses in haystack_facts(q) for f in ses] for q in qs]
    banks, stats = [MemoryBank(seed=0) for _ in qs], OpStats()
    params = SamplingParams(temperature=0.0, max_tokens=3, stop_token_ids=(tok.eos_id,))
    for i in range(max((len(s) for s in streams), default=0)):
        todo = [(b, s[i]) for b, s in zip(banks, streams) if i < len(s)]
        views = [manager_view(b, f.subject) for b, f in todo]
        prompts = [tok.apply_chat_template([{"role": "user", "content": prompt_text(
            {"memory": [(r.content.split()[0], r.content.split()[2]) for r in v], "fact": f.text})}])
            for (_, f), v in zip(todo, views)]
        for (bank, f), v, c in zip(todo, views, engine.generate(prompts, params)):
            out = tok.decode([t for t in c.token_ids if t != tok.eos_id], skip_unknown=True)
            op = parse_op(out, f.text)
            if op is None:
                stats.reject("bad_json", f"not an op: {out!r}")
                continue
            apply_mem0(bank, op, mem0_view(v)[1], speaker=f.subject, dia_ids=(f.dia_id,), stats=stats)
    return banks, stats


def memory_r1_tiny_predictor(cfg, questions: Sequence[LmeQuestion]):
    """Load the manager (cfg.policy) and the answer agent (cfg.answer_policy) on tiny engines, return the batch
    predictor (cfg: a LongMemEvalConfig)."""
    from ....engine import Engine
    from .answer_warmstart import load_r1_answer_warmstart
    from .warmstart import load_r1_warmstart

    manager = Engine(load_policy(cfg.policy, lambda: load_r1_warmstart(log=lambda m: None)[0]), engine_config())
    answerer = Engine(load_policy(cfg.answer_policy, lambda: load_r1_answer_warmstart(log=lambda m: None)[0]),
                      engine_config())
    mtok, atok = r1_tokenizer(), answer_tokenizer()

    def predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        banks, _ = build_tiny_banks(manager, mtok, qs)
        samples, ranked = [], []
        for q, bank in zip(qs, banks):
            key, recs = question_key(q), list(bank)
            mine = _about(recs, key)
            order = mine + [r for r in recs if r not in mine]
            shown = order[:MAX_READ] if len(recs) > MAX_READ else recs
            ranked.append(list(dict.fromkeys(d for r in order for d in r.dia_ids)))
            samples.append(AnswerSample(QA(q.question, q.answer, qid=q.question_id), (key, ""),
                                        (tuple((None, r.content) for r in shown), ()),
                                        tuple(d for r in shown for d in r.dia_ids)))
        res = run_heldout(answerer, answer_workflow(atok, distill=True, temperature=0.0), samples, progress=False)
        traces = sorted(res.traces, key=lambda t: t["sample"])
        return [{"answer": t["answer"] if t["source"] != "none" else None, "retrieved": r}
                for t, r in zip(traces, ranked)]

    return guarded(predict, tuple(w for w in R1_WORDS if w in set(ANSWER_WORDS)))


register_longmemeval_system("memory_r1_tiny", lambda cfg, qs: (memory_r1_tiny_predictor(cfg, qs), ""))
