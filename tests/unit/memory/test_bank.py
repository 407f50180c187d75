"""Memory bank records, both operation styles (incl. Memory-R1's Buddy/Scout UPDATE), snapshots, sizes, JSON."""

import json

import numpy as np
import pytest

from memjax.memory import (MemoryBank, MemoryRecord, apply_mem0, apply_r2, is_hex_id, mem0_view, parse_json_object,
                           r2_view)


def _bank():
    b = MemoryBank(seed=7)
    b.add("Andrew adopted a dog named Buddy", speaker="Andrew", session=1, session_time="1 May 2023",
          dia_ids=("D1:3",))
    b.add("Andrew likes hiking on weekends", speaker="Andrew", session=1, dia_ids=("D1:5",))
    return b


def test_buddy_scout_update_mem0():
    """Memory-R1's example: a second dog is an UPDATE that merges, not DELETE + ADD."""
    b = _bank()
    view, ids = mem0_view(list(b))
    assert view == [{"id": "0", "text": "Andrew adopted a dog named Buddy"},
                    {"id": "1", "text": "Andrew likes hiking on weekends"}] and ids == b.ids()
    out = ('Here is the plan.\n```json\n{"memory": [{"id": "0", "text": "Andrew adopted two dogs, Buddy and Scout",'
           ' "event": "UPDATE", "old_memory": "Andrew adopted a dog named Buddy"},'
           ' {"id": "1", "text": "Andrew likes hiking on weekends", "event": "NONE"}]}\n```')
    st = apply_mem0(b, out, ids, speaker="Andrew", session=2, session_time="9 May 2023", dia_ids=["D2:4"])
    assert st.applied == {"UPDATE": 1, "NONE": 1} and st.bad_id == 0
    assert b.ids() == ids                                   # same real id kept
    r = b.get(ids[0])
    assert r.content == "Andrew adopted two dogs, Buddy and Scout"
    assert r.dia_ids == ("D1:3", "D2:4") and r.session == 2 and r.session_time == "9 May 2023"
    assert len(b) == 2


def test_mem0_add_delete_and_rejects():
    b = _bank()
    ids = b.ids()
    out = {"memory": [{"id": "2", "text": "Andrew moved to Denver", "event": "ADD"},
                      {"id": "1", "text": "", "event": "DELETE"},
                      {"id": "7", "text": "x", "event": "UPDATE"},       # not a prompt id
                      {"id": ids[0], "text": "x", "event": "DELETE"},    # a real id is not a prompt id
                      {"id": "0", "event": "RENAME"}, "junk"]}
    st = apply_mem0(b, out, ids, speaker="Andrew", dia_ids=["D3:1"])
    assert st.applied == {"ADD": 1, "DELETE": 1} and st.bad_id == 2 and st.malformed == 2
    assert [r.content for r in b] == ["Andrew adopted a dog named Buddy", "Andrew moved to Denver"]
    new = b.get(b.ids()[1])
    assert is_hex_id(new.id) and new.dia_ids == ("D3:1",)
    assert apply_mem0(b, "no json here", ids).bad_json == 1


def test_r2_insert_merge_update_delete_and_bad_ids():
    b = MemoryBank(seed=1)
    st = apply_r2(b, '{"operations": [{"type": "INSERT", "speaker": "Ada", "content": "Ada has a dog", '
                     '"dia_id": "D1:1"}, {"type": "INSERT", "speaker": "Ada", "content": "Ada has a dog", '
                     '"dia_id": "D1:4"}, {"type": "INSERT", "speaker": "Ben", "content": "Ben paints", '
                     '"dia_id": "D1:2"}]}', session=1)
    assert st.applied == {"INSERT": 3} and st.merged == 1 and len(b) == 2
    ada, ben = b.ids()
    assert b.get(ada).dia_ids == ("D1:1", "D1:4")
    assert r2_view([b.get(ada)]) == [{"memory_id": ada, "speaker": "Ada", "content": "Ada has a dog",
                                      "session_time": None, "dia_ids": ["D1:1", "D1:4"]}]
    st = apply_r2(b, {"operations": [
        {"type": "UPDATE", "memory_id": ada, "content": "Ada has two dogs", "dia_id": "D2:1"},
        {"type": "DELETE", "memory_id": ben},
        {"type": "DELETE", "memory_id": "deadbeef"},                   # well-formed, unknown
        {"type": "UPDATE", "memory_id": "0", "content": "x"},          # not 8-hex
        {"type": "INSERT", "content": "no speaker"},
        {"type": "MERGE"}]})
    assert st.applied == {"UPDATE": 1, "DELETE": 1} and st.bad_id == 2 and st.malformed == 2
    assert [(r.content, r.dia_ids) for r in b] == [("Ada has two dogs", ("D1:1", "D1:4", "D2:1"))]
    assert b.dia_ids() == {"D1:1", "D1:4", "D2:1"}
    assert apply_r2(b, '{"operations": [').bad_json == 1 and len(b) == 1


def test_snapshot_restore_leaves_original_untouched():
    b = _bank()
    snap = b.snapshot()
    before = [r.to_json() for r in b]
    apply_r2(b, {"operations": [{"type": "DELETE", "memory_id": b.ids()[0]},
                                {"type": "INSERT", "speaker": "Andrew", "content": "new fact"}]})
    assert [r.to_json() for r in snap.records.values()] == before
    r1, r2 = MemoryBank.restore(snap), MemoryBank.restore(snap)
    assert [x.to_json() for x in r1] == before
    apply_r2(r1, {"operations": [{"type": "INSERT", "speaker": "Andrew", "content": "roll 1"}]})
    apply_r2(r2, {"operations": [{"type": "INSERT", "speaker": "Andrew", "content": "roll 2"}]})
    assert r1.ids()[-1] == r2.ids()[-1]                    # same id stream from the same snapshot
    assert [r.to_json() for r in snap.records.values()] == before and len(MemoryBank.restore(snap)) == 2
    with pytest.raises(TypeError):
        snap.records["x"] = None


def test_sizes_and_json_round_trip(tmp_path):
    b = _bank()
    b.replace(b.ids()[0], embedding=np.array([0.6, 0.8], dtype=np.float32))
    assert b.words() == 6 + 5
    assert b.tokens(lambda s: list(range(len(s)))) == sum(len(r.content) for r in b)
    p = tmp_path / "bank.json"
    b.save(p)
    c = MemoryBank.load(p)
    assert [r.to_json() for r in c] == [r.to_json() for r in b] and c.counter == b.counter
    assert c.get(c.ids()[0]).embedding.dtype == np.float32
    assert c.new_id() == b.new_id()
    p.write_text("{}")
    with pytest.raises(ValueError, match="bank.json: not a memory bank"):
        MemoryBank.load(p)
    with pytest.raises(ValueError, match="MemoryRecord.embedding"):
        MemoryRecord(id="a", content="x", embedding=np.zeros((2, 2)))
    assert json.loads(json.dumps(b.to_json()))["records"][1]["embedding"] is None


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8) |
                     st.sampled_from(["INSERT", "UPDATE", "DELETE", "ADD", "NONE", "0", "1", "deadbeef"]),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(
                         st.sampled_from(["type", "event", "id", "memory_id", "content", "text", "speaker", "dia_id",
                                          "operations", "memory"]), c, max_size=5), max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(_json, st.text(max_size=40))
def test_operations_never_raise_and_account_for_everything(obj, text):
    b = _bank()
    ids = b.ids()
    for out in (obj, text, {"operations": obj}, {"memory": obj}, json.dumps({"operations": obj})):
        parsed = parse_json_object(out)
        for key, apply in (("operations", lambda o: apply_r2(b, o)), ("memory", lambda o: apply_mem0(b, o, ids))):
            s = apply(out)
            ops = parsed.get(key) if parsed is not None else None
            if isinstance(ops, list):       # every operation applied or rejected exactly once
                assert s.bad_json == 0 and sum(s.applied.values()) + s.bad_id + s.malformed == len(ops)
            else:
                assert s.bad_json == 1 and not s.applied and s.bad_id == s.malformed == 0
    assert all(is_hex_id(r.id) for r in b) and len(set(b.ids())) == len(b)
