"""Judge profiles: Memory-R2's and Mem0's judge prompts and label parsers equal the official code on golden replies
(scripts/gen_judge_label_goldens.py), and the judges use the profile's prompt, re-asks and unparseable handling."""

import io
import json
from pathlib import Path

import pytest

from memjax.rewards.judge_profiles import (JUDGE_PROFILES, extract_label_memory_r2, get_judge_profile,
                                           parse_label_mem0)
from memjax.rewards.locomo import JUDGE_PROMPT, OpenAIJudge, judge_prompt

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "judge_label_goldens.json"


def _data():
    return json.loads(FIX.read_text(encoding="utf-8"))


def test_labels_match_official_goldens():
    d = _data()
    assert d["meta"]["memory_r2"]["commit"] == "357b4ec" and d["meta"]["mem0"]["commit"] == "373709f"
    cases = d["cases"]
    assert len(cases) >= 1000
    bad_r2 = [(c["reply"], c["memory_r2"]) for c in cases if extract_label_memory_r2(c["reply"])[0] != c["memory_r2"]]
    assert not bad_r2, f"{len(bad_r2)} mismatches, first: {bad_r2[:3]}"

    def mem0(reply):
        label, _ = parse_label_mem0(reply)
        return "raise" if label is None else int(label == "CORRECT")
    bad_m0 = [(c["reply"], c["mem0"]) for c in cases
              if mem0(c["reply"]) != ("raise" if str(c["mem0"]).startswith("raise") else c["mem0"])]
    assert not bad_m0, f"{len(bad_m0)} mismatches, first: {bad_m0[:3]}"
    # the goldens cover every outcome of both parsers
    assert {str(c["memory_r2"]) for c in cases} == {"CORRECT", "WRONG", "None"}
    assert {0, 1} <= {c["mem0"] for c in cases} and any(str(c["mem0"]).startswith("raise") for c in cases)


def test_prompts_match_official():
    d = _data()
    for name in ("memory_r2", "mem0"):
        assert [JUDGE_PROFILES[name].prompt(*it) for it in d["items"]] == d["prompts"][name]
    assert JUDGE_PROFILES["memory_r1"].prompt("q", "g", "a") == judge_prompt("q", "g", "a") != JUDGE_PROMPT


def test_memory_r2_quirks():
    assert extract_label_memory_r2("It is correct.") == ("CORRECT", "text")          # bare lower-case counts
    assert extract_label_memory_r2("incorrect")[0] is None
    assert extract_label_memory_r2('{"label": "correct"} WRONG') == ("CORRECT", "json")   # first JSON wins
    assert extract_label_memory_r2("{'label': 'CORRECT'} but WRONG") == ("WRONG", "text")  # json.loads fails
    assert extract_label_memory_r2(None) == (None, "none")
    p = get_judge_profile("memory_r2")
    assert p.unparsed == "drop" and p.attempts == 3 and p.max_tokens == 256
    with pytest.raises(ValueError, match="unknown"):
        get_judge_profile("nope")


class _Replies:
    """An OpenAI-compatible endpoint replaying canned replies; records the prompts."""

    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []

    def __call__(self, req, timeout):
        body = json.loads(req.data.decode())
        self.prompts.append((body["messages"][0]["content"], body.get("max_tokens")))
        self.bodies = getattr(self, "bodies", []) + [body]
        return io.BytesIO(json.dumps({"choices": [{"message": {"content": self.replies.pop(0)}}]}).encode())


def test_openai_judge_memory_r2_reasks_then_drops():
    server = _Replies(["hmm", "still unsure", "no idea", "ok correct"])
    j = OpenAIJudge("http://x/v1", "m", opener=server, profile="memory_r2", workers=1)
    v = j.judge([("q?", "7 May", "May 7")])[0]
    assert v.label is None and v.dropped and not v.correct and len(server.prompts) == 3   # 3 attempts, then None
    assert server.prompts[0] == (JUDGE_PROFILES["memory_r2"].prompt("q?", "7 May", "May 7"), 256)
    v2 = j.judge([("q?", "7 May", "May 7")])[0]
    assert v2.correct and not v2.dropped and j.stats.dropped == 1


def test_openai_judge_memory_r1_unparsed_is_wrong():
    server = _Replies(["hmm"])
    v = OpenAIJudge("http://x/v1", "m", opener=server, workers=1).judge([("q", "g", "a")])[0]
    assert not v.correct and not v.dropped and len(server.prompts) == 1 and server.prompts[0][1] == 512


def test_openai_judge_requests_as_each_official_script():
    """Mem0's llm_judge.py sends response_format json_object, temperature 0 and no max_tokens; Memory-R2's
    judge_once temperature 0 and max_tokens 256; neither sends the other's field."""
    server = _Replies(['{"label": "CORRECT"}', '{"label": "WRONG"}', "CORRECT", '{"label": "CORRECT"}'])
    assert OpenAIJudge("http://x/v1", "m", opener=server, profile="mem0", workers=1).judge([("q", "g", "a")])[0].correct
    assert not OpenAIJudge("http://x/v1", "m", opener=server, profile="mem0", workers=1,
                           max_tokens=64).judge([("q", "g", "a")])[0].correct
    OpenAIJudge("http://x/v1", "m", opener=server, profile="memory_r2", workers=1).judge([("q", "g", "a")])
    OpenAIJudge("http://x/v1", "m", opener=server, workers=1).judge([("q", "g", "a")])
    mem0, mem0_capped, r2, r1 = server.bodies
    assert mem0 == {"model": "m", "messages": mem0["messages"], "temperature": 0,
                    "response_format": {"type": "json_object"}}
    assert mem0_capped["max_tokens"] == 64  # an explicit cap is still sent
    assert r2 == {"model": "m", "messages": r2["messages"], "temperature": 0, "max_tokens": 256}
    assert "response_format" not in r1 and r1["max_tokens"] == 512


def test_dropped_j_is_left_out_of_the_table():
    from memjax.evaluation.locomo import LocomoEvalConfig
    from memjax.evaluation.locomo_table import score_table

    recs = [{"category": 4, "prediction": "a", "gold": "a", "f1_set": 1.0, "f1": 1.0, "b1": 1.0, "j": j,
             "evidence": []} for j in (1.0, 0.0, None)]
    assert score_table(recs)["overall"]["J"] == 50.0
    assert LocomoEvalConfig(judge_profile="mem0").judge_profile == "mem0"
    with pytest.raises(ValueError, match="judge_profile"):
        LocomoEvalConfig(judge_profile="nope")


def test_results_name_the_judge_profile(tmp_path):
    from memjax.data.locomo import Question
    from memjax.evaluation.locomo import evaluate_locomo

    qs = [Question("conv-x", 0, "q?", 4, "7 May", None, ("D1:1",)), Question("conv-x", 1, "q2?", 2, "x", None, ())]
    server = _Replies(['{"label": "CORRECT"}', "no label", "still none", "none again"])
    judge = OpenAIJudge("http://x/v1", "m", opener=server, profile="memory_r2", workers=1)
    res = evaluate_locomo(qs, lambda q: q.answer, judge, tmp_path, chart=False)
    assert res["judge_profile"] == "memory_r2" and res["counts"]["judge_dropped"] == 1
    assert res["table"]["overall"]["J"] == 100.0 and res["table"]["overall"]["n"] == 2   # the dropped J left out
    assert "profile memory_r2" in (tmp_path / "results.md").read_text()
