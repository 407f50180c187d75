"""The tiny Memory-R1 answer-agent task: answer `where is K ?` from a bank of retrieved records, most of them
distractors, with or without memory distillation, on the SAME `AnswerWorkflow` as the LoCoMo answer agent.

Owns: the vocabulary (`ANSWER_WORDS`, 45 words for the tiny model's 64 embedding rows), `R1AnswerTaskConfig`, the
sample generator (`AnswerSample`s), the two tiny prompts and their parsers (passed to `AnswerWorkflow` as `prompt`
/ `parse`), `answer_workflow` and `evaluate_answer` (held-out greedy and sampled EM, and how the distillation
variant selects, per distractor count).
A sample: ONE relevant record `K in P .` and `distractors` records reusing its name (`K likes X .`, probability
`name_reuse`) or its relation (`O in X .`), every X != P, in random order. Plain prompt `memory <records> where is
K ? answer`, response `P <end>`; distillation prompt `... select`, response `<selected records> answer P <end>`.
Parsers are STRICT (one word; a response ending `answer P`; anything else answers "", counted as unmarked): with a
last-word fallback GRPO taught both variants to drop the format (docs/memory_r1.md, 'The format hack').
Invariants: generation is a pure function of (config, seed, index); every prompt plus the longest response fits
the tiny window (48 positions) for any distractor count <= 7 (checked in __post_init__); parsers never raise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..workflow import AnswerWorkflow, MemoryR1Config
from ..data import QA, AnswerSample
from ....agents.workflow import run_workflow
from ....tiny.model import WINDOW
from ....tiny.vocab import PEOPLE, PLACES, SPECIALS, TinyTokenizer

ANSWER_WORDS = SPECIALS + ("memory", "where", "is", "?", "in", "likes", ".", "answer", "select") + PEOPLE + PLACES
TRAIN_SEED, HELDOUT_SEED, DEV_SEED = 31, 32, 33
MAX_RESPONSE = 7            # `K in P . answer P <end>`: the distillation response with one selected record
RECORD = 4                  # words per record


def answer_tokenizer() -> TinyTokenizer:
    return TinyTokenizer(ANSWER_WORDS)


def prompt_tokens(distractors: int) -> int:
    """Prompt length in tokens: `<user> memory` + records + `where is K ? answer|select <end> <assistant>`."""
    return 2 + RECORD * (distractors + 1) + 5 + 2


@dataclass(frozen=True)
class R1AnswerTaskConfig:
    min_distractors: int = 1
    max_distractors: int = 7
    name_reuse: float = 0.5          # a distractor is `K likes X .` with this probability, else `O in X .`
    teacher_correct: float = 0.4     # warm start teacher: the relevant record with this probability

    def __post_init__(self):
        if not 0 <= self.min_distractors <= self.max_distractors:
            raise ValueError(f"R1AnswerTaskConfig: need 0 <= min_distractors <= max_distractors, got {self}")
        if prompt_tokens(self.max_distractors) + MAX_RESPONSE > WINDOW:
            raise ValueError(f"R1AnswerTaskConfig.max_distractors={self.max_distractors}: prompt "
                             f"{prompt_tokens(self.max_distractors)} + response {MAX_RESPONSE} tokens exceed the "
                             f"tiny window {WINDOW} (at most 7 distractors)")
        for f in ("name_reuse", "teacher_correct"):
            if not 0.0 <= getattr(self, f) <= 1.0:
                raise ValueError(f"R1AnswerTaskConfig.{f} must be in [0, 1], got {getattr(self, f)}")

    def at(self, distractors: int) -> R1AnswerTaskConfig:
        """The same task with exactly `distractors` distractors (evaluation per count)."""
        return dataclasses.replace(self, min_distractors=distractors, max_distractors=distractors)


def make_answer_sample(cfg: R1AnswerTaskConfig, seed: int, index: int) -> AnswerSample:
    rng = np.random.default_rng([seed, index, 35])
    n = int(rng.integers(cfg.min_distractors, cfg.max_distractors + 1))
    key, *others = [str(p) for p in rng.permutation(PEOPLE)[: n + 1]]
    place = str(rng.choice(PLACES))
    wrong = [x for x in PLACES if x != place]
    records = [f"{key} in {place} ."]
    for o in others:
        x = str(rng.choice(wrong))
        records.append(f"{key} likes {x} ." if rng.random() < cfg.name_reuse else f"{o} in {x} .")
    order = rng.permutation(len(records))
    mems = tuple((None, records[i]) for i in order)
    teacher = records[0] if rng.random() < cfg.teacher_correct or n == 0 else records[1 + int(rng.integers(n))]
    qa = QA(f"where is {key} ?", place, qid=f"{seed}:{index}:{teacher}", category=n)
    return AnswerSample(qa, (key, ""), (mems, ()), ())


def make_answer_split(cfg: R1AnswerTaskConfig, seed: int, count: int, start: int = 0) -> list[AnswerSample]:
    return [make_answer_sample(cfg, seed, start + i) for i in range(count)]


def relevant(sample: AnswerSample) -> str:
    return f"{sample.speakers[0]} in {sample.qa.answer} ."


def teacher_record(sample: AnswerSample) -> str:
    """The warm-start teacher's record (kept in the qid: `seed:index:record`)."""
    return sample.qa.qid.split(":", 2)[2]


def teacher_response(sample: AnswerSample, *, distill: bool) -> str:
    rec = teacher_record(sample)
    place = rec.split()[2]
    return f"{rec} answer {place}" if distill else place


def tiny_answer_prompt(question: str, speaker_a: str, memories_a: Sequence[tuple[str | None, str]], speaker_b: str,
                       memories_b: Sequence[tuple[str | None, str]], *, distill: bool = True) -> str:
    """The tiny answer prompt, with `memory_r1_prompts.answer_prompt`'s signature (speakers and dates unused)."""
    mems = " ".join(m for _, m in (*memories_a, *memories_b))
    return f"memory {mems} {question} {'select' if distill else 'answer'}"


def parse_plain(text: str) -> tuple[str, str]:
    """Strict: a one-word response is the answer ("marker"); anything else answers "" ("none", scored 0)."""
    w = str(text).split()
    return (w[0], "marker") if len(w) == 1 else ("", "none")


def parse_distill(text: str) -> tuple[str, str]:
    """Strict: a response ending `answer P` answers P ("marker"); anything else answers "" ("none", scored 0)."""
    w = str(text).split()
    return (w[-1], "marker") if len(w) >= 2 and w[-2] == "answer" else ("", "none")


def selection(text: str) -> list[str]:
    """The records a distillation response selects: the words before the first `answer`, split after each `.`."""
    w = str(text).split()
    w = w[: w.index("answer")] if "answer" in w else w
    out, cur = [], []
    for x in w:
        cur.append(x)
        if x == ".":
            out.append(" ".join(cur))
            cur = []
    return out + ([" ".join(cur)] if cur else [])


def answer_workflow(tok: TinyTokenizer, *, distill: bool, temperature: float) -> AnswerWorkflow:
    """Memory-R1's AnswerWorkflow with the tiny prompt and parser of the chosen variant."""
    cfg = MemoryR1Config(distill=distill, max_prompt_tokens=WINDOW - MAX_RESPONSE, max_answer_tokens=MAX_RESPONSE,
                         temperature=temperature)
    return AnswerWorkflow(tok, cfg, prompt=tiny_answer_prompt, parse=parse_distill if distill else parse_plain)


def selection_stats(samples: Sequence[AnswerSample], traces: Sequence[dict[str, Any]]) -> dict[str, float]:
    """How the distillation responses select: `select_relevant` (the relevant record is among the selected),
    `select_only_relevant` (exactly it), `select_count` (records selected), `answer_from_selection` (the answer is the
    place of a selected record), `em_given_relevant` / `em_given_not` (exact match when the relevant record is /
    is not selected; NaN if no such trace), and which wrong records are selected: `select_name_reuse` (a bank
    record about the asked person, `K likes X .`), `select_other_person` (a bank record about someone else),
    `select_not_in_bank` (a record the bank does not hold)."""
    rows = []
    for t in traces:
        s = samples[t["sample"]]
        sel, bank, key = selection(t["output"]), {m for _, m in s.memories[0]}, s.speakers[0]
        rel = relevant(s) in sel
        places = {r.split()[2] for r in sel if len(r.split()) == 4}
        wrong = [r for r in sel if r != relevant(s)]
        rows.append((rel, sel == [relevant(s)], len(sel), t["answer"] in places, t["reward"],
                     any(r in bank and r.split()[0] == key for r in wrong),
                     any(r in bank and r.split()[0] != key for r in wrong), any(r not in bank for r in wrong)))
    if not rows:
        return {}
    a = np.asarray(rows, dtype=float)
    given = lambda m: float(a[m, 4].mean()) if m.any() else float("nan")  # noqa: E731
    return {"select_relevant": float(a[:, 0].mean()), "select_only_relevant": float(a[:, 1].mean()),
            "select_count": float(a[:, 2].mean()), "answer_from_selection": float(a[:, 3].mean()),
            "em_given_relevant": given(a[:, 0] == 1), "em_given_not": given(a[:, 0] == 0),
            "select_name_reuse": float(a[:, 5].mean()), "select_other_person": float(a[:, 6].mean()),
            "select_not_in_bank": float(a[:, 7].mean())}


def evaluate_answer(engine, tok: TinyTokenizer, task: R1AnswerTaskConfig, *, distill: bool, size: int,
                    distractors: Sequence[int], sampled: int = 4, seed: int = 12345,
                    split_seed: int = HELDOUT_SEED) -> dict[str, Any]:
    """Per distractor count n (the first `size` samples of data seed `split_seed` (the held-out one) of `task.at(n)`, the same for both
    variants): greedy exact match `em_d{n}` and the mean over `sampled` temperature-1 answers `em_sampled_d{n}`;
    with distillation also the greedy selection statistics (`selection_stats`, suffixed `_d{n}`). `em` /
    `em_sampled`: the means over the counts."""
    out: dict[str, Any] = {}
    for n in distractors:
        samples = make_answer_split(task.at(n), split_seed, size)
        res = run_workflow(engine, answer_workflow(tok, distill=distill, temperature=0.0), samples, seed=seed,
                           record=False)
        out[f"em_d{n}"] = float(np.mean(res.rewards))
        out[f"unmarked_d{n}"] = float(res.stats["answer_unmarked"]) / size
        if distill:
            out.update({f"{k}_d{n}": v for k, v in selection_stats(samples, res.traces).items()})
        if n == distractors[-1]:
            out["traces"] = res.traces[:4]
        if sampled:
            res = run_workflow(engine, answer_workflow(tok, distill=distill, temperature=1.0), samples,
                               group_size=sampled, seed=seed, record=False)
            out[f"em_sampled_d{n}"] = float(np.mean(res.rewards))
    out["em"] = float(np.mean([out[f"em_d{n}"] for n in distractors]))
    if sampled:
        out["em_sampled"] = float(np.mean([out[f"em_sampled_d{n}"] for n in distractors]))
    return out
