"""LongMemEval's judge: the prompts equal the official `get_anscheck_prompt` (golden rendering of the official
function at the recorded commit, tests/fixtures/longmemeval/judge_prompts.json, made by
scripts/gen_longmemeval_judge_fixture.py), the label rule, the official request, and a failed judge call is a
failure (retried, counted, never a label), for the OpenAI-compatible judge and the Engine judge."""

import io
import json
import urllib.error
from pathlib import Path

import pytest

from memjax import Tokenizer
from memjax.evaluation.longmemeval_judge import EngineLmeJudge, OpenAILmeJudge, RuleLmeJudge, judge_prompt, label

from scripted_engine import ScriptedEngine

GOLDEN = json.loads((Path(__file__).parents[2] / "fixtures" / "longmemeval" / "judge_prompts.json").read_text())


def test_golden_records_its_source():
    assert GOLDEN["repository"] == "xiaowu0162/LongMemEval" and GOLDEN["path"] == "src/evaluation/evaluate_qa.py"
    assert len(GOLDEN["commit"]) == 40 and len(GOLDEN["sha256"]) == 64
    kinds = {(c["task"], c["abstention"]) for c in GOLDEN["cases"]}
    assert {t for t, ab in kinds if not ab} == {t for t, ab in kinds if ab} and len({t for t, _ in kinds}) == 6


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: f"{c['task']}{'-abs' if c['abstention'] else ''}")
def test_prompt_equals_the_official_text(case):
    assert judge_prompt(case["task"], case["question"], case["answer"], case["response"],
                        case["abstention"]) == case["prompt"]


def test_unknown_type_and_label_rule():
    with pytest.raises(ValueError, match="open-domain"):
        judge_prompt("open-domain", "q", "a", "r")
    assert judge_prompt("open-domain", "q", "a", "r", abstention=True).startswith("I will give you an unanswerable")
    assert label("Yes") and label("  yes.\n") and label("YES, correct") and label("Eyes")   # 'yes' in lower()
    assert not label("No") and not label("") and not label("n/a")


class FakeHTTP:
    """urlopen stand-in: each call pops the next outcome (a reply text or an exception)."""

    def __init__(self, *outcomes):
        self.outcomes, self.bodies = list(outcomes), []

    def __call__(self, req, timeout):
        self.bodies.append(json.loads(req.data))
        o = self.outcomes.pop(0)
        if isinstance(o, Exception):
            raise o
        return io.BytesIO(json.dumps({"choices": [{"message": {"content": o}}]}).encode())


ITEM = ("temporal-reasoning", "How many days?", "18", "19 days", False)


def test_openai_request_and_labels():
    http = FakeHTTP(" Yes\n", "no")
    j = OpenAILmeJudge("http://h:1/v1/", "gpt-4o-2024-08-06", opener=http, workers=1)
    v = j.judge([ITEM, ("multi-session", "q", "a", "r", True)])
    assert [x.label for x in v] == [True, False] and v[0].reply == "Yes"
    body = http.bodies[0]
    assert body == {"model": "gpt-4o-2024-08-06", "messages": [{"role": "user", "content": judge_prompt(*ITEM)}],
                    "n": 1, "temperature": 0, "max_tokens": 10}
    assert http.bodies[1]["messages"][0]["content"].startswith("I will give you an unanswerable question")


def test_openai_failure_is_retried_then_never_a_label():
    http = FakeHTTP(urllib.error.URLError("refused"), "yes")
    v = OpenAILmeJudge("http://h/v1", "m", opener=http, retries=2, backoff_s=0).judge([ITEM])[0]
    assert v.label is True and len(http.bodies) == 2                # a retry recovers
    bad = [urllib.error.URLError("refused"), ValueError("not JSON"), TimeoutError("slow")]
    v = OpenAILmeJudge("http://h/v1", "m", opener=FakeHTTP(*bad), retries=2, backoff_s=0).judge([ITEM])[0]
    assert v.label is None and "after 3 tries" in v.error and "TimeoutError" in v.error
    v = OpenAILmeJudge("http://h/v1", "m", opener=FakeHTTP(None), retries=0).judge([ITEM])[0]   # content null
    assert v.label is None and "not text" in v.error


def test_engine_judge_and_its_failure():
    tok = Tokenizer.default()
    eng = ScriptedEngine(tok, lambda text: "yes" if "19 days" in text else "no")
    v = EngineLmeJudge(eng, tok).judge([ITEM, ("single-session-user", "q", "a", "other", False)])
    assert [x.label for x in v] == [True, False] and judge_prompt(*ITEM) in eng.prompts[0]

    class Broken:
        def generate(self, prompts, params):
            raise RuntimeError("out of pages")
    v = EngineLmeJudge(Broken(), tok).judge([ITEM, ITEM])
    assert [x.label for x in v] == [None, None] and "out of pages" in v[0].error


def test_rule_judge():
    v = RuleLmeJudge().judge([("single-session-user", "q", "a beagle", "It is a beagle.", False),
                              ("single-session-user", "q", "x", "The information provided is not enough.", True),
                              ("single-session-user", "q", "x", "A beagle.", True)])
    assert [x.label for x in v] == [True, True, False]


def test_fixture_generator_executes_only_the_prompt_function():
    import importlib.util

    path = Path(__file__).parents[3] / "scripts" / "gen_longmemeval_judge_fixture.py"
    spec = importlib.util.spec_from_file_location("gen_lme_fixture", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    source = ("import openai_that_is_not_installed\nraise SystemExit('module code ran')\n"
              "def get_anscheck_prompt(task, question, answer, response, abstention=False):\n"
              "    return f'{task}|{question}|{answer}|{response}|{abstention}'\n")
    fn = gen.prompt_function(source)
    assert fn("t", "q", "a", "r", abstention=True) == "t|q|a|r|True"
    assert {c[0] for c in gen.CASES} == set(GOLDEN_TYPES) and len(gen.CASES) == len(GOLDEN["cases"])


GOLDEN_TYPES = {c["task"] for c in GOLDEN["cases"]}
