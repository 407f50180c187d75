"""LongMemEval's judge protocol (xiaowu0162/LongMemEval `src/evaluation/evaluate_qa.py`, MIT): the prompts, the label
rule, and the judges that ask it.

Owns: `judge_prompt(question_type, question, answer, response, abstention)` (one template per question type plus
the abstention template, the official `get_anscheck_prompt` texts value for value, checked against a golden
rendering in tests/fixtures/longmemeval/judge_prompts.json), `label(reply)` (the official rule: correct iff "yes"
occurs in the stripped, lower-cased reply), `LmeVerdict`, and the judges sharing `judge(items) -> list[LmeVerdict]`
with items (question_type, question, answer, response, abstention): `OpenAILmeJudge` (the official request),
`EngineLmeJudge` (the same prompt on a memjax Engine, greedy, 10 tokens), and, NOT LLMs, `RuleLmeJudge` (tests and
smoke runs) and `ExactLmeJudge` (the tiny-vocabulary fixture). The protocol: docs/evaluation.md, 'LongMemEval'.
Invariant: a failed judge call (no reply after the retries) is a verdict with `label=None` and the error: it is
counted and never scored (neither right nor wrong); the harness leaves the question unscored and asks again on
resume. A reply, whatever it says, is a label (the official rule has no "unparseable" case).
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..engine import SamplingParams
from ..rewards.locomo import token_set_f1
from ..rewards.squad import normalize_answer
from ..rewards.chat_request import post_chat

_INTRO = ("I will give you a question, a correct answer, and a response from a model. Please answer yes if the "
          "response contains the correct answer. Otherwise, answer no.")
_STEPS = (" If the response is equivalent to the correct answer or contains all the intermediate steps to get the "
          "correct answer, you should also answer yes. If the response only contains a subset of the information "
          "required by the answer, answer no. ")
_TAIL = "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only."
TEMPLATES = {
    "single-session-user": _INTRO + _STEPS + _TAIL,
    "single-session-assistant": _INTRO + _STEPS + _TAIL,
    "multi-session": _INTRO + _STEPS + _TAIL,
    "temporal-reasoning": _INTRO + _STEPS + "In addition, do not penalize off-by-one errors for the number of days. If "
    "the question asks for the number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., "
    "predicting 19 days when the answer is 18), the model's response is still correct. " + _TAIL,
    "knowledge-update": _INTRO + " If the response contains some previous information along with an updated answer, "
    "the response should be considered as correct as long as the updated answer is the required answer." + _TAIL,
    "single-session-preference": "I will give you a question, a rubric for desired personalized response, and a "
    "response from a model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. "
    "The model does not need to reflect all the points in the rubric. The response is correct as long as it recalls "
    "and utilizes the user's personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}"
    "\n\nIs the model response correct? Answer yes or no only.",
}
ABSTENTION_TEMPLATE = ("I will give you an unanswerable question, an explanation, and a response from a model. Please "
                       "answer yes if the model correctly identifies the question as unanswerable. The model could say "
                       "that the information is incomplete, or some other information is given but the asked "
                       "information is not.\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}\n\nDoes the model "
                       "correctly identify the question as unanswerable? Answer yes or no only.")
MAX_TOKENS = 10          # the official request's max_tokens

Item = tuple[str, str, str, str, bool]      # (question_type, question, answer, response, abstention)


def judge_prompt(question_type: str, question: str, answer: str, response: str, abstention: bool = False) -> str:
    """The official prompt; the abstention template whatever the type when `abstention`."""
    if abstention:
        return ABSTENTION_TEMPLATE.format(question, answer, response)
    if question_type not in TEMPLATES:
        raise ValueError(f"judge_prompt: question_type {question_type!r} has no LongMemEval judge prompt "
                         f"(one of {', '.join(TEMPLATES)})")
    return TEMPLATES[question_type].format(question, answer, response)


def label(reply: str) -> bool:
    """The official label rule: `'yes' in reply.strip().lower()`."""
    return "yes" in reply.strip().lower()


@dataclass(frozen=True)
class LmeVerdict:
    label: bool | None        # None: the judge call failed (counted, never scored)
    reply: str = ""
    error: str = ""


class OpenAILmeJudge:
    """The official request to an OpenAI-compatible endpoint.

    POST {url}/chat/completions with one user message, n=1, temperature 0, max_tokens 10; stdlib HTTP, bounded
    timeout, `retries` re-sends with exponential back-off (the official script retries rate-limit and API errors
    with `backoff.expo`), up to `workers` requests in flight."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 60.0,
                 retries: int = 4, workers: int = 8, opener: Callable[..., object] = urllib.request.urlopen,
                 backoff_s: float = 1.0):
        if workers < 1 or retries < 0:
            raise ValueError(f"OpenAILmeJudge: workers must be >= 1 and retries >= 0 (got {workers}, {retries})")
        self.url, self.model, self.name = base_url.rstrip("/") + "/chat/completions", model, f"openai:{model}"
        self._key, self._timeout, self._retries, self._workers, self._open, self._backoff = (
            api_key, timeout_s, retries, workers, opener, backoff_s)

    def request_body(self, item: Item) -> dict:
        return {"model": self.model, "messages": [{"role": "user", "content": judge_prompt(*item)}], "n": 1,
                "temperature": 0, "max_tokens": MAX_TOKENS}

    def _ask(self, item: Item) -> LmeVerdict:
        def accept(content) -> LmeVerdict:
            if not isinstance(content, str):
                raise TypeError(f"message content is {type(content).__name__}, not text")
            return LmeVerdict(label(content), content.strip())

        verdict, err = post_chat(self.url, self.request_body(item), api_key=self._key, opener=self._open,
                                 timeout=self._timeout, retries=self._retries, accept=accept,
                                 delay=lambda attempt: min(self._backoff * 2.0 ** attempt, 30.0))
        return verdict if verdict is not None else LmeVerdict(None, "", err)

    def judge(self, items: Iterable[Item]) -> list[LmeVerdict]:
        items = list(items)
        if self._workers == 1 or len(items) <= 1:
            return [self._ask(it) for it in items]
        with ThreadPoolExecutor(max_workers=min(self._workers, len(items))) as pool:
            return list(pool.map(self._ask, items))


class EngineLmeJudge:
    """The official prompt through a memjax Engine, greedy, MAX_TOKENS tokens; an engine exception fails the chunk's
    verdicts (counted, never scored)."""

    def __init__(self, engine, tokenizer, *, name: str = "engine"):
        self._engine, self._tok, self.name = engine, tokenizer, f"engine:{name}"
        self._params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, stop_token_ids=(tokenizer.eos_id,))

    def judge(self, items: Iterable[Item]) -> list[LmeVerdict]:
        items = list(items)
        prompts = [self._tok.apply_chat_template([{"role": "user", "content": judge_prompt(*it)}],
                                                 add_generation_prompt=True) for it in items]
        try:
            outs = self._engine.generate(prompts, self._params)
        except Exception as e:  # noqa: BLE001 -- any engine failure is a failed judge call, never a score
            return [LmeVerdict(None, "", f"engine judge failed: {type(e).__name__}: {e}") for _ in items]
        texts = [self._tok.decode(o.token_ids, skip_special_tokens=True, skip_unknown=True) for o in outs]
        return [LmeVerdict(label(t), t.strip()) for t in texts]


_DECLINE = re.compile(r"not enough|unanswerable|no information|don't know|do not know|not mentioned|cannot answer",
                      re.IGNORECASE)


class RuleLmeJudge:
    """Not an LLM judge (tests and smoke runs only): yes iff token-set F1 >= 0.5, or, for an abstention question,
    iff the response declines (says the information is not enough / not mentioned / unknown)."""

    name = "rule-based (not an LLM)"

    def judge(self, items: Iterable[Item]) -> list[LmeVerdict]:
        out = []
        for _, _, answer, response, abstention in items:
            ok = bool(_DECLINE.search(response)) if abstention else token_set_f1(response, answer) >= 0.5
            out.append(LmeVerdict(ok, "yes" if ok else "no"))
        return out


class ExactLmeJudge:
    """Not an LLM judge (the tiny-vocabulary fixture): yes iff normalize_answer(response) == normalize_answer(gold),
    for every question type and for abstention questions alike: their gold is `none`, the tiny readers' word for no
    record (the tiny vocabularies cannot write a declining sentence); tests/fixtures/data/longmemeval_tiny.json."""

    name = "exact match (tiny vocabulary; not an LLM)"

    def judge(self, items: Iterable[Item]) -> list[LmeVerdict]:
        out = []
        for _, _, answer, response, _ in items:
            ok = bool(normalize_answer(str(answer))) and normalize_answer(response) == normalize_answer(str(answer))
            out.append(LmeVerdict(ok, "yes" if ok else "no"))
        return out
