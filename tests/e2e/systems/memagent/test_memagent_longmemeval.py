"""MemAgent on LongMemEval through `python -m memjax.evaluate configs/memagent/longmemeval.py`, the engine scripted (a
policy that keeps the last line of each section as its memory and boxes it at the end): the haystack is read as one
long document in chunks (sessions with dates, "role: content" turns), the hypothesis is the boxed answer, no memory
bank so no recall columns."""

import re

from memjax import Tokenizer
from memjax.data.longmemeval import load_longmemeval
from memjax.systems.memagent.longmemeval_eval import haystack_document

from longmemeval_cli import FIXTURE, run_longmemeval, scripted_engine
import pytest

pytestmark = pytest.mark.e2e

SMALL = ["model.preset=tiny-qwen-vocab", "model.dtype=float32", "engine.window=2048", "chunk_tokens=48",
         "memory_tokens=64", "max_response_tokens=64"]


def policy(text):
    user = text.rsplit("<|im_start|>user\n", 1)[1]
    if "<section>" in user:
        lines = [x for x in user.split("<section>\n", 1)[1].split("\n</section>")[0].splitlines() if x.strip()]
        return lines[-1] if lines else "nothing"
    memory = user.split("<memory>\n", 1)[1].split("\n</memory>")[0]
    return f"The answer is \\boxed{{{memory}}}"


def test_memjax_evaluate_memagent_longmemeval(tmp_path):
    tok = Tokenizer.default()
    res, lines, engines = run_longmemeval("memagent", tmp_path / "ev",
                                          lambda cfg: scripted_engine(tok, policy, cfg.window), SMALL)
    assert len(engines) == 1 and res["table"]["overall"]["n"] == 8 and res["counts"]["predictor_errors"] == 0
    data = load_longmemeval(FIXTURE)
    for x, q in zip(lines, data.questions):          # the boxed memory: a line of the question's own document
        doc = haystack_document(q)
        assert x["hypothesis"] and x["hypothesis"] in doc and "retrieved" not in x and x["boxed"] is True
    assert haystack_document(data.questions[0]).startswith("\n### Session 1:\nSession Date: 2024/03/01 (Fri) 09:12\n")
    prompts = [tok.decode(p) for _, p, _ in engines[0].log]
    finals = [p for p in prompts if "<section>" not in p]
    assert len(finals) == 8 and all(re.search(r"Current Date: 20\d\d/\d\d/\d\d \(\w+\) \d\d:\d\d\nQuestion: ", p)
                                    for p in finals)
    assert len(prompts) > 3 * len(finals)            # several chunks per haystack at 48 tokens a chunk
    assert "turn_recall_any@5" not in res["table"]["overall"]
