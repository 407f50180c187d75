"""benchmarks/recipe_workload.py's measured prompt templates are the shipped prompts' lengths under the shipped
Qwen2.5 tokenizer (a prompt edit that changes them fails here), and its LoCoMo lengths are locomo10.json's when
the shared data is present."""

import json
import statistics
from pathlib import Path

import pytest

from benchmarks import recipe_workload as rw

LOCOMO = Path(__file__).resolve().parents[3].parent / "shared/data/locomo/locomo10.json"


@pytest.fixture(scope="module")
def tok():
    from memjax import Tokenizer

    return Tokenizer.from_dir("memjax/assets/qwen2.5-tokenizer")


def _chat(tok, user: str, system: str | None = None, **kw) -> int:
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return len(tok.apply_chat_template(msgs, add_generation_prompt=True, **kw))


def test_prompt_templates(tok):
    from memjax.systems.memory_r1 import prompts as r1
    from memjax.systems.memory_r2 import messages as r2m
    from memjax.systems.memory_r2 import prompts as r2
    from memjax.systems.sumer.tools import SUMER_TOOLS
    from memjax.systems.sumer.workflow import DEFAULT_SYSTEM

    assert _chat(tok, "", DEFAULT_SYSTEM, tools=SUMER_TOOLS) == rw.SUMER_PROMPT
    assert _chat(tok, r1.manager_prompt([], [])) == rw.R1_MANAGER_PROMPT
    assert _chat(tok, r1.answer_prompt("", "A", [], "B", [])) == rw.R1_ANSWER_PROMPT
    assert _chat(tok, r2m.qa_prompt("A", "B", [], [], "")) == rw.R2_QA_PROMPT
    assert (_chat(tok, "", r2.EXTRACTOR_SYSTEM), _chat(tok, "", r2.MANAGER_SYSTEM)) == (
        rw.R2_EXTRACTOR_SYSTEM, rw.R2_MANAGER_SYSTEM)


@pytest.mark.skipif(not LOCOMO.exists(), reason="the shared LoCoMo data is absent")
def test_locomo_lengths(tok):
    data = json.loads(LOCOMO.read_text())
    turns, sessions, questions = [], {}, []
    for c in data:
        conv = c["conversation"]
        keys = [k for k in conv if k.startswith("session_") and isinstance(conv[k], list)]
        sessions[c["sample_id"]] = len(keys)
        questions += [len(tok.encode(q["question"])) for q in c["qa"] if q.get("category") in (1, 2, 3, 4)]
        turns += [[len(tok.encode(f"{t['speaker']}: {t['text']}")) for t in conv[k]] for k in keys]
    assert round(statistics.mean(n for s in turns for n in s)) == rw.LOCOMO_TURN
    assert round(statistics.mean(sum(s) for s in turns)) == rw.LOCOMO_SESSION
    assert round(statistics.mean(questions)) == rw.LOCOMO_QUESTION
    assert {k: sessions[k] for k in rw.LOCOMO_SESSIONS} == rw.LOCOMO_SESSIONS
