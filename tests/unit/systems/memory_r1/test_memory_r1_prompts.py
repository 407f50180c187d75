"""Memory-R1 prompts against the paper (papers/memory-r1.txt Figs. 9, 11, 12) and Mem0's wrapper; the parsers fuzzed.

The figure blocks are read from ../shared/papers/memory-r1.txt when present; the sha256 of each block (taken
from that file) is checked always, so the suite stands alone."""

import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.systems.memory_r1.prompts import (ANSWER_INSTRUCTIONS, ANSWER_INSTRUCTIONS_NO_DISTILL, EXTRACT_PROMPT,
                                             JUDGE_PROMPT, MANAGER_PROMPT, answer_prompt, extract_messages,
                                             manager_prompt, parse_answer, parse_facts)

PAPER = Path(__file__).parents[4] / ".." / "shared" / "papers" / "memory-r1.txt"
SHA = {"Figure 9": "04379c549422f6fc7eccedd5fedd5499671e8e611b1f1477154258b18fc8bdaf",
       "Figure 11 instructions": "70a8c342daf8d8d0b5bf244ef125be53516c65a9b0046c148e61de19e697c155"}


def _block(fig: str) -> str:
    t = PAPER.read_text(encoding="utf-8")
    i = t.index(f"### {fig}:")
    j = t.index("```markdown\n", i) + len("```markdown\n")
    return t[j: t.index("\n```", j)]


def _sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def test_hashes_of_the_figures():
    assert _sha(MANAGER_PROMPT) == SHA["Figure 9"]
    assert _sha(ANSWER_INSTRUCTIONS) == SHA["Figure 11 instructions"]
    assert MANAGER_PROMPT.startswith("You are a smart memory manager which controls the memory of a system.\n")
    assert ANSWER_INSTRUCTIONS.startswith("You are an intelligent memory assistant tasked with retrieving\n")


FIG11_MEMORIES = {
    "John": [("7:20 pm on 16 June, 2023", "John has a special memory of a vacation to California where he "
              "experienced a\ngorgeous sunset and an enjoyable night strolling the shore, creating meaningful "
              "memories with loved ones."),
             ("6:13 pm on 10 April, 2023", "John explored the coast in the Pacific Northwest and visited some "
              "national\nparks, finding the beauty of nature absolutely breathtaking."),
             ("3:14 pm on 13 August, 2023", "John enjoys spending time outdoors with his family, including "
              "activities\nsuch as hiking, hanging out at the park, and having picnics. He also values indoor "
              "family activities like\nplaying board games and having movie nights at home.")],
    "Maria": [("6:29 pm on 7 July, 2023", "John experienced a severe flood in his old area last week, which "
               "caused\nsignificant damage to homes due to poor infrastructure."),
              ("1:24 pm on 25 May, 2023", "Maria appreciates the beauty of small, meaningful moments in life, as "
               "reflected\nin her reaction to a family beach photo shared by John."),
              ("3:14 pm on 13 August, 2023", "Maria appreciates family bonding and is interested in the activities "
               "that\nJohn and his family enjoy doing together.")]}
FIG11_QUESTION = "Does John live close to a beach or the mountains?"


@pytest.mark.skipif(not PAPER.is_file(), reason="papers/memory-r1.txt not present beside the repository")
def test_prompts_equal_the_paper_figures():
    assert MANAGER_PROMPT == _block("Figure 9")
    assert JUDGE_PROMPT == _block("Figure 12")
    fig11 = _block("Figure 11")
    # the figure's "... (In total 30 most relevant memories ...) ..." lines are elisions, not prompt text
    want = "\n".join(ln for ln in fig11.split("\n") if not ln.startswith("... (In total 30"))
    got = answer_prompt(FIG11_QUESTION, "John", FIG11_MEMORIES["John"], "Maria", FIG11_MEMORIES["Maria"])
    assert got == want


def test_answer_prompt_layout_and_ablation():
    got = answer_prompt("Q?", "A", [("1 May, 2023", "a1"), (None, "a2")], "B", [], distill=True)
    assert got == ANSWER_INSTRUCTIONS + "\nMemories for user A:\n- 1 May, 2023: a1\n- a2\nMemories for user B:\n\nQuestion: Q?"
    off = answer_prompt("Q?", "A", [], "B", [], distill=False)
    assert off.startswith(ANSWER_INSTRUCTIONS_NO_DISTILL + "\n")
    assert "Select memories" not in off and "First output the memories" not in off
    assert "9. IMPORTANT: Output the final answer after **Answer:**\n" in off and "10. IMPORTANT" not in off
    assert "7. Ensure the final answer is specific\nMemories for user A:" in off
    assert len(ANSWER_INSTRUCTIONS_NO_DISTILL.splitlines()) == len(ANSWER_INSTRUCTIONS.splitlines()) - 3


def test_manager_prompt_is_mem0_wrapper():
    """Mem0's get_update_memory_messages(old, facts) with Fig. 9 as its instructions, written out by hand."""
    got = manager_prompt([{"id": "0", "text": "Adopted a dog named Buddy"}], ["Adopted another dog named Scout"])
    want = (MANAGER_PROMPT + "\n\n    \n    Below is the current content of my memory which I have collected till now. "
            "You have to update it in the following format only:\n\n    ```\n    [{'id': '0', 'text': 'Adopted a dog "
            "named Buddy'}]\n    ```\n\n    \n\n    The new retrieved facts are mentioned in the triple backticks. You "
            "have to analyze the new retrieved facts and determine whether these facts should be added, updated, or "
            "deleted in the memory.\n\n    ```\n    ['Adopted another dog named Scout']\n    ```\n\n    You must return "
            "your response in the following JSON structure only:\n\n    {\n        \"memory\" : [\n            {\n"
            "                \"id\" : \"<ID of the memory>\",                # Use existing ID for updates/deletes, "
            "or new ID for additions\n                \"text\" : \"<Content of the memory>\",         # Content of "
            "the memory\n                \"event\" : \"<Operation to be performed>\",    # Must be \"ADD\", "
            "\"UPDATE\", \"DELETE\", or \"NONE\"\n                \"old_memory\" : \"<Old memory content>\"       # "
            "Required only if the event is \"UPDATE\"\n            },\n            ...\n        ]\n    }\n\n    Follow "
            "the instruction mentioned below:\n    - Do not return anything from the custom few shot prompts provided "
            "above.\n    - If the current memory is empty, then you have to add the new retrieved facts to the "
            "memory.\n    - You should return the updated memory in only JSON format as shown below. The memory key "
            "should be the same if no changes are made.\n    - If there is an addition, generate a new key and add the "
            "new memory corresponding to it.\n    - If there is a deletion, the memory key-value pair should be removed "
            "from the memory.\n    - If there is an update, the ID key should remain the same and only the value needs "
            "to be updated.\n\n    Do not return anything except the JSON format.\n    ")
    assert got == want
    empty = manager_prompt([], ["x"])
    assert empty.startswith(MANAGER_PROMPT + "\n\n    \n    Current memory is empty.\n\n    \n\n    The new retrieved")


def test_extract_messages():
    m = extract_messages("Andrew", "I adopted a dog.", "1:56 pm on 8 May, 2023")
    assert m[0]["role"] == "system" and "Today's date is 1:56 pm on 8 May, 2023." in m[0]["content"]
    assert m[0]["content"] == EXTRACT_PROMPT.replace("{date}", "1:56 pm on 8 May, 2023")
    assert m[1] == {"role": "user", "content": "Input:\nAndrew: I adopted a dog."}


def test_parse_facts_and_answer():
    assert parse_facts('Sure: {"facts" : ["Name is John", "", 3, " Likes tea "]}') == (["Name is John", "Likes tea"], "json")
    assert parse_facts('{"facts": []}') == ([], "json")
    assert parse_facts("no json") == ([], "none") and parse_facts('{"fact": ["x"]}') == ([], "none")
    assert parse_answer("Memories:\n- a\n**Answer:** 7 May 2023") == ("7 May 2023", "marker")
    assert parse_answer("**Answer:**\n\n  Paris  \nbecause ...") == ("Paris", "marker")
    assert parse_answer("**Answer:** x\n**Answer:** y**") == ("y", "marker")
    assert parse_answer("**answer**: Rome") == ("Rome", "marker")
    assert parse_answer("reasoning\nAnswer: Lima") == ("Lima", "loose")
    assert parse_answer("just Oslo\n") == ("just Oslo", "none")
    assert parse_answer(None) == ("", "none") and parse_answer("") == ("", "none")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("*Answer: {}[]\"facts,\n xyz")), max_size=80))
def test_parsers_never_raise(text):
    ans, src = parse_answer(text)
    assert isinstance(ans, str) and src in ("marker", "loose", "none") and "\n" not in ans.strip()
    facts, src = parse_facts(text)
    assert src in ("json", "none") and all(isinstance(f, str) and f for f in facts)
