"""LLM-judge profiles: each paper's judge prompt, label parser and handling of unparseable replies.

Owns: `JudgeProfile`, the registry `JUDGE_PROFILES` / `get_judge_profile(name)`, the prompts and parsers.
A judge (`memjax.rewards.locomo.OpenAIJudge`, `memjax.evaluation.engine_judge.EngineJudge`) takes a profile: it
renders `profile.prompt(question, gold, generated)` as one user message, asks at temperature 0 with
`profile.max_tokens`, parses with `profile.parse(reply) -> (label | None, source)`, re-asks up to
`profile.attempts` times while the reply has no label, and then scores a reply without a label per
`profile.unparsed`: "wrong" (J = 0, counted) or "drop" (left out of the J mean, counted).
Profiles: `memory_r1` (default; Memory-R1 Fig. 12 verbatim, `JUDGE_PROMPT`, with `parse_judge_label`; SUMER's
stand-in), `memory_r2` (Memory-R2 @357b4ec's scoring script) and `mem0` (Mem0 @373709f's llm_judge.py). Their
sources, parsers, re-asks and requests: docs/metric_profiles.md, 'Judge profiles'.
Invariants: parsers never raise; `extract_label_memory_r2` and `parse_label_mem0` equal the official functions on
tests/fixtures/judge_label_goldens.json (scripts/gen_judge_label_goldens.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

# Memory-R1 paper Fig. 12, verbatim as printed, line breaks included (the "memory_r1" profile's prompt)
JUDGE_PROMPT = """Your task is to label an answer to a question as 'CORRECT' or 'WRONG'.
You will be given the following data:
(1) a question (posed by one user to another user),
(2) a 'gold' (ground truth) answer,
(3) a generated answer,
which you will score as CORRECT or WRONG.
The point of the question is to ask about something one user should know about the other user based on their
prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be longer, but you should be generous with your grading — as long as it touches
on the same topic as the gold answer, it should be counted as CORRECT.
For time-related questions, the gold answer will be a specific date, month, or year. The generated answer
might include relative references (e.g., "last Tuesday"), but you should be generous — if it refers to
the same time period as the gold answer, mark it CORRECT, even if the format differs (e.g., "May 7th" vs.
"7 May").
Now it's time for the real question:
Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}
First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG.
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.
Return the label in JSON format with the key as "label"."""

_LABEL_KV = re.compile(r"""["']?label["']?\s*:\s*["']?\s*(correct|wrong)\b""", re.IGNORECASE)
_LABEL_WORD = re.compile(r"\b(CORRECT|WRONG)\b")


def parse_judge_label(reply: object) -> tuple[str | None, str]:
    """(label, source): the last `"label": CORRECT|WRONG` pair, else the last bare upper-case CORRECT/WRONG.

    Returns (None, "none") when neither is present; never raises, whatever `reply` is.
    """
    if not isinstance(reply, str):
        return None, "none"
    kv = _LABEL_KV.findall(reply)
    if kv:
        return kv[-1].upper(), "json"
    words = _LABEL_WORD.findall(reply)
    if words:
        return words[-1], "text"
    return None, "none"

MEMORY_R2_JUDGE_PROMPT = """Your task is to label an answer to a question as 'CORRECT' or 'WRONG'. You will be given:
(1) a question, (2) a gold (ground truth) answer, (3) a generated answer.

The gold answer is usually concise; the generated answer may be longer. Be generous: if the generated answer touches on the same topic/date as the gold, count CORRECT. Different formats for the same date (e.g. "May 7" vs "7 May") are CORRECT.

Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}

First give a one-sentence reasoning, then finish with CORRECT or WRONG. Do NOT include both.
Return a JSON object with key "label" whose value is exactly "CORRECT" or "WRONG"."""

MEM0_JUDGE_PROMPT = """
Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be given the following data:
    (1) a question (posed by one user to another user), 
    (2) a ’gold’ (ground truth) answer, 
    (3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT. 

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it's the same date.

Now it's time for the real question:
Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG. 
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.

Just return the label CORRECT or WRONG in a json format with the key as "label".
"""

_R2_JSON = re.compile(r"\{[^{}]*\"label\"[^{}]*\}", flags=re.DOTALL)
_R2_WORD = re.compile(r"\b(CORRECT|WRONG)\b")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


def extract_label_memory_r2(text: object) -> tuple[str | None, str]:
    """Memory-R2's `extract_label`: (label, "json" | "text" | "none").

    The first `{...}` without nested braces that contains `"label"`, read with `json.loads`, label upper-cased and
    stripped; if that gives no CORRECT/WRONG, the *last* `\\bCORRECT\\b|\\bWRONG\\b` of the upper-cased reply (so a
    bare lower-case "correct" counts, "incorrect" does not)."""
    if not isinstance(text, str):
        return None, "none"
    try:
        m = _R2_JSON.search(text)
        if m:
            obj = json.loads(m.group(0))
            lab = str(obj.get("label", "")).upper().strip()
            if lab in ("CORRECT", "WRONG"):
                return lab, "json"
    except Exception:       # as the official code: any failure falls through to the word search
        pass
    words = _R2_WORD.findall(text.upper())
    if words:
        return words[-1], "text"
    return None, "none"


def _extract_json_mem0(text: str) -> str:
    text = text.strip()
    m = _FENCE.search(text)
    if m:
        return m.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end != -1 and end > start:
        return text[start: end + 1]
    return text


def parse_label_mem0(text: object) -> tuple[str | None, str]:
    """Mem0's `json.loads(extract_json(reply))["label"]`, then 1 iff == "CORRECT": ("CORRECT" | "WRONG", "json"),
    or (None, "none") where the official line raises."""
    if not isinstance(text, str):
        return None, "none"
    try:
        label = json.loads(_extract_json_mem0(text))["label"]
    except Exception:
        return None, "none"
    return ("CORRECT" if label == "CORRECT" else "WRONG"), "json"


def _fill_format(template: str) -> Callable[[str, str, str], str]:
    def fill(question: str, gold: str, generated: str) -> str:
        return template.format(question=question, gold_answer=gold, generated_answer=generated)
    return fill


def _fill_replace(question: str, gold: str, generated: str) -> str:
    return (JUDGE_PROMPT.replace("{question}", str(question)).replace("{gold_answer}", str(gold))
            .replace("{generated_answer}", str(generated)))


@dataclass(frozen=True)
class JudgeProfile:
    name: str
    source: str                                          # repository @ commit : path ("" for memjax's own reading)
    prompt: Callable[[str, str, str], str]               # (question, gold, generated) -> user message
    parse: Callable[[object], tuple[str | None, str]]    # reply -> (label | None, source)
    unparsed: str = "wrong"                              # "wrong" (J = 0) | "drop" (left out of the J mean)
    attempts: int = 1                                    # asks while the reply has no label
    max_tokens: int = 512                                # the engine judge's cap; sent to an API unless below
    api_max_tokens: bool = True                          # False: the API request has no max_tokens (API default)
    response_format: str | None = None                   # API request's response_format type ("json_object")

    def __post_init__(self):
        if self.unparsed not in ("wrong", "drop"):
            raise ValueError(f"JudgeProfile.unparsed: 'wrong' or 'drop', got {self.unparsed!r}")
        if self.attempts < 1:
            raise ValueError(f"JudgeProfile.attempts: must be >= 1, got {self.attempts}")


JUDGE_PROFILES: dict[str, JudgeProfile] = {
    "memory_r1": JudgeProfile("memory_r1", "", _fill_replace, parse_judge_label),
    "memory_r2": JudgeProfile(
        "memory_r2", "ahmedehabb/Memory-R2@357b4ec:testing/pipeline_test_locomo_qa_dump/score_locomo_qa_dumps.py",
        _fill_format(MEMORY_R2_JUDGE_PROMPT), extract_label_memory_r2, unparsed="drop", attempts=3, max_tokens=256),
    "mem0": JudgeProfile("mem0", "mem0ai/mem0@373709f:evaluation/metrics/llm_judge.py",
                         _fill_format(MEM0_JUDGE_PROMPT), parse_label_mem0, api_max_tokens=False,
                         response_format="json_object"),
}


def get_judge_profile(name: str) -> JudgeProfile:
    if name not in JUDGE_PROFILES:
        raise ValueError(f"judge_profile={name!r}: unknown; known: {sorted(JUDGE_PROFILES)}")
    return JUDGE_PROFILES[name]
