"""The memory_r2_tiny system on the one training loop: configs/memory_r2/tiny.py runs one LoGo-GRPO step through
memjax.train (step-level loss, LoGo credit); the expected rollout calls per episode of the LoGo config and of
the plain-GRPO variant are equal (also for 8 sessions of one fact); the section validates its fields;
`credit = "outcome"` gives every session of a rollout its trajectory's advantage; a warm start trained on
other session / fact counts is refused. The model is a random init saved like a
warm start (the pipeline, not learning, is under test here)."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from scripted_engine import ScriptedEngine

from memjax.agents import run_workflow
from memjax.checkpoint import save_hf
from memjax.cli.train import train
from memjax.core.config import load_config_file
from memjax.model import init_model
from memjax.systems import MemoryR2TinySection, names
from memjax.systems.memory_r2.tiny.agent import TinyR2Workflow
from memjax.systems.memory_r2.tiny.system import MemoryR2TinySystem
from memjax.systems.memory_r2.tiny.task import (
    R2TaskConfig,
    make_r2_sample,
    r2_tokenizer,
)
from memjax.systems.memory_r2.tiny.warmstart import load_r2_warmstart
from memjax.tiny.model import model_config

CONFIG = Path(__file__).resolve().parents[5] / "configs" / "memory_r2" / "tiny.py"


@pytest.fixture(scope="module")
def random_warmstart(tmp_path_factory):
    path = tmp_path_factory.mktemp("r2ws")
    save_hf(init_model(model_config(), 0), path)
    return str(path)


def _cfg(tmp_path, warm, **agent):
    cfg = load_config_file(CONFIG)
    a = dataclasses.replace(cfg.agent, warmstart=warm, heldout_size=4, **agent)
    return dataclasses.replace(cfg, agent=a, steps=1, prompts_per_step=1, checkpoint_every=1, out_dir=str(tmp_path))


def test_section_and_budget():
    assert "memory_r2_tiny" in names()
    cfg = load_config_file(CONFIG)
    assert cfg.agent.name == "memory_r2_tiny" and cfg.loss.level == "step" and cfg.agent.logo
    plain = dataclasses.replace(cfg.agent, logo=False, group_size=12)
    assert cfg.agent.rollout_calls_per_episode() == plain.rollout_calls_per_episode() == 36
    with pytest.raises(ValueError, match="group_size"):
        MemoryR2TinySection(group_size=0)
    with pytest.raises(ValueError, match="adv_singleton"):
        MemoryR2TinySection(adv_singleton="one")
    with pytest.raises(ValueError, match="credit"):
        MemoryR2TinySection(credit="trajectory")
    many = R2TaskConfig(facts_per_session=1, sessions=8)
    logo8 = dataclasses.replace(cfg.agent, task=many)
    assert logo8.rollout_calls_per_episode() == dataclasses.replace(plain, task=many, credit="outcome") \
        .rollout_calls_per_episode() == 96
    assert cfg.agent.adv_singleton == "reward"  # the recipe uses the official code's group-of-one rule
    assert cfg.loss.log_ratio_clamp_mode == "upper"  # and its one-sided log-ratio clamp


@pytest.mark.e2e  # memjax.train end to end: the whole suite, not the quick tier
def test_one_logo_step_through_memjax_train(tmp_path, random_warmstart):
    res = train(_cfg(tmp_path, random_warmstart))
    h = res["history"][0]
    assert h["conversations"] == 36  # rollout calls: 8 x 3 global + 3 x 4 local (plain GRPO: 12 x 3, test_r2_task)
    assert h["rollout_local_branches"] == 12
    assert np.isfinite(h["grad_norm"]) and "f1" in res["before"] and "f1" in res["after"]
    assert (tmp_path / "result.json").is_file()


def test_outcome_credit_and_warm_start_shape(tmp_path, random_warmstart):
    task = R2TaskConfig(facts_per_session=1, sessions=8)
    ops = iter(["add", "skip", "update"] * 1000)
    tok = r2_tokenizer()
    wf = TinyR2Workflow(tok, task, group_size=4, local=False)
    b = run_workflow(ScriptedEngine(tok, lambda _: next(ops)), wf, [make_r2_sample(task, 1, 0)], group_size=4).batch
    assert len(set(b.reward)) > 1
    for credit in ("session", "outcome"):
        sec = MemoryR2TinySection(task=task, credit=credit, logo=False, heldout_size=1)
        adv = MemoryR2TinySystem(sec).advantages(b, None).row_advantage
        per_rollout = [len(set(np.round(adv[b.sample == i], 6))) for i in range(4)]
        assert (max(per_rollout) == 1) == (credit == "outcome")  # outcome: one advantage per rollout
    # a warm start records its task; another shape is refused, the same shape loads
    (Path(random_warmstart) / "r2_warmstart.json").write_text('{"task": {"sessions": 3, "facts_per_session": 2}}')
    load_r2_warmstart(random_warmstart, R2TaskConfig(), log=lambda *_: None)
    with pytest.raises(ValueError, match="sessions=3"):
        load_r2_warmstart(random_warmstart, task, log=lambda *_: None)
