"""The shipped Memory-R2 configs train and score with Memory-R2's official code by default (issue 49, item 1).

The golden corpora hold inputs and the outputs of the official functions (ahmedehabb/Memory-R2 @357b4ec, run outside
the repository): rema.py compute_f1 / compute_bleu, parse_response.py extract_answer_from_text,
score_locomo_qa_dumps.py extract_label and data_preprocess.py parse_dia_id. Here they go through the objects the
shipped configs build (the workflow's reward F1, the evaluation's BLEU-1, the answer agent's parser, the judge
profile, the evidence reading, the group-of-one advantage), so a default that drifts back to one of memjax's
readings fails here; each of memjax's readings stays a named option the corpus tells apart.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from memjax.core.config import load_config_file
from memjax.core.tokenizer import _default as shipped_tokenizer
from memjax.data.locomo import LoadReport, Question, parse_evidence
from memjax.evaluation.profiles import get_profile
from memjax.memory import HashedBowEmbedder
from memjax.rewards.judge_profiles import get_judge_profile
from memjax.rl.batch import Conversation, build_batch
from memjax.systems import MemoryR2Section
from memjax.systems.memory_r2.evidence import questions_as_read
from memjax.systems.memory_r2.messages import answer_parser
from memjax.systems.memory_r2.system import MemoryR2System
from memjax.systems.memory_r2.workflow import MemoryR2

ROOT = Path(__file__).resolve().parents[4]
FIX = ROOT / "tests" / "fixtures"
SHIPPED = ("train.py", "smoke.py")  # configs/memory_r2: the recipe and its CPU smoke run (tiny.py is memjax's task)
OFFICIAL = dict(reward_f1="memory_r2", answer_parser="official", judge_profile="memory_r2", evidence="official",
                adv_singleton="reward", prompt_revision="85aeeb1", local_questions="last_evidence",
                dialogue_captions=False)


def _load(name):
    return json.loads((FIX / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def shipped():
    return {n: load_config_file(ROOT / "configs" / "memory_r2" / n) for n in SHIPPED}


def test_every_choice_is_the_official_one(shipped):
    for where, sec in [("MemoryR2Section()", MemoryR2Section())] + [(n, c.agent) for n, c in shipped.items()]:
        got = {k: getattr(sec, k) for k in OFFICIAL}
        assert got == OFFICIAL, f"{where}: {got}"
    for n, c in shipped.items():  # core_algos.py compute_policy_loss: mean log-ratio clamped at 3 from above only
        assert (c.loss.log_ratio_clamp, c.loss.log_ratio_clamp_mode, c.loss.level) == (3.0, "upper", "step"), n


def test_shipped_reward_f1_and_bleu_equal_the_official_rema(shipped):
    meta_cases = _load("metric_goldens_memory_r2.json")
    assert meta_cases["meta"]["commit"] == "357b4ec"
    sec = shipped["train.py"].agent
    wf = MemoryR2(shipped_tokenizer(), sec.episode(), HashedBowEmbedder(), None)   # the training workflow's F1
    bleu = get_profile(sec.reward_f1, "answer").bleu1                               # the evaluation's BLEU-1
    bad = [(c["pred"], c["gold"], k) for c in meta_cases["cases"]
           for k, fn in (("f1", wf._f1_fn), ("bleu1", bleu)) if abs(fn(c["pred"], c["gold"]) - c[k]) > 1e-12]
    assert not bad, f"{len(bad)} of {2 * len(meta_cases['cases'])} differ, first: {bad[:3]}"
    memjax_f1 = get_profile("memjax", "answer").f1   # memjax's reading, a named option, differs on the corpus
    assert sum(abs(memjax_f1(c["pred"], c["gold"]) - c["f1"]) > 1e-12 for c in meta_cases["cases"]) > 100


def test_shipped_answer_parser_and_judge_equal_the_official(shipped):
    sec = shipped["train.py"].agent
    parse = answer_parser(sec.answer_parser)
    cases = _load("answer_parser_goldens_memory_r2.json")["cases"]
    assert not [(x, y) for x, y in cases if (parse(x) or "") != y]
    assert sum((answer_parser("last_tag")(x) or "") != y for x, y in cases) > 50
    label = get_judge_profile(sec.judge_profile).parse
    jcases = _load("judge_label_goldens.json")["cases"]
    assert not [c["reply"] for c in jcases if str(label(c["reply"])[0]) != str(c["memory_r2"])]


def test_shipped_evidence_reading_equals_the_official_parse_dia_id(shipped):
    doc = _load("evidence_goldens_memory_r2.json")
    assert doc["source"]["commit"] == "357b4ec" and len(doc["cases"]) >= 500
    qs = [Question("conv-x", i, "q", 1, "a", None, evidence=(), evidence_raw=tuple(raw))
          for i, (raw, _) in enumerate(doc["cases"])]
    read = {q.index: q.evidence for q in questions_as_read(qs, shipped["train.py"].agent.evidence)}
    want = {i: tuple(f"D{s}:{t}" for s, t in pairs) for i, (_, pairs) in enumerate(doc["cases"]) if pairs}
    assert read == want   # a question whose evidence reads as nothing is skipped, as the official code skips it
    # memjax's repair (the loader's evidence; a named option) reads LoCoMo's malformed strings otherwise
    rep = LoadReport()
    assert parse_evidence("D8:6; D9:17", rep, "x") == ["D8:6", "D9:17"] and read[0] == ("D8:6",)
    assert parse_evidence("D:11:26", rep, "x") == ["D11:26"] and 2 not in read
    assert questions_as_read(qs[:3], "repaired") == qs[:3]
    with pytest.raises(ValueError, match="evidence"):
        MemoryR2Section(evidence="first")


def test_shipped_group_of_one_gets_the_official_advantage(shipped):
    # core_algos.py compute_grpo_outcome_advantage: a group of one has mean 0, std 1 -> A = r / (1 + 1e-6)
    def row(sample, unit, reward, group):
        return Conversation([1, 2], [4, 4], [-0.5, -0.5], sample=sample, group=group, turn=0, role=0,
                            extra={"unit": unit, "unit_reward": reward, "local_group": -1})
    b = build_batch([row(0, 0, 1.0, 0), row(1, 0, 3.0, 0), row(0, 1, 0.6, 1)], [0.0, 0.0], [0, 0])
    sec = shipped["train.py"].agent
    adv = MemoryR2System(sec).advantages(b, None).row_advantage
    np.testing.assert_allclose(adv, [-1 / (np.sqrt(2) + 1e-6), 1 / (np.sqrt(2) + 1e-6), 0.6 / (1 + 1e-6)], rtol=1e-6)
    zero = MemoryR2System(MemoryR2Section(adv_singleton="zero")).advantages(b, None).row_advantage
    assert zero[2] == 0.0   # memjax's earlier rule, a named option
