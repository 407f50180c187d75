"""LoCoMo evaluation of Memory-R1: banks built by construction (cached, reused on resume), answers from the top
memories per speaker, the distillation switch, and `python -m memjax.evaluate configs/memory_r1/eval.py` end to
end with a tiny random model (plumbing only: its answers are noise)."""

import json
from pathlib import Path

import jax
import pytest

from memjax import Tokenizer
from memjax.systems.memory_r1.workflow import MemoryR1Config
from memjax.systems.memory_r1.data import MemoryIndex
from memjax.data.locomo import load_locomo
from memjax.data.locomo_splits import split_questions
from memjax.evaluation.locomo import evaluate_locomo
from memjax.systems.memory_r1.locomo_eval import answer_predictor, build_banks
from memjax.memory import HashedBowEmbedder
from memjax.rewards.locomo import RuleBasedJudge

from scripted_engine import ScriptedEngine, engine_replaced, user_part

FIXTURE = Path(__file__).parents[3] / "fixtures" / "data" / "locomo_fixture.json"


def model(text):
    """Extraction: the turn itself as one fact; manager: ADD; answer: the first two words of A's best memory,
    marked only when the prompt asks for distillation."""
    u = user_part(text)
    if "Personal Information Organizer" in text:
        line = u.split("Input:\n", 1)[1].split("<|im_end|>")[0].split(": ", 1)[1].replace('"', "")
        return json.dumps({"facts": [line]})
    if u.startswith("You are a smart memory manager"):
        facts = eval(u.split("```\n    [", 2)[-1].split("]\n    ```")[0].join("[]"))
        return json.dumps({"memory": [{"id": "5", "text": f, "event": "ADD"} for f in facts]})
    best = u.split("Memories for user ", 1)[1].split("\n")[1]
    ans = " ".join(best.split(": ", 1)[-1].split()[:2])
    return f"- {best}\n**Answer:** {ans}" if "Select memories" in u else ans


def test_banks_cached_and_answers(tmp_path):
    tok, index = Tokenizer.default(), MemoryIndex(HashedBowEmbedder(256))
    data = load_locomo(FIXTURE)
    qs = split_questions(data, "memory_r1")["validation"]                 # conv-30: 3 turns, 2 questions
    convs = [data.conversation("conv-30")]
    eng = ScriptedEngine(tok, model)
    banks = build_banks(eng, tok, index, convs, MemoryR1Config(), tmp_path / "banks")
    assert len(banks["conv-30"]) == 3 and (tmp_path / "banks" / "conv-30.json").is_file()
    n_prompts = len(eng.prompts)
    again = build_banks(eng, tok, index, convs, MemoryR1Config(), tmp_path / "banks")
    assert len(eng.prompts) == n_prompts                                   # loaded, not rebuilt
    assert [r.content for r in again["conv-30"]] == [r.content for r in banks["conv-30"]]
    for distill in (True, False):
        pred = answer_predictor(eng, tok, index, again, convs, MemoryR1Config(distill=distill))
        outs = pred(qs)
        assert len(outs) == 2 and all(o["memory_dia_ids"] == ["D1:1", "D1:2", "D1:3"] for o in outs)
        prompt = [p for p in eng.prompts if "intelligent memory assistant" in p][-1]
        assert ("Select memories" in prompt) == distill
        assert all(o["answer"] and "**" not in o["answer"] for o in outs)
    res = evaluate_locomo(qs, None, RuleBasedJudge(), tmp_path / "ev", batch_predictor=pred, batch_size=2, chart=False)
    assert res["table"]["overall"]["n"] == 2 and res["table"]["overall"]["M-Fail"] is not None


def _run_cli(tmp_path, extra=()):
    from memjax.cli.evaluate import main as evaluate_main

    cfg = str(Path(__file__).parents[4] / "configs" / "memory_r1" / "eval.py")
    out = tmp_path / "ev"
    sets = [f"data_path={FIXTURE}", "part=validation", f"out_dir={out}", "embedder=hashbow", "distill=false",
            "max_prompt_tokens=1400", "engine.window=1536",
            "engine.max_slots=4", "engine.prefill_slots=2", "engine.prefill_chunk=512", "engine.page_size=64",
            "engine.kv.kv_cache_bytes=33554432", *extra]
    assert evaluate_main([cfg, *[a for s in sets for a in ("--set", s)]]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["table"]["overall"]["n"] == 2 and "no distillation" in res["title"]
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert [x["qid"] for x in lines] == ["conv-30#0", "conv-30#1"] and all("error" not in x for x in lines)
    assert (out / "banks" / "conv-30.json").is_file()
    return out


def test_memjax_evaluate_memory_r1_config(tmp_path):
    """The CLI path (config -> models -> construction -> answers -> table) with the engine scripted."""
    tok = Tokenizer.default()
    with engine_replaced(lambda m, c: ScriptedEngine(tok, model)):
        out = _run_cli(tmp_path)
    bank = json.loads((out / "banks" / "conv-30.json").read_text())
    assert len(bank["records"]) == 3
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert all(x["prediction"] and x["memory_dia_ids"] == ["D1:1", "D1:2", "D1:3"] for x in lines)


@pytest.mark.skipif(jax.default_backend() == "cpu", reason="a real (tiny random) model on the engine compiles "
                    "several prompt shapes: ~50 s on a CPU; runs where a GPU is present")
def test_memjax_evaluate_memory_r1_real_engine(tmp_path):
    _run_cli(tmp_path, ("max_extract_tokens=4", "max_response_tokens=4"))
