"""Memory-R1 workflows end to end on a scripted engine (the model's replies are a function of the prompt text):
the two-dogs example (ADD then UPDATE) through construction, the manager's single-step tuple with the frozen answer
agent's EM reward, the answer agent; invalid manager output is no operation and counted (fuzzed)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memjax import Tokenizer
from memjax.agents import run_workflow
from memjax.systems.memory_r1.workflow import (AnswerWorkflow, ConstructionWorkflow, FrozenAnswerer, ManagerWorkflow,
                                     MemoryR1Config)
from memjax.systems.memory_r1.data import (QA, ManagerSample, MemoryIndex, TurnInput, answer_sample, manager_samples,
                                          turn_inputs)
from memjax.data.locomo import Conversation, Question, Session, Turn
from memjax.memory import HashedBowEmbedder, MemoryBank

from scripted_engine import ScriptedEngine, user_part


def model(text):
    """A scripted Memory-R1 model: extraction, the manager's ADD then UPDATE, an answer from the memories."""
    u = user_part(text)
    if "Personal Information Organizer" in text:
        if "named Buddy" in u:
            return '{"facts" : ["Adopted a dog named Buddy"]}'
        if "Scout" in u:
            return '{"facts" : ["Adopted another dog named Scout"]}'
        return '{"facts" : []}'
    if u.startswith("You are a smart memory manager"):
        if "Current memory is empty." in u:
            return '{"memory": [{"id": "0", "text": "Adopted a dog named Buddy", "event": "ADD"}]}'
        return ('{"memory": [{"id": "0", "text": "Adopted two dogs, Buddy and Scout", "event": "UPDATE", '
                '"old_memory": "Adopted a dog named Buddy"}]}')
    if u.startswith("You are an intelligent memory assistant"):
        mem = u.split("Memories for user Andrew:\n", 1)[1].split("Memories for user Audrey:")[0]
        ans = "Buddy and Scout" if "Buddy and Scout" in mem else ("Buddy" if "Buddy" in mem else "unknown")
        return f"Useful memories:\n{mem.strip()}\n**Answer:** {ans}"
    raise AssertionError(f"unexpected prompt: {u[:80]!r}")


def conversation():
    s1 = Session(1, "1:56 pm on 8 May, 2023", (Turn("Andrew", "D1:1", "I adopted a dog named Buddy last week!", 1),
                                               Turn("Audrey", "D1:2", "That's lovely, congrats!", 1)))
    s2 = Session(2, "9:00 am on 20 May, 2023", (Turn("Andrew", "D2:1", "Guess what, I adopted Scout too.", 2),))
    q = Question("conv-x", 0, "What are the names of Andrew's dogs?", 1, "Buddy and Scout", None, ("D1:1", "D2:1"))
    return Conversation("conv-x", "Andrew", "Audrey", (s1, s2), (q,))


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.default()


@pytest.fixture(scope="module")
def index():
    return MemoryIndex(HashedBowEmbedder(256))


def test_two_dogs_end_to_end(tok, index):
    conv = conversation()
    engine = ScriptedEngine(tok, model)
    res = run_workflow(engine, ConstructionWorkflow(tok, index), [(conv.sample_id, turn_inputs(conv))], record=False)
    tr = res.traces[0]
    assert tr["facts"] == [["Adopted a dog named Buddy"], [], ["Adopted another dog named Scout"]]
    assert [len(s.records) for s in tr["snapshots"]] == [1, 1, 1]
    first, last = (list(s.records.values())[0] for s in (tr["snapshots"][0], tr["snapshots"][2]))
    assert first.content == "Adopted a dog named Buddy" and first.dia_ids == ("D1:1",)
    assert last.id == first.id and last.content == "Adopted two dogs, Buddy and Scout"        # UPDATE, same id
    assert last.dia_ids == ("D1:1", "D2:1") and last.speaker == "Andrew" and last.session_time == "9:00 am on 20 May, 2023"
    assert res.stats["ops_ADD"] == 1 and res.stats["ops_UPDATE"] == 1 and res.stats["ops_bad_json"] == 0
    assert res.stats["extract_unparsed"] == 0 and res.batch is None
    # the manager prompt of turn D2:1 lists the Buddy memory under the small integer id "0"
    mgr = [p for p in engine.prompts if "smart memory manager" in p]
    assert len(mgr) == 2 and "[{'id': '0', 'text': 'Adopted a dog named Buddy'}]" in mgr[1]

    # Alg. 1's tuples: D1:1 and D2:1 are evidence of the question and have facts; D1:2 has no fact
    samples = manager_samples(conv, tr["facts"], tr["snapshots"], conv.questions, history_turns=50)
    assert [s.turn.dia_id for s in samples] == ["D1:1", "D2:1"]
    assert len(samples[0].bank.records) == 0 and len(samples[1].bank.records) == 1
    frozen = FrozenAnswerer(ScriptedEngine(tok, model), tok)
    wf = ManagerWorkflow(tok, index, frozen, MemoryR1Config())
    out = run_workflow(ScriptedEngine(tok, model), wf, samples, group_size=2, seed=3)
    # D1:1 alone: the bank holds Buddy only -> frozen agent answers "Buddy": EM 0; D2:1: UPDATE -> EM 1
    assert out.rewards == [0.0, 0.0, 1.0, 1.0]
    assert out.traces[2]["answers"] == ["Buddy and Scout"] and out.traces[2]["applied"] == {"UPDATE": 1}
    b = out.batch
    assert b.num_rows == 4 and b.role.tolist() == [0, 0, 0, 0] and b.reward.tolist() == [0.0, 0.0, 1.0, 1.0]
    assert all(len(s.bank.records) == n for s, n in zip(samples, (0, 1)))     # snapshots untouched by rollouts
    assert frozen.calls == 4

    # the answer agent on the final bank
    bank = tr["bank"]
    qa = QA(conv.questions[0].question, "Buddy and Scout", conv.questions[0].qid)
    a = answer_sample(bank, qa, ("Andrew", "Audrey"), index, 30)
    assert a.memories == ((("9:00 am on 20 May, 2023", "Adopted two dogs, Buddy and Scout"),), ())
    assert a.memory_dia_ids == ("D1:1", "D2:1")
    ans = run_workflow(ScriptedEngine(tok, model), AnswerWorkflow(tok, MemoryR1Config(temperature=0.0)), [a])
    assert ans.rewards == [1.0] and ans.traces[0]["answer"] == "Buddy and Scout" and ans.traces[0]["source"] == "marker"


def _sample():
    bank = MemoryBank(seed=1)
    bank.add("Adopted a dog named Buddy", speaker="Andrew", dia_ids=("D1:1",))
    bank.add("Likes hiking", speaker="Andrew", dia_ids=("D1:3",))
    bank.add("Works as a nurse", speaker="Audrey", dia_ids=("D1:2",))
    turn = TurnInput("conv-x", "Andrew", "I adopted Scout too", "D2:1", 2, "9:00 am on 20 May, 2023")
    return ManagerSample(turn, ("Adopted another dog named Scout",), bank.snapshot(),
                         (QA("Names of Andrew's dogs?", "Buddy and Scout"),), ("Andrew", "Audrey"))


_event = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.sampled_from(["0", "1", "2", "7", "-1", ""]), st.integers(-2, 5)),
    "text": st.one_of(st.text(max_size=12), st.none(), st.integers()),
    "event": st.sampled_from(["ADD", "UPDATE", "DELETE", "NONE", "NOOP", "add", "MERGE", ""]),
    "old_memory": st.text(max_size=5)})
_output = st.one_of(st.builds(lambda evs: json.dumps({"memory": evs}), st.lists(_event, max_size=5)),
                    st.builds(lambda evs, pre: pre + json.dumps({"memory": evs})[: len(pre) * 3],
                              st.lists(_event, max_size=3), st.text(max_size=10)),
                    st.text(max_size=40))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(out=_output)
def test_manager_output_fuzz_applies_or_counts(tok, index, out):
    """Any manager output: nothing raises; the bank changes only by the applied ADD/DELETE; every event of a parsed
    list is applied or counted once; an unparseable output is one bad_json and no change; only the speaker's
    memories (ids 0, 1 in the prompt) can be touched."""
    s = _sample()
    seen = []
    wf = ManagerWorkflow(tok, index, lambda items: seen.extend(items) or ["x"] * len(items))
    res = run_workflow(ScriptedEngine(tok, lambda text: out), wf, [s])
    st_ = res.traces[0]
    applied = st_["applied"]
    bank_after = seen[0]
    andrew = [m for m in bank_after.memories[0]]
    assert len(andrew) == 2 + applied.get("ADD", 0) - applied.get("DELETE", 0)
    assert [m[1] for m in bank_after.memories[1]] == ["Works as a nurse"]         # other speaker untouched
    stats = res.stats
    decoded = tok.decode(tok.encode(out))
    try:
        parsed = json.loads(decoded[decoded.index("{"):]) if "{" in decoded else None
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("memory"), list):
        n = sum(applied.values()) + stats["ops_bad_id"] + stats["ops_malformed"]
        assert n == len(parsed["memory"]) and stats["ops_bad_json"] == 0
    if "memory" not in decoded:
        assert stats["ops_bad_json"] == 1 and applied == {} and res.rewards == [0.0]
