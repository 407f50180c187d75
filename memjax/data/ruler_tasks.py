"""RULER task definitions: query templates, task specs and presets, the sample record, the generator config.

Owns: the data that says WHAT each RULER task is (`TASKS`), separate from how `memjax.data.ruler.RulerGenerator`
renders it. Templates are RULER's task templates as MemAgent's RULER copy words them (taskutils/memory_data/
synthetic/constants.py), with the context taken out: the context is the document a memory agent reads and the query
is its problem. A single-needle NIAH query is singularised as RULER does ("Some ... are all" -> "A ... is").

Invariants: specs and configs are frozen and validated on construction; `TASKS` mirrors RULER's synthetic.yaml
(haystack, key/value types, counts); `metric_for` is RULER's scorer per task (QA: string_match_part, else
string_match_all); `word_lists()` reads memjax/assets/wordlists (wonderwords' lists, MIT, see NOTICE.md there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal, Protocol

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic {type_v} for {key} is: {value}."
NIAH_QUERY = ("Some special magic {type_v} are hidden within the following text. Make sure to memorize it. "
              "What are all the special magic {type_v} for {query} mentioned in the provided text?")
NIAH_QUERY_ONE = ("A special magic {type_v} is hidden within the following text. Make sure to memorize it. "
                  "What is the special magic {type_v} for {query} mentioned in the provided text?")
VT_QUERY = ("Memorize and track the chain(s) of variable assignment hidden in the following text. "
            "Question: Find all variables that are assigned the value {value} in the text above.")
CWE_QUERY = ("Below is a numbered list of words. In these words, some appear more often than others. Memorize the "
             "ones that appear most often. Question: What are the {num} most common words in the above list?")
FWE_QUERY = ("Read the following coded text and track the frequency of each coded word. Find the three most "
             "frequently appeared coded words. Question: Do not provide any explanation. Please ignore the dots "
             "'....'. What are the three most frequently appeared words in the above coded text?")
QA_QUERY = "Answer the question based on the given documents. {question}"
NeedleType = Literal["words", "numbers", "uuids"]
_TYPES = ("words", "numbers", "uuids")


@dataclass(frozen=True)
class NIAHSpec:
    """Needle in a haystack: `num_keys` keys with `num_values` values each; `num_queries` keys are asked for."""

    haystack: Literal["noise", "needle", "essay"] = "noise"
    key_type: NeedleType = "words"
    value_type: NeedleType = "numbers"
    num_keys: int = 1
    num_values: int = 1
    num_queries: int = 1

    def __post_init__(self) -> None:
        if min(self.num_keys, self.num_values, self.num_queries) < 1 or self.num_queries > self.num_keys:
            raise ValueError(f"NIAHSpec: need 1 <= num_queries <= num_keys and num_values >= 1, got {self}")
        if self.haystack not in ("noise", "needle", "essay") or {self.key_type, self.value_type} - set(_TYPES):
            raise ValueError(f"NIAHSpec: haystack must be noise/needle/essay and types words/numbers/uuids: {self}")


@dataclass(frozen=True)
class VTSpec:
    """Variable tracking: `num_chains` chains of `num_hops` assignments in noise; the first chain is asked for."""

    num_chains: int = 1
    num_hops: int = 4

    def __post_init__(self) -> None:
        if self.num_chains < 1 or self.num_hops < 1:
            raise ValueError(f"VTSpec: need num_chains >= 1 and num_hops >= 1, got {self}")


@dataclass(frozen=True)
class CWESpec:
    """Common-words extraction; below 4096 target tokens RULER uses frequencies (6, 1) instead of (30, 3)."""

    freq_common: int = 30
    freq_uncommon: int = 3
    num_common: int = 10
    small_freqs: tuple[int, int] = (6, 1)

    def __post_init__(self) -> None:
        for fc, fu in ((self.freq_common, self.freq_uncommon), self.small_freqs):
            if not fc > fu >= 1 or self.num_common < 1:
                raise ValueError(f"CWESpec: need common > uncommon >= 1 frequencies and num_common >= 1, got {self}")


@dataclass(frozen=True)
class FWESpec:
    """Frequent-words extraction: coded words with Zipf(`alpha`) counts; vocab size `target // 50` when None."""

    alpha: float = 2.0
    coded_wordlen: int = 6
    vocab_size: int | None = None

    def __post_init__(self) -> None:
        if self.alpha <= 1.0 or self.coded_wordlen < 1 or (self.vocab_size is not None and self.vocab_size < 5):
            raise ValueError(f"FWESpec: need alpha > 1, coded_wordlen >= 1, vocab_size None or >= 5, got {self}")


@dataclass(frozen=True)
class QASpec:
    """QA over a document haystack: "squad" (qa_1) or "hotpotqa" (qa_2)."""

    dataset: Literal["squad", "hotpotqa"] = "squad"

    def __post_init__(self) -> None:
        if self.dataset not in ("squad", "hotpotqa"):
            raise ValueError(f"QASpec: dataset must be 'squad' or 'hotpotqa', got {self.dataset!r}")


TaskSpec = NIAHSpec | VTSpec | CWESpec | FWESpec | QASpec

TASKS: Mapping[str, TaskSpec] = {
    "niah_single_1": NIAHSpec("noise", "words", "numbers"),
    "niah_single_2": NIAHSpec("essay", "words", "numbers"),
    "niah_single_3": NIAHSpec("essay", "words", "uuids"),
    "niah_multikey_1": NIAHSpec("essay", "words", "numbers", num_keys=4),
    "niah_multikey_2": NIAHSpec("needle", "words", "numbers"),
    "niah_multikey_3": NIAHSpec("needle", "uuids", "uuids"),
    "niah_multivalue": NIAHSpec("essay", "words", "numbers", num_values=4),
    "niah_multiquery": NIAHSpec("essay", "words", "numbers", num_keys=4, num_queries=4),
    "vt": VTSpec(),
    "cwe": CWESpec(),
    "fwe": FWESpec(),
    "qa_1": QASpec("squad"),
    "qa_2": QASpec("hotpotqa"),
}


def without_essay(tasks: Mapping[str, TaskSpec]) -> dict[str, TaskSpec]:
    """The same tasks with every essay haystack replaced by the noise haystack (for runs without an essay)."""
    return {k: replace(v, haystack="noise") if isinstance(v, NIAHSpec) and v.haystack == "essay" else v
            for k, v in tasks.items()}


def metric_for(spec: TaskSpec) -> str:
    return "string_match_part" if isinstance(spec, QASpec) else "string_match_all"


@dataclass(frozen=True)
class RulerSample:
    """One rendered sample. `units` is the fitted unit count, `num_tokens` the context's token count."""

    task: str
    index: int
    context: str
    query: str
    answers: tuple[str, ...]
    metric: str
    num_tokens: int
    target_tokens: int
    units: int
    seed: int

    @property
    def id(self) -> str:
        return f"{self.task}/{self.target_tokens}/{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "task": self.task, "index": self.index, "context": self.context, "query": self.query,
                "answers": list(self.answers), "metric": self.metric, "num_tokens": self.num_tokens,
                "target_tokens": self.target_tokens, "units": self.units, "seed": self.seed}


class Encoder(Protocol):
    def encode(self, text: str) -> list[int]: ...


@dataclass(frozen=True)
class RulerConfig:
    """Target context length in tokens, the seed, and the minimum fill when a finite unit supply runs out.
    `qa_distractors`: "ruler" fills with the question's own article first (RULER / MemAgent), "other_articles"
    draws distractors only from other articles."""

    target_tokens: int
    seed: int = 42
    min_fill: float = 0.95
    qa_distractors: Literal["ruler", "other_articles"] = "ruler"

    def __post_init__(self) -> None:
        if self.target_tokens < 1 or self.seed < 0 or not 0.0 < self.min_fill <= 1.0:
            raise ValueError(f"RulerConfig: need target_tokens >= 1, seed >= 0, 0 < min_fill <= 1; got {self}")


@lru_cache(maxsize=1)
def word_lists() -> Mapping[str, tuple[str, ...]]:
    """wonderwords' nouns, adjectives and verbs (stripped, empties and duplicates dropped, file order)."""
    d = resources.files("memjax") / "assets" / "wordlists"
    out: dict[str, tuple[str, ...]] = {}
    for name in ("noun", "adjective", "verb"):
        lines = d.joinpath(f"{name}list.txt").read_text("utf-8").splitlines()
        out[name] = tuple(dict.fromkeys(w.strip() for w in lines if w.strip()))
    return MappingProxyType(out)
