"""The tiny task's full-context baseline (memjax/systems/memagent/tiny/full_context.py): prompt layout and length, supervised
arrays, the model size (the MemAgent model's parameters; only the recorded positions differ), a short
training run end to end, and the shipped baseline's recorded training."""

from __future__ import annotations

import json

import pytest

from memjax.model import count_params
from memjax.systems.memagent.tiny import full_context as fc
from memjax.systems.memagent.tiny.task import (
    WORDS,
    TaskConfig,
    TinyTokenizer,
    make_sample,
    make_split,
)
from memjax.tiny.model import model_config


@pytest.mark.parametrize("num_chunks,facts", [(2, 1), (3, 3), (24, 3), (96, 3)])
def test_prompt_is_the_whole_document_and_its_length_is_fixed(num_chunks, facts):
    tok, task = TinyTokenizer(WORDS), TaskConfig(num_chunks=num_chunks, facts_per_chunk=facts, multihop_frac=0.5)
    for i in range(4):
        s = make_sample(task, 5, i)
        ids = fc.prompt_ids(tok, s)
        assert len(ids) == fc.prompt_tokens(task) and fc.window(task) == len(ids) + task.max_final_tokens
        assert tok.decode(ids) == f"<user> question {s['query']} chunk {s['context']} answer <end> <assistant>"
    assert fc.window(TaskConfig()) == 50 > model_config().max_position_embeddings  # MemAgent's 48 do not fit


def test_sft_arrays_train_only_the_boxed_answer():
    tok, task = TinyTokenizer(WORDS), TaskConfig()
    samples = make_split(task, 1, 5)
    ids, mask = fc.sft_arrays(tok, samples)
    assert ids.shape == mask.shape == (5, fc.window(task))
    for row, m, s in zip(ids, mask, samples):
        assert tok.decode(row[m > 0]) == f"{s['final']} <end>"
        assert tok.decode(row[m == 0]).startswith("<user> question " + s["query"])


@pytest.mark.e2e  # a training run and its evaluation through the loop: the whole suite, not the quick tier
def test_short_training_run_and_evaluation(tmp_path):
    task = TaskConfig()
    model, info = fc.train(task, fc.FullContextConfig(steps=2, eval_every=0, dev_size=8), seed=3,
                           max_positions=300, log=lambda m: None)
    assert model.cfg.max_position_embeddings == 300
    assert count_params(model.cfg) == count_params(model_config()) == 600_192
    assert info["steps"] == 2 and len(info["history"]) == 1 and 0.0 <= info["dev_accuracy"] <= 1.0
    ev = fc.evaluate(model, TaskConfig(num_chunks=6), make_split(TaskConfig(num_chunks=6, multihop_frac=0.5), 2, 8))
    assert set(ev) == {"accuracy", "accuracy_hop1", "accuracy_hop2"} and all(0 <= v <= 1 for v in ev.values())
    with pytest.raises(ValueError, match="max_positions"):
        fc.train(task, fc.FullContextConfig(steps=1), max_positions=20)


def test_shipped_baseline_matches_its_record():
    """The shipped files: trained with the defaults at 3 chunks, positions for a 96-chunk prompt."""
    path = fc.default_path()
    info = json.loads((path / fc.INFO).read_text())
    cfg = json.loads((path / "config.json").read_text())
    assert info["steps"] == fc.FullContextConfig().steps and info["task"] == {
        "num_chunks": 3, "facts_per_chunk": 3, "multihop_frac": 0.3}
    assert cfg["max_position_embeddings"] == fc.DEFAULT_POSITIONS == fc.window(TaskConfig(num_chunks=96))
    assert info["history"][-1]["dev_accuracy"] == info["dev_accuracy"]
