"""Memory-R2 prompts (byte-exact against the texts extracted from the public code, tests/fixtures/memory_r2/), message
building on a fixture conversation (golden strings written out by hand), fact / answer parsing (fuzzed),
candidate selection (hand-computed)."""

import json
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.data.locomo import Turn
from memjax.memory import MemoryRecord
from memjax.systems.memory_r2 import prompts as P
from memjax.systems.memory_r2.messages import (
    Fact,
    VectorCache,
    extractor_message,
    manager_message,
    manager_payload,
    parse_answer,
    parse_facts,
    qa_prompt,
    select_candidates,
)

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "memory_r2"


def _system_prompts(rev):
    """The official file's two system prompts at `rev`, as scripts/gen_memory_r2_prompt_fixture.py extracted them
    (with the file's SHA-256 and length: the fixture holds no official code)."""
    d = json.loads((FIX / "system_prompts.json").read_text(encoding="utf-8"))
    assert d["repository"] == "ahmedehabb/Memory-R2" and d["path"] == "prompt/math/multi_turn_mamrp.py"
    return d["revisions"][rev]


def test_prompts_byte_exact_against_source_files():
    s = _system_prompts("f6d3e04")
    # the source file and the two template files as read at the cited commits
    assert (s["chars"], s["sha256"][:12]) == (11059, "a302949f9935")
    assert len((FIX / "memory_v2.txt").read_text(encoding="utf-8")) == 376
    assert len((FIX / "qa.txt").read_text(encoding="utf-8")) == 2566
    assert P.EXTRACTOR_SYSTEM == s["MEMORY_REASONER_PROMPT"]
    assert P.MANAGER_SYSTEM == s["MEMORY_EXECUTOR_PROMPT"]
    assert P.MANAGER_TEMPLATE == (FIX / "memory_v2.txt").read_text(encoding="utf-8")
    assert P.QA_TEMPLATE == (FIX / "qa.txt").read_text(encoding="utf-8")
    # first lines as SPECS.md section 3 quotes them
    assert P.EXTRACTOR_SYSTEM.startswith("You are a Personal Information Organizer")
    assert P.MANAGER_SYSTEM.startswith("You are a smart memory manager which controls the memory of a system.\n"
                                       "You can perform four operations: (1) insert into the memory")
    assert P.MANAGER_TEMPLATE.count("{new_facts}") == 1 and "{existing_memory}" not in P.MANAGER_TEMPLATE
    assert P.EXTRACTOR_PREFIX.endswith("do NOT treat them as new events.\n")
    assert P.MANAGER_PREFIX.endswith("Based on the extracted facts below, perform the required memory operations.\n")


TURNS = [Turn("Caroline", "D1:1", "Hey Mel! I went to a LGBTQ support group yesterday.", 1),
         Turn("Melanie", "D1:2", "Look at this", 1, image_caption="a photo of a dog")]


def test_extractor_message_golden():
    want = ("Analyze ONLY the following new dialogue turns and extract new stable facts.\n"
            "The turns are speaker-tagged and already formatted.\n"
            "New turns:\n"
            "```\n"
            "[{'speaker': 'Caroline', 'text': 'Hey Mel! I went to a LGBTQ support group yesterday.', "
            "'dia_id': 'D1:1'}, {'speaker': 'Melanie', 'text': 'Look at this [Sent an image showing a photo of "
            "a dog]', 'dia_id': 'D1:2'}]\n"
            "```")
    assert extractor_message(TURNS, first=True) == want
    later = extractor_message(TURNS, first=False)
    assert later == ("Previous session turns (user and assistant) are provided for context only. You can refer to "
                     "them for disambiguation or clarity, but do NOT treat them as new events.\n" + want)
    assert extractor_message([], first=True).endswith("New turns:\n```\n[]\n```")


def test_manager_message_golden():
    rec = MemoryRecord(id="a32b32c1", content="Goes to a support group", speaker="Caroline",
                       session_time="1:56 pm on 8 May, 2023", dia_ids=("D1:1",))
    facts = [Fact("Caroline", "D1:3", "Went to a support group yesterday")]
    payload = manager_payload(facts, [["a32b32c1"]], [rec])
    want_json = """{
  "memories": [
    {
      "memory_id": "a32b32c1",
      "speaker": "Caroline",
      "content": "Goes to a support group",
      "session_time": "1:56 pm on 8 May, 2023",
      "dia_ids": [
        "D1:1"
      ]
    }
  ],
  "facts": [
    {
      "speaker": "Caroline",
      "dia_id": "D1:3",
      "fact": "Went to a support group yesterday",
      "related_memory_ids": [
        "a32b32c1"
      ]
    }
  ]
}"""
    first = manager_message(payload, first=True)
    assert first == ("New retrieved facts and related existing memories:\n```\n" + want_json + "\n```\n\n"
                     "The JSON contains two sections:\n- \"memories\": existing memory entries (each appears exactly "
                     "once, look up by memory_id)\n- \"facts\": new facts to process, each with \"related_memory_ids\" "
                     "pointing into \"memories\"\n\nFor each fact, look up its related_memory_ids in \"memories\" to "
                     "find UPDATE/DELETE candidates.\n")
    assert manager_message(payload, first=False) == P.MANAGER_PREFIX + first


def test_qa_prompt_fills_every_placeholder():
    m = [MemoryRecord(id="00000001", content="Likes dogs", speaker="A", session_time="t1"),
         MemoryRecord(id="00000002", content="Likes dogs", speaker="A", session_time="t2")]
    p = qa_prompt("A", "B", m, [], "What does A like?")
    assert "{{" not in p and "}}" not in p
    assert 'Memories for user A:\n\n[\n  {\n    "session_time": "t1",\n    "content": "Likes dogs"\n  }\n]\n\n' in p
    assert "Memories for user B:\n\n[]\n\nQuestion: What does A like?\n\n" in p


def test_parse_facts_cases():
    facts, s = parse_facts('```json\n{"facts": [{"speaker": "A", "dia_id": "D1:1", "fact": "Likes tea"}, '
                           '{"speaker": "A", "fact": ""}, 3, {"speaker": "B", "dia_id": 7, "fact": "Runs"}]}\n```')
    assert facts == [Fact("A", "D1:1", "Likes tea"), Fact("B", "", "Runs")]
    assert (s.bad_json, s.malformed, s.bad_dia_id) == (0, 2, 1)
    for bad in ("", "no json", '{"facts": {}}', '{"fact": []}', None, '{"facts": [', "[1, 2]"):
        facts, s = parse_facts(bad)
        assert facts == [] and s.bad_json == 1
    assert parse_facts('{"facts": []}')[0] == [] and parse_facts('{"facts": []}')[1].bad_json == 0


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(
                               st.sampled_from(["facts", "fact", "speaker", "dia_id", "x"]), c, max_size=4),
                           max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), json_values.map(json.dumps), json_values.map(lambda v: "x ```" + json.dumps(
    {"facts": v}) + "``` y")))
def test_parse_facts_never_raises(text):
    facts, s = parse_facts(text)
    assert all(isinstance(f.fact, str) and f.fact.strip() and isinstance(f.speaker, str)
               and isinstance(f.dia_id, str) for f in facts)
    assert s.bad_json in (0, 1) and (s.bad_json == 0 or facts == [])


def test_parse_answer():
    assert parse_answer("think <answer> a </answer> more <answer>Paris, 2021</answer>") == "Paris, 2021"
    assert parse_answer("<answer>x") is None and parse_answer(None) is None


class TableEmbedder:
    """Fixed vectors per text (L2-normalised), to hand-compute cosines."""

    id, dim = "table", 3

    def __init__(self, table):
        self.table = {k: np.asarray(v, np.float32) / np.linalg.norm(v) for k, v in table.items()}

    def encode(self, texts):
        return np.stack([self.table[t] for t in texts])


def test_select_candidates_hand_computed():
    # memories m0..m7 of speaker A at angles to the fact "f"; m8 is B's (excluded by the speaker filter)
    table = {"f": [1, 0, 0], "g": [0, 1, 0]}
    cos = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.05, -0.5, 0.99]
    recs = []
    for i, c in enumerate(cos):
        table[f"m{i}"] = [c, np.sqrt(max(0.0, 1 - c * c)) * (1 if i != 7 else 1), 0] if i != 7 else [-0.5, 0, 0.866]
        recs.append(MemoryRecord(id=f"0000000{i}", content=f"m{i}", speaker="B" if i == 8 else "A"))
    cache = VectorCache(TableEmbedder(table))
    facts = [Fact("A", "D1:1", "f"), Fact("A", "D1:2", "g")]
    cands, related = select_candidates(recs, facts, cache, top_k=5, threshold=0.1, max_total=25)
    # fact f: the 5 best of m0..m5 (m6 < 0.1, m7 negative, m8 another speaker)
    assert related[0] == ["00000000", "00000001", "00000002", "00000003", "00000004"]
    # fact g = e2: cosine sqrt(1 - c^2): m6 (0.999), m5, m4, m3, m2 ; m6 is new, the others repeat
    assert related[1] == ["00000006", "00000005", "00000004", "00000003", "00000002"]
    assert [r.id for r in cands] == ["00000000", "00000001", "00000002", "00000003", "00000004", "00000006",
                                     "00000005"]
    cands, related = select_candidates(recs, facts, cache, top_k=5, threshold=0.1, max_total=6)
    assert len(cands) == 6 and "00000005" not in related[1]
    _, related = select_candidates(recs, facts[:1], cache, top_k=5, threshold=0.1, same_speaker=False)
    assert related[0][0] == "00000008"
    assert select_candidates([], facts, cache) == ([], [[], []])


def test_prompt_revisions_byte_exact_and_selectable():
    """85aeeb1 (the official HEAD's, default) and f6d3e04 (memjax's earlier) extractor / manager system prompts."""
    s = _system_prompts("85aeeb1")
    assert (s["chars"], s["sha256"][:12]) == (18453, "03b1bf044b26")
    assert P.EXTRACTOR_SYSTEM_85AEEB1 == s["MEMORY_REASONER_PROMPT"]
    assert P.MANAGER_SYSTEM_85AEEB1 == s["MEMORY_EXECUTOR_PROMPT"]
    assert P.system_prompts("85aeeb1") == (P.EXTRACTOR_SYSTEM_85AEEB1, P.MANAGER_SYSTEM_85AEEB1)
    assert P.system_prompts("f6d3e04") == (P.EXTRACTOR_SYSTEM, P.MANAGER_SYSTEM)
    # the material differences
    assert "Extract facts ONLY from user messages." in P.EXTRACTOR_SYSTEM
    assert "Extract facts from the provided dialogue turns for BOTH speakers." in P.EXTRACTOR_SYSTEM_85AEEB1
    assert "related_memory_ids" in P.MANAGER_SYSTEM_85AEEB1 and "related_memory_ids" not in P.MANAGER_SYSTEM
    from memjax.systems.memory_r2.system import MemoryR2Section
    from memjax.systems.memory_r2.workflow import MemoryR2Config

    assert MemoryR2Config().prompt_revision == "85aeeb1" == MemoryR2Section().episode().prompt_revision
    assert MemoryR2Section(prompt_revision="f6d3e04").episode().prompt_revision == "f6d3e04"
    import pytest
    with pytest.raises(ValueError, match="prompt_revision"):
        MemoryR2Config(prompt_revision="nope")


def test_prompt_token_counts():
    """The revision's cost per call in Qwen2.5 tokens, as docs/metric_profiles.md states it."""
    from memjax.core.tokenizer import _default

    tok = _default()
    counts = {r: tuple(len(tok.encode(p)) for p in P.system_prompts(r)) for r in ("f6d3e04", "85aeeb1")}
    assert counts == {"f6d3e04": (1151, 1434), "85aeeb1": (1548, 2950)}
