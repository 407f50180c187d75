"""SUMER on LongMemEval through `python -m memjax.evaluate configs/sumer/longmemeval.py`, the engine scripted (a
policy that searches the question once and submits the first record shown): one episode per question over its
haystack's messages, every question judged, recall@k of the `has_answer` turns from what the searches showed."""

import json
import re

from memjax import Tokenizer

from memjax.data.longmemeval import load_longmemeval

from longmemeval_cli import FIXTURE, run_longmemeval, scripted_engine
import pytest

pytestmark = pytest.mark.e2e

SMALL = ["embedder=hashbow", "model.preset=tiny-qwen-vocab", "model.dtype=float32", "engine.window=4096",
         "max_prompt_tokens=3000", "max_response_tokens=1000", "max_turns=3"]


def policy(text):
    last = text.rsplit("<|im_start|>user\n", 1)[1]
    if "<tool_response>" not in last:                 # the question turn: one semantic search with the question
        q = re.search(r"Question: (.*)", last).group(1)
        return '<tool_call>\n' + json.dumps({"name": "search_memory", "arguments": {"query": q}}) + '\n</tool_call>'
    hit = re.search(r"\[D\d+:\d+\] \w+: (.*)", last)
    answer = hit.group(1) if hit else "I don't know"
    return '<tool_call>\n' + json.dumps({"name": "submit_answer", "arguments": {"answer": answer}}) + '\n</tool_call>'


def test_memjax_evaluate_sumer_longmemeval(tmp_path):
    tok = Tokenizer.default()
    res, lines, engines = run_longmemeval("sumer", tmp_path / "ev",
                                          lambda cfg: scripted_engine(tok, policy, cfg.window), SMALL)
    assert len(engines) == 1 and res["table"]["overall"]["n"] == 8 and res["counts"]["no_answer"] == 0
    data = load_longmemeval(FIXTURE)
    for x, q in zip(lines, data.questions):   # the answer is a message of the question's own haystack
        assert x["hypothesis"] in {t.content for s in q.sessions for t in s.turns}
    ssu = next(x for x in lines if x["question_id"] == "mj_ssu_1")   # 3 sessions of 2 turns, windows of +-2 turns
    assert ssu["retrieved"] == ["D1:1", "D1:2", "D2:1", "D2:2", "D3:1", "D3:2"]
    assert ssu["recall"]["turn_recall_any@5"] == 1.0 and ssu["recall"]["session_recall_all@5"] == 1.0
    assert all(x["retrieved"] for x in lines) and all("recall" not in x for x in lines if x["abstention"])
    assert res["table"]["single-session-user"]["turn_recall_all@10"] is not None

