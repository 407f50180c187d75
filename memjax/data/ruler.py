"""RULER synthetic long-context tasks, generated offline and fitted to a target token count with our tokenizer.

Owns `RulerGenerator`, which renders sample `index` of a task (niah_single_1..3, niah_multikey_1..3,
niah_multivalue, niah_multiquery, vt, cwe, fwe, qa_1 (SQuAD), qa_2 (HotpotQA)). What each task is (specs, presets,
query templates, the sample record) lives in `memjax.data.ruler_tasks` and is re-exported here.
Invariants:
- Deterministic: sample `index` of task `name` draws only from generators seeded with
  `(seed, crc32(name), index, stream)`.
- `target_tokens` counts the CONTEXT only; `memjax.data.length.fit_units` picks the largest count of the task's
  size unit whose context fits, so the shortfall is less than one unit; a finite unit supply that runs out below
  `min_fill * target` tokens is an error.
- Answers are recoverable from the context; the metric is RULER's (`string_match_all`; QA `string_match_part`).
- Essay-haystack tasks need a user-given essay text (not shipped) and raise without one; `without_essay(TASKS)`
  gives them on the noise haystack. Word lists come from wonderwords (memjax/assets/wordlists, MIT).
"""

from __future__ import annotations

import re
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .hotpotqa import HotpotQACorpus, format_context
from .length import fit_units
from .ruler_tasks import (
    CWE_QUERY,
    FWE_QUERY,
    NEEDLE,
    NIAH_QUERY,
    NIAH_QUERY_ONE,
    NOISE,
    QA_QUERY,
    TASKS,
    VT_QUERY,
    CWESpec,
    Encoder,
    FWESpec,
    NeedleType,
    NIAHSpec,
    QASpec,
    RulerConfig,
    RulerSample,
    TaskSpec,
    VTSpec,
    metric_for,
    without_essay,
    word_lists,
)
from .squad import SquadCorpus

__all__ = ["CWESpec", "FWESpec", "NIAHSpec", "QASpec", "RulerConfig", "RulerGenerator", "RulerSample", "TASKS",
           "TaskSpec", "VTSpec", "metric_for", "without_essay", "word_lists"]
_Plan = tuple[Callable[[int], str], int, int | None, str, list[str]]  # build, lo, hi, query, answers


def _zeta(a: float, n: int = 64) -> float:
    """Riemann zeta for a > 1 (partial sum + Euler-Maclaurin tail; error < 1e-12 for a >= 1.1)."""
    s = sum(k ** -a for k in range(1, n))
    return s + n ** (1 - a) / (a - 1) + 0.5 * n ** -a + a * n ** (-a - 1) / 12 - a * (a + 1) * (a + 2) * n ** (
        -a - 3) / 720


def _join_keys(keys: Sequence[str]) -> str:
    return ", ".join(keys[:-1]) + ", and " + keys[-1] if len(keys) > 1 else keys[0]


def _insert_at_depths(items: list[str], inserts: Sequence[str], depths: np.ndarray) -> list[str]:
    """Inserts `inserts` (in order) at fractional depths (sorted, in [0, 1)) of `items`."""
    pos = np.floor(np.sort(depths) * (len(items) + 1)).astype(int)
    out = list(items)
    for j, (p, s) in enumerate(zip(pos.tolist(), inserts)):
        out.insert(p + j, s)
    return out


class RulerGenerator:
    """Renders RULER samples. `tokenizer` defaults to the shipped Qwen2.5 tokenizer; `squad` / `hotpotqa` corpora
    are needed only for qa_1 / qa_2, `essay` only for essay-haystack tasks.

    Each task has a size unit (noise sentence / essay word / haystack needle / list word / coded word / document; one
    unit is ~4-25 tokens, a QA document ~100-800), and a sample's context has `<= target_tokens` tokens with
    `target - tokens < tokens of one more unit`. The essay haystack (niah_single_2/3, niah_multikey_1, niah_multivalue,
    niah_multiquery in RULER) needs an essay text from the user (e.g. Paul Graham's essays). Word keys and CWE words
    come from wonderwords' lists, as in RULER.
    """

    def __init__(self, config: RulerConfig, *, tokenizer: Encoder | None = None,
                 tasks: Mapping[str, TaskSpec] = TASKS, essay: str | None = None, squad: SquadCorpus | None = None,
                 hotpotqa: HotpotQACorpus | None = None) -> None:
        if tokenizer is None:
            from memjax.core.tokenizer import Tokenizer
            tokenizer = Tokenizer.default()
        self.config, self.tokenizer, self.tasks = config, tokenizer, dict(tasks)
        self._essay_words = tuple(essay.split()) if essay else ()
        if essay is not None and not self._essay_words:
            raise ValueError("RulerGenerator: essay text is empty")
        self.squad, self.hotpotqa = squad, hotpotqa

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text))

    def _rng(self, task: str, index: int, *stream: int) -> np.random.Generator:
        return np.random.default_rng([self.config.seed, zlib.crc32(task.encode()), index, *stream])

    def num_questions(self, task: str) -> int | None:
        """How many samples a QA task has (its answerable questions); None for unbounded synthetic tasks."""
        spec = self._spec(task)
        return len(self._qa_corpus(task, spec).questions) if isinstance(spec, QASpec) else None

    def _spec(self, task: str) -> TaskSpec:
        if task not in self.tasks:
            raise KeyError(f"unknown RULER task {task!r}; known: {', '.join(sorted(self.tasks))}")
        return self.tasks[task]

    def _plan(self, task: str, index: int) -> _Plan:
        """(build(units) -> context, min units, max units or None, query, answers) for sample `index`."""
        spec = self._spec(task)
        if index < 0:
            raise IndexError(f"{task}: sample index must be >= 0, got {index}")
        if isinstance(spec, NIAHSpec):
            return self._niah(task, spec, index)
        if isinstance(spec, VTSpec):
            return self._vt(task, spec, index)
        if isinstance(spec, CWESpec):
            return self._cwe(task, spec, index)
        if isinstance(spec, FWESpec):
            return self._fwe(task, spec, index)
        return self._qa(task, spec, index)

    def render(self, task: str, index: int, units: int) -> str:
        """The context of sample `index` with exactly `units` units (what the length fit searches over)."""
        return self._plan(task, index)[0](units)

    def sample(self, task: str, index: int) -> RulerSample:
        """Sample `index` of `task`, fitted to `config.target_tokens` context tokens."""
        spec = self._spec(task)
        build, lo, hi, query, answers = self._plan(task, index)
        target = self.config.target_tokens
        try:
            fit = fit_units(build, self.count, target, lo=lo, hi=hi)
        except ValueError as e:
            raise ValueError(f"{task}: cannot fit sample {index} to {target} tokens: {e}") from None
        if fit.units == hi and fit.tokens < self.config.min_fill * target:
            raise ValueError(f"{task}: ran out of material at {hi} units ({fit.tokens} tokens < "
                             f"{self.config.min_fill:.0%} of target {target}); use a smaller target or more data")
        if isinstance(spec, FWESpec):
            answers = self._fwe_check(task, spec, fit.units, answers)
        return RulerSample(task=task, index=index, context=fit.text, query=query, answers=tuple(answers),
                           metric=metric_for(spec), num_tokens=fit.tokens, target_tokens=target, units=fit.units,
                           seed=self.config.seed)

    # --- NIAH ---------------------------------------------------------------------------------------------------
    @staticmethod
    def _draw(rng: np.random.Generator, kind: NeedleType) -> str:
        if kind == "numbers":
            return str(int(rng.integers(10 ** 6, 10 ** 7)))
        if kind == "uuids":
            return str(uuid.UUID(int=int.from_bytes(rng.bytes(16), "big"), version=4))
        adjs, nouns = word_lists()["adjective"], word_lists()["noun"]
        return f"{adjs[int(rng.integers(len(adjs)))]}-{nouns[int(rng.integers(len(nouns)))]}"

    def _unique(self, rng: np.random.Generator, kind: NeedleType, n: int, taken: set[str]) -> list[str]:
        out: list[str] = []
        while len(out) < n:
            x = self._draw(rng, kind)
            if x not in taken:
                taken.add(x)
                out.append(x)
        return out

    def _niah(self, task: str, spec: NIAHSpec, index: int) -> _Plan:
        rng = self._rng(task, index, 0)
        taken: set[str] = set()
        keys = self._unique(rng, spec.key_type, spec.num_keys, taken)
        values = [self._unique(rng, spec.value_type, spec.num_values, taken) for _ in keys]
        needles = [NEEDLE.format(type_v=spec.value_type, key=k, value=v) for k, vs in zip(keys, values) for v in vs]
        needles = [needles[i] for i in rng.permutation(len(needles))]
        asked = [int(i) for i in rng.choice(spec.num_keys, spec.num_queries, replace=False)]
        answers = [v for i in asked for v in values[i]]
        one = spec.num_queries * spec.num_values == 1
        query = (NIAH_QUERY_ONE if one else NIAH_QUERY).format(
            type_v=spec.value_type[:-1] if one else spec.value_type, query=_join_keys([keys[i] for i in asked]))
        depths = rng.random(len(needles))
        if spec.haystack == "noise":
            return (lambda n: "\n".join(_insert_at_depths([NOISE] * n, needles, depths))), 0, None, query, answers
        if spec.haystack == "needle":
            chunks: dict[int, list[str]] = {}

            def line(i: int) -> str:
                c, r = divmod(i, 256)
                if c not in chunks:
                    crng = self._rng(task, index, 1, c)
                    chunks[c] = [NEEDLE.format(type_v=spec.value_type, key=k, value=self._draw(crng, spec.value_type))
                                 for k in self._unique(crng, spec.key_type, 256, set(keys))]
                return chunks[c][r]

            return (lambda n: "\n".join(_insert_at_depths([line(i) for i in range(n)], needles, depths))), 0, None, \
                query, answers
        if not self._essay_words:
            raise ValueError(f"{task}: this task uses an essay haystack; pass essay=<text> to RulerGenerator or use "
                             f"memjax.data.ruler.without_essay(tasks) for the noise haystack")
        words = self._essay_words
        # RULER inserts essay needles at 40 evenly spaced depths, sampled without replacement.
        depth_grid = np.round(np.linspace(0, 100, 40)) / 100.0
        edepths = np.sort(depth_grid[rng.choice(40, len(needles), replace=len(needles) > 40)])

        def essay(n: int) -> str:
            text = " ".join(words[i % len(words)] for i in range(n))
            sents = [s for s in re.split(r"(?<=[.!?])\s+", text) if s] if text else []
            pos = [int(len(sents) * d) for d in edepths]
            parts: list[str] = []
            prev = 0
            for p, needle in zip(pos, needles):
                parts += sents[prev:p] + [needle]
                prev = p
            return " ".join(parts + sents[prev:])

        return essay, 0, None, query, answers

    # --- variable tracking --------------------------------------------------------------------------------------
    def _vt(self, task: str, spec: VTSpec, index: int) -> _Plan:
        rng = self._rng(task, index, 0)
        nvars = spec.num_chains * (spec.num_hops + 1)
        names: list[str] = []
        while len(names) < nvars:
            name = "".join(chr(65 + int(c)) for c in rng.integers(0, 26, 5))
            if name not in names:
                names.append(name)
        vals = [int(v) for v in rng.choice(np.arange(10000, 99999), spec.num_chains, replace=False)]
        chains = []
        for c in range(spec.num_chains):
            v = names[c * (spec.num_hops + 1):(c + 1) * (spec.num_hops + 1)]
            chains.append([f"VAR {v[0]} = {vals[c]}"] + [f"VAR {v[j + 1]} = VAR {v[j]} " for j in range(spec.num_hops)])
        depths = [rng.random(len(ch)) for ch in chains]

        def build(n: int) -> str:
            sents = [NOISE + "\n"] * n
            for ch, d in zip(chains, depths):
                sents = _insert_at_depths(sents, ch, d)
            return " ".join(sents).replace(". \n", ".\n")

        return build, 0, None, VT_QUERY.format(value=vals[0]), names[:spec.num_hops + 1]

    # --- common words -------------------------------------------------------------------------------------------
    def _cwe(self, task: str, spec: CWESpec, index: int) -> _Plan:
        w = word_lists()
        words = sorted(set(w["noun"] + w["adjective"] + w["verb"]))
        perm = self._rng(task, index, 0).permutation(len(words))
        chosen = [words[int(i)] for i in perm]
        fc, fu = spec.small_freqs if self.config.target_tokens < 4096 else (spec.freq_common, spec.freq_uncommon)
        common = chosen[:spec.num_common]

        def build(n: int) -> str:
            items = common * fc + chosen[spec.num_common:n] * fu
            items = [items[int(i)] for i in self._rng(task, index, 1, n).permutation(len(items))]
            return " ".join(f"{i + 1}. {x}" for i, x in enumerate(items))

        return build, spec.num_common, len(words), CWE_QUERY.format(num=spec.num_common), common

    # --- frequent words -----------------------------------------------------------------------------------------
    def _fwe_counts(self, spec: FWESpec, vocab_size: int, num_words: int) -> np.ndarray:
        k = np.arange(1, vocab_size + 1, dtype=np.float64)
        return np.floor(num_words * k ** -spec.alpha / _zeta(spec.alpha)).astype(np.int64)

    def _fwe(self, task: str, spec: FWESpec, index: int) -> _Plan:
        rng = self._rng(task, index, 0)
        size = self._fwe_size(spec)
        vocab: set[str] = set()
        while len(vocab) < size:
            vocab.add("".join(chr(97 + int(c)) for c in rng.integers(0, 26, spec.coded_wordlen)))
        ordered = sorted(vocab)
        ordered = [ordered[int(i)] for i in rng.permutation(size)]
        ordered[0] = "..."  # the top-ranked word is noise, as in RULER

        def build(n: int) -> str:
            counts = self._fwe_counts(spec, size, n)
            items = [w for w, c in zip(ordered, counts.tolist()) for _ in range(c)]
            items = [items[int(i)] for i in self._rng(task, index, 1, n).permutation(len(items))]
            return " ".join(items)

        return build, 1, None, FWE_QUERY, ordered[1:4]

    def _fwe_size(self, spec: FWESpec) -> int:
        return spec.vocab_size or max(self.config.target_tokens // 50, 5)

    def _fwe_check(self, task: str, spec: FWESpec, n: int, answers: list[str]) -> list[str]:
        c = self._fwe_counts(spec, self._fwe_size(spec), n).tolist() + [0]
        if not (c[1] > c[2] > c[3] > c[4]):
            raise ValueError(f"{task}: target {self.config.target_tokens} is too small for three distinct most "
                             f"frequent words (counts {c[:5]})")
        return answers

    # --- QA -----------------------------------------------------------------------------------------------------
    def _qa_corpus(self, task: str, spec: QASpec) -> SquadCorpus | HotpotQACorpus:
        corpus = self.squad if spec.dataset == "squad" else self.hotpotqa
        if corpus is None:
            raise ValueError(f"{task}: needs a {spec.dataset} corpus; pass {spec.dataset}=memjax.data.load_"
                             f"{spec.dataset}(path) to RulerGenerator")
        return corpus

    def _qa(self, task: str, spec: QASpec, index: int) -> _Plan:
        corpus = self._qa_corpus(task, spec)
        if index >= len(corpus.questions):
            raise IndexError(f"{task}: sample index {index} >= {len(corpus.questions)} questions in {corpus.path}")
        q = corpus.questions[index]
        if isinstance(corpus, SquadCorpus):
            own, more = [q.doc_id], list(q.article_doc_ids)  # type: ignore[union-attr]
        else:
            own, more = list(q.doc_ids), []  # type: ignore[union-attr]
        rng = self._rng(task, index, 0)
        pool = len(corpus.docs)
        keys = rng.random(pool)
        mask = np.ones(pool, dtype=bool)
        mask[own + more] = False
        rest = [int(i) for i in rng.permutation(pool) if mask[i]]
        first = [more[int(i)] for i in rng.permutation(len(more))] if self.config.qa_distractors == "ruler" else []
        cand = own + first + rest

        def build(n: int) -> str:
            ids = sorted(cand[:n], key=lambda d: keys[d])
            return format_context([corpus.docs[d] for d in ids])

        return build, len(own), len(cand), QA_QUERY.format(question=q.question), list(q.answers)

