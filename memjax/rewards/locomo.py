"""LoCoMo answer scoring: token-set F1, the LLM judges (J) and M-Fail.

Owns: `token_set_f1` (F1 over the *sets* of SQuAD-normalised tokens, as Memory-R2's code and SUMER compute it; the
multiset version is `memjax.rewards.text.token_f1_multiset`), `judge_messages` (the Memory-R1 Fig. 12 prompt of
memjax/rewards/judge_profiles.py), the judges and `m_fail`. BLEU-1 is `memjax.rewards.text.bleu1`; normalisation
is `memjax.rewards.squad.normalize_answer` (no other normaliser here).
Judges share `judge(items) -> list[Verdict]` with items (question, gold, generated), ask at temperature 0 and
parse per their judge profile: `OpenAIJudge` (an OpenAI-compatible `/v1/chat/completions` endpoint, stdlib HTTP,
up to `workers` concurrent requests, bounded timeout and retries) and `RuleBasedJudge` (NOT an LLM: token-set F1
against a threshold, for tests and smoke runs); `EngineJudge` lives above the engine, memjax/evaluation/engine_judge.py.
Invariants: a failed request or an unparseable reply is counted, never an exception mid-evaluation (WRONG, or
left out of J where the profile drops it); parsers never raise (fuzzed).
M-Fail (Memory-R2) = sum over questions of |evidence not in the bank's dia_ids| / sum of |evidence|.
"""

from __future__ import annotations

import dataclasses
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .judge_profiles import JUDGE_PROMPT, JudgeProfile, get_judge_profile, parse_judge_label  # noqa: F401  (re-exported)
from .squad import normalize_answer
from .chat_request import post_chat


def token_set_f1(pred: object, gold: object) -> float:
    """F1 of the sets of SQuAD-normalised tokens (0.0 for a non-str prediction; 1.0 when both sides are empty)."""
    if not isinstance(pred, str):
        return 0.0
    p, g = set(normalize_answer(pred).split()), set(normalize_answer(str(gold)).split())
    if not p or not g:
        return float(p == g)
    common = len(p & g)
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def judge_prompt(question: str, gold: str, generated: str) -> str:
    return (JUDGE_PROMPT.replace("{question}", str(question)).replace("{gold_answer}", str(gold))
            .replace("{generated_answer}", str(generated)))


def judge_messages(question: str, gold: str, generated: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": judge_prompt(question, gold, generated)}]


@dataclass(frozen=True)
class Verdict:
    correct: bool
    label: str | None          # None: unparseable reply or failed request (scored WRONG, or dropped: below)
    source: str                # "json" | "text" | "none" | "error" | "rule"
    reply: str
    dropped: bool = False      # no label and the judge profile leaves such replies out of J (Memory-R2's scorer)


@dataclass
class JudgeStats:
    asked: int = 0
    unparsed: int = 0
    errors: int = 0
    dropped: int = 0
    log: list[str] = field(default_factory=list)

    def record(self, v: Verdict) -> Verdict:
        self.asked += 1
        self.dropped += v.dropped
        if v.source == "none":
            self.unparsed += 1
            self.log.append(f"unparseable judge reply: {v.reply[:120]!r}")
        elif v.source == "error":
            self.errors += 1
            self.log.append(v.reply[:200])
        return v


def _verdict(reply: str, profile=None) -> Verdict:
    """The verdict on `reply` under a judge profile (memjax.rewards.judge_profiles; None: Memory-R1's parser)."""
    label, source = parse_judge_label(reply) if profile is None else profile.parse(reply)
    dropped = label is None and profile is not None and profile.unparsed == "drop"
    return Verdict(correct=label == "CORRECT", label=label, source=source, reply=reply, dropped=dropped)


def _profile(profile):
    return profile if isinstance(profile, JudgeProfile) else get_judge_profile(profile)


Item = tuple[str, str, str]    # (question, gold answer, generated answer)


class RuleBasedJudge:
    """Not an LLM judge: CORRECT iff token_set_f1(generated, gold) >= threshold. For tests and smoke runs only."""

    name = "rule-based-token-set-f1"

    def __init__(self, threshold: float = 0.5):
        self.threshold, self.stats = threshold, JudgeStats()

    def judge(self, items: Iterable[Item]) -> list[Verdict]:
        out = []
        for _, gold, gen in items:
            ok = token_set_f1(gen, gold) >= self.threshold
            out.append(self.stats.record(Verdict(ok, "CORRECT" if ok else "WRONG", "rule", "")))
        return out


class OpenAIJudge:
    """POST {base_url}/chat/completions (OpenAI-compatible), temperature 0; stdlib only.

    `profile` (memjax.rewards.judge_profiles: "memory_r1" | "memory_r2" | "mem0") picks the prompt, the label
    parser, the max_tokens (unless given; "mem0" sends none, as Mem0's request does), the response_format
    ("mem0": json_object), re-asks while a reply has no label, and whether such a reply is WRONG or dropped
    from J."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 60.0,
                 retries: int = 2, max_tokens: int | None = None, workers: int = 8,
                 opener: Callable[..., object] = urllib.request.urlopen, profile="memory_r1"):
        if workers < 1:
            raise ValueError(f"OpenAIJudge.workers: must be >= 1, got {workers}")
        self.profile = _profile(profile)
        self._send_max_tokens = max_tokens is not None or self.profile.api_max_tokens  # given, or the script sends it
        max_tokens = self.profile.max_tokens if max_tokens is None else max_tokens
        self._workers = workers
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.name, self.stats = model, f"openai:{model}", JudgeStats()
        self._key, self._timeout, self._retries, self._max_tokens, self._open = (api_key, timeout_s, retries,
                                                                                 max_tokens, opener)

    def _ask(self, item: Item) -> Verdict:
        v = self._ask_once(item)
        for _ in range(self.profile.attempts - 1):      # Memory-R2's scorer re-asks while it has no label
            if v.label is not None:
                break
            v = self._ask_once(item)
        if v.label is None and self.profile.unparsed == "drop" and not v.dropped:
            v = dataclasses.replace(v, dropped=True)    # there a failed request is left out of J too
        return v

    def _ask_once(self, item: Item) -> Verdict:
        q, gold, gen = item
        msgs = [{"role": "user", "content": self.profile.prompt(str(q), str(gold), str(gen))}]
        req_body = {"model": self.model, "messages": msgs, "temperature": 0}
        if self._send_max_tokens:
            req_body["max_tokens"] = self._max_tokens
        if self.profile.response_format:  # Mem0's request asks for a JSON object
            req_body["response_format"] = {"type": self.profile.response_format}
        content, err = post_chat(self.url, req_body, api_key=self._key, opener=self._open, timeout=self._timeout,
                                 retries=self._retries, delay=lambda attempt: min(2.0 ** attempt * 0.1, 2.0))
        if err:
            return Verdict(False, None, "error", err)
        return _verdict(content if isinstance(content, str) else "", self.profile)

    def judge(self, items: Iterable[Item]) -> list[Verdict]:
        """Up to `workers` requests in flight; verdicts in input order."""
        items = list(items)
        if self._workers == 1 or len(items) <= 1:
            verdicts = [self._ask(it) for it in items]
        else:
            with ThreadPoolExecutor(max_workers=min(self._workers, len(items))) as pool:
                verdicts = list(pool.map(self._ask, items))
        return [self.stats.record(v) for v in verdicts]


def m_fail(evidence: Sequence[Sequence[str]], bank_dia_ids: Iterable[str]) -> float | None:
    """Missing evidence ids over all evidence ids (None when there is no evidence at all)."""
    have = set(bank_dia_ids)
    total = sum(len(ev) for ev in evidence)
    if total == 0:
        return None
    return sum(1 for ev in evidence for d in ev if d not in have) / total
