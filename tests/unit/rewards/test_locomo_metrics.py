"""LoCoMo metrics on hand-computed cases; the judge prompt, label parser (fuzzed) and the three judge backends."""

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.evaluation.engine_judge import EngineJudge
from memjax.rewards.locomo import (JUDGE_PROMPT, OpenAIJudge, RuleBasedJudge, judge_prompt, m_fail,
                                   parse_judge_label, token_set_f1)
from memjax.rewards.text import bleu1, token_f1_multiset

PAPER = Path(__file__).parents[3] / ".." / "shared" / "papers" / "memory-r1.txt"


def test_f1_set_vs_multiset_and_bleu1_by_hand():
    # pred tokens after normalisation: cat cat sat (set {cat, sat}); gold: cat sat on mat
    assert token_set_f1("The cat, the cat sat!", "a cat sat on the mat") == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert token_f1_multiset("The cat, the cat sat!", "a cat sat on the mat") == pytest.approx(2 * (2 / 3) * 0.5 / (7 / 6))
    assert token_set_f1("Buddy", "buddy.") == 1.0 and token_set_f1("dog", "cat") == 0.0
    assert token_set_f1("the", "a") == 1.0 and token_set_f1("the", "cat") == 0.0 and token_set_f1(None, "x") == 0.0
    assert token_set_f1("7 May 2023", 2023) == pytest.approx(2 * (1 / 3) * 1 / (4 / 3))
    # 5 predicted tokens all in the 6-token gold: precision 1, brevity penalty exp(1 - 6/5)
    assert bleu1("cat sat on the mat", "the cat sat on a mat") == pytest.approx(math.exp(-0.2))


def test_judge_prompt_is_fig12_verbatim():
    p = judge_prompt("Q?", "G", "A")
    assert p.startswith("Your task is to label an answer to a question as 'CORRECT' or 'WRONG'.")
    assert "Question: Q?\nGold answer: G\nGenerated answer: A\n" in p
    assert p.endswith('Return the label in JSON format with the key as "label".')
    assert judge_prompt("{gold_answer}", "G", "A").count("G") >= 2   # braces in a question are not re-expanded
    if PAPER.exists():
        assert JUDGE_PROMPT in PAPER.read_text(encoding="utf-8")


@pytest.mark.parametrize("reply, want", [
    ('The answer names the same dog. {"label": "CORRECT"}', ("CORRECT", "json")),
    ('It is not CORRECT to say so.\n```json\n{"label": "WRONG"}\n```', ("WRONG", "json")),
    ('{"label": "CORRECT"} on reflection {"label": "WRONG"}', ("WRONG", "json")),
    ("{'label': 'correct'}", ("CORRECT", "json")),
    ('{"label": "WRONG"} but I would say CORRECT', ("WRONG", "json")),
    ("CORRECT or WRONG? It touches the topic, so CORRECT", ("CORRECT", "text")),
    ("The answer is INCORRECT", (None, "none")),
    ("the answer is correct", (None, "none")),
    ('{"label": "maybe"}', (None, "none")),
    ('{"label": ', (None, "none")),
    ("", (None, "none")),
    (None, (None, "none")),
    (12, (None, "none")),
])
def test_parse_judge_label_adversarial(reply, want):
    assert parse_judge_label(reply) == want


@settings(max_examples=150, deadline=None)
@given(st.text(), st.sampled_from(["CORRECT", "WRONG"]), st.text(alphabet=st.characters(blacklist_characters="lL")))
def test_parse_judge_label_fuzz(prefix, label, suffix):
    label_out, source = parse_judge_label(prefix)
    assert label_out in (None, "CORRECT", "WRONG") and source in ("json", "text", "none")
    assert parse_judge_label(prefix + json.dumps({"label": label}) + suffix) == (label, "json")


def test_rule_based_judge():
    j = RuleBasedJudge(threshold=0.5)
    v = j.judge([("q", "Buddy and Scout", "Scout and Buddy"), ("q", "Lisbon", "Paris")])
    assert [x.correct for x in v] == [True, False] and j.stats.asked == 2 and "rule" in j.name


class _Handler(BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append(body)
        prompt = body["messages"][0]["content"]
        gold = prompt.split("Gold answer: ")[-1].split("\n")[0]
        gen = prompt.split("Generated answer: ")[-1].split("\n")[0]
        if gen == "garble":
            content = "I cannot decide."
        else:
            content = f'Same topic. {{"label": "{"CORRECT" if gold.lower() in gen.lower() else "WRONG"}"}}'
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def test_openai_judge_against_local_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.timeout = 5
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        j = OpenAIJudge(f"http://127.0.0.1:{server.server_port}/v1", "gpt-oss-120b", api_key="k", timeout_s=5)
        v = j.judge([("Where?", "Lisbon", "in Lisbon, Portugal"), ("Who?", "Buddy", "Scout"),
                     ("When?", "2022", "garble")])
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=5)
    assert [(x.correct, x.label, x.source) for x in v] == [(True, "CORRECT", "json"), (False, "WRONG", "json"),
                                                           (False, None, "none")]
    assert j.stats.asked == 3 and j.stats.unparsed == 1
    req = next(r for r in _Handler.seen if "Question: Where?" in r["messages"][0]["content"])
    assert req["temperature"] == 0 and req["model"] == "gpt-oss-120b"
    assert req["messages"][0]["content"] == judge_prompt("Where?", "Lisbon", "in Lisbon, Portugal")
    # a dead endpoint is a counted error, not an exception
    dead = OpenAIJudge(f"http://127.0.0.1:{server.server_port}/v1", "m", timeout_s=1, retries=1)
    assert dead.judge([("q", "g", "a")])[0].source == "error" and dead.stats.errors == 1


def test_engine_judge_with_duck_typed_engine():
    from memjax.engine import SamplingParams

    class Tok:
        eos_id = 0

        def apply_chat_template(self, messages, add_generation_prompt=True):
            return [ord(c) for c in messages[0]["content"][-20:]]

        def decode(self, ids, skip_special_tokens=False, skip_unknown=False):
            return "".join(chr(i) for i in ids)

    class Out:
        def __init__(self, text):
            self.token_ids = [ord(c) for c in text]

    class Eng:
        def generate(self, prompts, params):
            assert isinstance(params, SamplingParams) and params.temperature == 0.0
            return [Out('{"label": "CORRECT"}'), Out("WRONG")][: len(prompts)]

    j = EngineJudge(Eng(), Tok(), name="qwen2.5-7b")
    assert [(v.label, v.source) for v in j.judge([("q", "g", "a"), ("q", "g", "b")])] == [("CORRECT", "json"),
                                                                                          ("WRONG", "text")]


def test_m_fail_by_hand():
    assert m_fail([["D1:1", "D1:2"], ["D2:1"]], {"D1:1", "D9:9"}) == pytest.approx(2 / 3)
    assert m_fail([["D1:1"]], ["D1:1"]) == 0.0 and m_fail([[], []], []) is None
