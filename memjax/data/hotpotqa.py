"""RULER-HotpotQA: long-document QA synthesised from a HotpotQA (distractor) JSON file, as MemAgent builds it.

Owns loading and validating a HotpotQA file (`load_hotpotqa`), the document pool, the per-question synthesis of an
N-document context (`synthesize`; the recipe of MemAgent's `taskutils/memory_data/processing.py`, reimplemented,
is in its docstring) and the no-context filter hook used when building training sets (`filter_no_context`).
Invariants:
- Deterministic: sample `index` under `seed` draws from `numpy.random.default_rng([seed, index])` only, so it does
  not depend on worker processes, iteration order or other samples (the reference's sets are not reproducible;
  ours are, but are not the same draws).
- Exactly N documents, all distinct, every gold paragraph present; `gold_doc_indices` are their 1-based
  `Document {i}` numbers in the context.
- `len(own) <= N <= pool size`, else a `ValueError` saying so (the first 100 dev records give ~1,000 paragraphs;
  N = 6400 needs the full dev set).
- Bad input raises a one-line error naming the file, the record index and the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DOCUMENT_TEMPLATE = "Document {i}:\n{document}"
DOCUMENT_SEPARATOR = "\n\n"
# The prompt the reference's no-context filter sent (taskutils/memory_data/filter.py), kept for users building a judge.
NO_CONTEXT_PROMPT = "{question}\nYour final answer in \\boxed{{}}.\n"


@dataclass(frozen=True)
class HotpotQuestion:
    """One HotpotQA question. `doc_ids` / `gold_doc_ids` index `HotpotQACorpus.docs` (file order, unique)."""

    id: str
    question: str
    answers: tuple[str, ...]
    doc_ids: tuple[int, ...]
    gold_doc_ids: tuple[int, ...]
    type: str = ""
    level: str = ""


@dataclass(frozen=True)
class HotpotQACorpus:
    """A loaded HotpotQA file: the sorted unique document pool and its questions."""

    path: str
    docs: tuple[str, ...]
    questions: tuple[HotpotQuestion, ...]

    def __len__(self) -> int:
        return len(self.questions)


@dataclass(frozen=True)
class RulerHotpotQAConfig:
    """How many documents each context holds (N) and the synthesis seed."""

    num_docs: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.num_docs, bool) or not isinstance(self.num_docs, int) or self.num_docs < 1:
            raise ValueError(f"RulerHotpotQAConfig.num_docs must be a positive int, got {self.num_docs!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"RulerHotpotQAConfig.seed must be a non-negative int, got {self.seed!r}")


@dataclass(frozen=True)
class RulerHotpotQASample:
    """One synthesised sample. `doc_ids` are the pool ids in context order; `query` is the question (MemAgent's
    prompt is the bare question)."""

    id: str
    index: int
    question: str
    answers: tuple[str, ...]
    context: str
    gold_doc_indices: tuple[int, ...]
    num_docs: int
    seed: int
    doc_ids: tuple[int, ...] = field(repr=False)

    @property
    def query(self) -> str:
        return self.question

    def to_dict(self) -> dict[str, Any]:
        """Plain-python record (lists, str, int) for grain pipelines and JSON."""
        return {"id": self.id, "index": self.index, "question": self.question, "query": self.question,
                "answers": list(self.answers), "context": self.context,
                "gold_doc_indices": list(self.gold_doc_indices), "num_docs": self.num_docs, "seed": self.seed,
                "task": "ruler_hotpotqa", "metric": "sub_em"}


def _doc_text(title: str, sentences: list[str]) -> str:
    return f"{title}\n{''.join(sentences)}"


def _check_record(path: str, i: int, rec: Any) -> None:
    where = f"{path}: record {i}"
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    for key in ("_id", "question", "answer", "context", "supporting_facts"):
        if key not in rec:
            raise ValueError(f"{where}: missing field {key!r}")
    for key in ("_id", "question", "answer"):
        if not isinstance(rec[key], str):
            raise ValueError(f"{where}: field {key!r} must be a string, got {type(rec[key]).__name__}")
    ctx = rec["context"]
    if not isinstance(ctx, list) or not ctx:
        raise ValueError(f"{where}: field 'context' must be a non-empty list of [title, [sentences]]")
    for j, para in enumerate(ctx):
        ok = (isinstance(para, list) and len(para) == 2 and isinstance(para[0], str) and isinstance(para[1], list)
              and all(isinstance(s, str) for s in para[1]))
        if not ok:
            raise ValueError(f"{where}: context[{j}] must be [title: str, sentences: list[str]]")
    sf = rec["supporting_facts"]
    if not isinstance(sf, list) or not all(isinstance(f, list) and f and isinstance(f[0], str) for f in sf):
        raise ValueError(f"{where}: field 'supporting_facts' must be a list of [title, sentence_index]")


def load_hotpotqa(path: str | Path) -> HotpotQACorpus:
    """Reads a HotpotQA JSON file (a list of records with `_id`, `question`, `answer`, `context`,
    `supporting_facts`) and builds the sorted unique document pool."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: HotpotQA file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: cannot read HotpotQA file ({e})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    if not isinstance(data, list) or not data:
        raise ValueError(f"{p}: expected a non-empty JSON list of HotpotQA records, got {type(data).__name__}")
    for i, rec in enumerate(data):
        _check_record(str(p), i, rec)
    docs = tuple(sorted({_doc_text(t, s) for rec in data for t, s in rec["context"]}))
    doc_index = {d: k for k, d in enumerate(docs)}
    questions = []
    for i, rec in enumerate(data):
        own: dict[int, str] = {}  # pool id -> title, first occurrence order
        for t, s in rec["context"]:
            own.setdefault(doc_index[_doc_text(t, s)], t)
        gold_titles = list(dict.fromkeys(f[0] for f in rec["supporting_facts"]))
        gold = tuple(k for k, t in own.items() if t in gold_titles)
        missing = [t for t in gold_titles if t not in own.values()]
        if missing:
            raise ValueError(f"{p}: record {i}: supporting_facts title {missing[0]!r} is not in its context")
        questions.append(HotpotQuestion(id=rec["_id"], question=rec["question"], answers=(rec["answer"],),
                                        doc_ids=tuple(own), gold_doc_ids=gold, type=str(rec.get("type", "")),
                                        level=str(rec.get("level", ""))))
    return HotpotQACorpus(path=str(p), docs=docs, questions=tuple(questions))


def format_context(docs: Sequence[str]) -> str:
    """`"Document {i}:\\n{doc}"` for i = 1.., joined by a blank line."""
    return DOCUMENT_SEPARATOR.join(DOCUMENT_TEMPLATE.format(i=i + 1, document=d) for i, d in enumerate(docs))


def sample_rng(seed: int, index: int) -> np.random.Generator:
    """The generator that sample `index` under `seed` draws from (independent of every other sample)."""
    return np.random.default_rng([seed, index])


def choose_documents(corpus: HotpotQACorpus, index: int, config: RulerHotpotQAConfig) -> np.ndarray:
    """Pool ids of sample `index`'s N documents, in context order (own paragraphs + sampled distractors, shuffled)."""
    if not 0 <= index < len(corpus.questions):
        raise IndexError(f"{corpus.path}: question index {index} out of range [0, {len(corpus.questions)})")
    q = corpus.questions[index]
    n, pool, m = config.num_docs, len(corpus.docs), len(q.doc_ids)
    if n < m:
        raise ValueError(f"{corpus.path}: num_docs={n} is smaller than question {index}'s own {m} paragraphs")
    if n > pool:
        raise ValueError(f"{corpus.path}: num_docs={n} exceeds the document pool of {pool} unique paragraphs in this "
                         f"file; large N needs a larger HotpotQA file (e.g. the full dev set for N up to 6400)")
    rng = sample_rng(config.seed, index)
    own = np.asarray(q.doc_ids, dtype=np.int64)
    excluded = np.sort(own)
    # Draw ranks in the complement of `own` (size pool - m), then map rank r to the r-th non-excluded pool id:
    # excluded[j] - j counts the free ids before excluded[j].
    ranks = rng.choice(pool - m, size=n - m, replace=False) if n > m else np.zeros(0, dtype=np.int64)
    distractors = ranks + np.searchsorted(excluded - np.arange(m), ranks, side="right")
    ids = np.concatenate([own, distractors.astype(np.int64)])
    return ids[rng.permutation(n)]


def synthesize(corpus: HotpotQACorpus, index: int, config: RulerHotpotQAConfig) -> RulerHotpotQASample:
    r"""Sample `index` of RULER-HotpotQA with `config.num_docs` documents.

    The recipe (MemAgent's `taskutils/memory_data/processing.py`, reimplemented):
    - document pool = every unique `f"{title}\n{''.join(sentences)}"` over the whole file, sorted (Python string order);
    - a question keeps its own paragraphs (10 in the distractor setting) plus `N - len(own)` paragraphs sampled without
      replacement from the rest of the pool (its own paragraphs excluded), and the N documents are shuffled;
    - the context is `"Document {i}:\n{doc}"` (i from 1) joined by `"\n\n"`; the answers are `[answer]`.
    """
    ids = choose_documents(corpus, index, config)
    q = corpus.questions[index]
    pos = {int(d): i + 1 for i, d in enumerate(ids)}
    gold = tuple(sorted(pos[g] for g in q.gold_doc_ids))
    context = format_context([corpus.docs[int(d)] for d in ids])
    return RulerHotpotQASample(id=q.id, index=index, question=q.question, answers=q.answers, context=context,
                               gold_doc_indices=gold, num_docs=config.num_docs, seed=config.seed,
                               doc_ids=tuple(int(d) for d in ids))


# A judge for the no-context filter: given a batch of questions, True where the model answers correctly WITHOUT the
# document (those questions are dropped from the training set). E.g. prompt with NO_CONTEXT_PROMPT and score with
# memjax.rewards.memagent_reward.
NoContextJudge = Callable[[Sequence[HotpotQuestion]], Sequence[bool]]


@dataclass(frozen=True)
class FilterResult:
    """Question indices kept and dropped by `filter_no_context` (both ascending)."""

    kept: tuple[int, ...]
    dropped: tuple[int, ...]


def filter_no_context(corpus: HotpotQACorpus, answered_without_context: NoContextJudge, *, batch_size: int = 64,
                      indices: Sequence[int] | None = None) -> FilterResult:
    """Drops the questions the judge says are answered correctly without any document (MemAgent's training-set
    filter). The judge is called on batches of at most `batch_size` questions and must return one bool each."""
    if batch_size < 1:
        raise ValueError(f"filter_no_context: batch_size must be >= 1, got {batch_size}")
    order = list(range(len(corpus.questions))) if indices is None else [int(i) for i in indices]
    for i in order:
        if not 0 <= i < len(corpus.questions):
            raise IndexError(f"{corpus.path}: question index {i} out of range [0, {len(corpus.questions)})")
    kept: list[int] = []
    dropped: list[int] = []
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        verdicts = list(answered_without_context([corpus.questions[i] for i in chunk]))
        if len(verdicts) != len(chunk):
            raise ValueError(f"filter_no_context: the judge returned {len(verdicts)} verdicts for {len(chunk)} "
                             f"questions")
        for i, v in zip(chunk, verdicts):
            (dropped if bool(v) else kept).append(i)
    return FilterResult(kept=tuple(sorted(kept)), dropped=tuple(sorted(dropped)))
