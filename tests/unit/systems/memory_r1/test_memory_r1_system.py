"""memory_r1_manager / memory_r1_answer Systems on the LoCoMo fixture with a scripted frozen engine and a scripted
policy engine: registry, setup (construction passes, Alg. 1 / Alg. 2 samples), the resumable stream, the
workflows through run_workflow, evaluate; frozen_copy never aliases the policy."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scripted_engine import ScriptedEngine, user_part

from memjax import Tokenizer
from memjax.agents import run_workflow
from memjax.data.locomo import load_locomo
from memjax.engine import EngineConfig
from memjax.model import init_model, presets
from memjax.systems import build, get, names
from memjax.systems.memory_r1.system import (
    MemoryR1AnswerSection,
    MemoryR1ManagerSection,
    frozen_copy,
)

FIXTURE = Path(__file__).parents[3] / "fixtures" / "data" / "locomo_fixture.json"


def model(text):
    """Extraction: one fact per turn (its first six words); manager: ADD every fact; answer: the first word of the
    best memory of speaker A."""
    u = user_part(text)
    if "Personal Information Organizer" in text:
        line = u.split("Input:\n", 1)[1].split("<|im_end|>")[0]
        words = line.split(": ", 1)[1].replace('"', "").split()[:6]
        return '{"facts": ["%s"]}' % " ".join(words) if words else '{"facts": []}'
    if u.startswith("You are a smart memory manager"):
        facts = eval(u.split("```\n    [", 2)[-1].split("]\n    ```")[0].join("[]"))  # Mem0 renders repr()
        return '{"memory": [%s]}' % ", ".join('{"id": "9", "text": "%s", "event": "ADD"}' % f for f in facts)
    if u.startswith("You are an intelligent memory assistant"):
        mem = u.split("Memories for user ", 1)[1].split("\n")[1]
        return "**Answer:** " + (mem.split(": ", 1)[-1].split()[0] if mem.startswith("- ") else "none")
    raise AssertionError(u[:60])


class Scripted:
    def make_frozen_engine(self, frozen_model):
        return ScriptedEngine(self._tok, model)


def _system(section, **kw):
    cls = get(section().name)
    sub = type("T" + cls.__name__, (Scripted, cls), {})
    s = sub(section(data_path=str(FIXTURE), embedder="hashbow", **kw), seed=1)
    s._tok = Tokenizer.default()
    return s


@pytest.fixture(scope="module")
def tiny():
    return init_model(presets.get("tiny", vocab_size=32, hidden_size=16, intermediate_size=32, num_layers=1,
                                  num_heads=2, num_kv_heads=1), 0)


def test_registry_and_sections():
    assert {"memory_r1_manager", "memory_r1_answer"} <= set(names())
    assert MemoryR1ManagerSection().temperature == 1.0 and MemoryR1ManagerSection().group_size == 1
    with pytest.raises(ValueError, match="embedder"):
        MemoryR1AnswerSection(embedder="bert")
    with pytest.raises(ValueError, match="history_turns"):
        MemoryR1ManagerSection(history_turns=0)
    with pytest.raises(FileNotFoundError, match="agent.data_path"):
        build(MemoryR1ManagerSection()).setup(None, None)


def test_frozen_copy_never_aliases(tiny):
    c = frozen_copy(tiny)
    a, b = nnx.state(tiny, nnx.Param), nnx.state(c, nnx.Param)
    la, lb = jax_leaves(a), jax_leaves(b)
    assert len(la) == len(lb) > 0
    assert all(np.array_equal(x, y) and x.unsafe_buffer_pointer() != y.unsafe_buffer_pointer() for x, y in zip(la, lb))
    nnx.update(c, jax.tree.map(jnp.zeros_like, nnx.state(c, nnx.Param)))   # changing the copy leaves the policy
    assert all(np.array_equal(x, y) for x, y in zip(la, jax_leaves(nnx.state(tiny, nnx.Param))))
    assert not any(np.asarray(x).any() for x in jax_leaves(nnx.state(c, nnx.Param)))


def jax_leaves(state):
    return jax.tree.leaves(state)


def test_manager_system(tiny):
    s = _system(MemoryR1ManagerSection, history_turns=50)
    cfg = s.engine_config(EngineConfig(window=1024, page_size=16))
    assert cfg.window >= 4096 + 2048 and cfg.window % 16 == 0
    s.setup(tiny, s._tok)
    assert s.construction_stats["ops_ADD"] > 0 and s.construction_stats["extract_unparsed"] == 0
    # conv-26 (train): tuples only for turns that are evidence of a category 1-4 question
    conv = load_locomo(FIXTURE).conversation("conv-26")
    order = [t.dia_id for t in conv.turns]
    linked = {d for q in conv.questions if q.category != 5 for d in q.evidence}
    turns = [x.turn.dia_id for x in s.train_samples]
    assert turns == [d for d in order if d in linked]          # every turn has a fact in this script
    for x in s.train_samples:
        assert x.questions and all(x.turn.dia_id in q.evidence and q.category != 5 for q in x.questions)
        before = set(order[: order.index(x.turn.dia_id)])
        assert all(set(r.dia_ids) <= before for r in x.bank.records.values())
        assert len(x.bank.records) == len(before)               # one ADD per earlier turn
    assert [x.turn.dia_id for x in s.eval_samples] == ["D1:1", "D1:2"]          # conv-30 (validation)
    stream = s.train_data(4, seed=3)
    first = [next(stream) for _ in range(2)]
    state = stream.get_state()
    again = s.train_data(4, seed=3)
    again.set_state({"pos": 4})
    assert [x.turn.dia_id for x in next(again)] == [x.turn.dia_id for x in first[1]] and state == {"pos": 8}
    res = run_workflow(ScriptedEngine(s._tok, model), s.workflow(None, s._tok), first[0], group_size=2)
    assert res.batch.num_samples == 8 and all(0.0 <= r <= 1.0 for r in res.rewards)
    assert res.stats["ops_ADD"] == 8
    ev = s.evaluate(ScriptedEngine(s._tok, model), s._tok)
    assert ev["samples"] == 2 and 0.0 <= ev["em"] <= 1.0 and ev["ops_ADD"] == 2


def test_answer_system(tiny):
    s = _system(MemoryR1AnswerSection, distill=False)
    s.setup(tiny, s._tok)
    assert len(s.train_samples) == 8 and len(s.eval_samples) == 2     # conv-26 / conv-30 questions, no category 5
    assert all(len(x.memories[0]) <= 30 and len(x.memories[1]) <= 30 for x in s.train_samples)
    assert any(x.memories[0] for x in s.train_samples)
    wf = s.workflow(None, s._tok)
    res = run_workflow(ScriptedEngine(s._tok, model), wf, s.train_samples[:3], group_size=2)
    assert res.batch.num_samples == 6 and res.stats["answer_unmarked"] == 0
    ev = s.evaluate(ScriptedEngine(s._tok, model), s._tok)
    assert set(ev) >= {"em", "f1", "samples", "answer_unmarked"} and ev["samples"] == 2


def test_configs_load():
    """The two Memory-R1 configs and the tiny one are TrainConfigs whose sections validate; PPO by default
    (GAE, actor lr 1e-6, critic lr 1e-5, batch 128), GRPO by --set."""
    from memjax.core.config import apply_overrides, load_config_file

    root = Path(__file__).parents[4] / "configs"
    for name, section, file in (("memory_r1_manager", MemoryR1ManagerSection, "train_manager.py"),
                                ("memory_r1_answer", MemoryR1AnswerSection, "train_answer.py")):
        cfg = load_config_file(root / "memory_r1" / file)
        assert isinstance(cfg.agent, section) and cfg.agent.name == name
        assert cfg.advantage.estimator == "gae" and cfg.optim.lr == 1e-6 and cfg.critic.lr == 1e-5
        assert cfg.critic.clip_value > 0 and cfg.prompts_per_step == 128 and cfg.agent.temperature == 1.0
        assert cfg.agent.max_prompt_tokens == 4096 and cfg.agent.max_response_tokens == 2048
        assert cfg.agent.split == "memory_r1"
        g = apply_overrides(cfg, ["advantage.estimator=grpo", "agent.group_size=8"])
        assert g.advantage.estimator == "grpo" and g.agent.group_size == 8
    tiny = load_config_file(root / "memory_r1" / "tiny.py")
    assert tiny.agent.name == "memory_r1_tiny"
