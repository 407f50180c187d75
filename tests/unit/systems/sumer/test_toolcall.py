"""Qwen2.5 function calling: golden ids from the real chat template (tests/fixtures/make_sumer_golden.py renders
the shipped tokenizer_config.json template with jinja2 as transformers does), the incremental episode
(prompt + generated turn + tool turn ...) equal to the whole-episode rendering, transformers itself when
importable, and the parser / argument checker on malformed and fuzzed model output."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax import Tokenizer
from memjax.systems.sumer.workflow import QwenSumerFormat
from memjax.systems.sumer.tools import SUMER_TOOLS
from memjax.agents.toolcall import CallError, ToolCall, check_arguments, parse_tool_calls

GOLDEN = json.loads((Path(__file__).parents[3] / "fixtures" / "golden" / "sumer_chat.json").read_text("utf-8"))
CASES = {c["name"]: c for c in GOLDEN["cases"]}
ASSET = Path(__file__).parents[4] / "memjax" / "assets" / "qwen2.5-tokenizer"


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.default()


@pytest.mark.parametrize("name", list(CASES))
def test_template_with_tools_matches_golden(tok, name):
    c = CASES[name]
    assert tok.apply_chat_template(c["messages"], c["add_generation_prompt"], tools=c["tools"]) == c["ids"]
    assert tok.render_chat(c["messages"], c["add_generation_prompt"], tools=c["tools"]) == c["text"]


def _generated(tok, msg):
    """The ids a model emits for an assistant message with tool calls (after `<|im_start|>assistant\\n`)."""
    calls = "".join('\n<tool_call>\n{"name": "' + tc["function"]["name"] + '", "arguments": '
                    + json.dumps(tc["function"]["arguments"], ensure_ascii=False) + "}\n</tool_call>"
                    for tc in msg["tool_calls"])
    text = msg["content"] + calls if msg["content"] else calls[1:]
    return tok.encode(text) + [tok.im_end_id]


@pytest.mark.parametrize("name", ["one_call_then_prompt", "reasoning_two_parallel_calls",
                                  "three_turns_error_and_submit", "unicode_arguments"])
def test_incremental_episode_equals_whole_rendering(tok, name):
    c = CASES[name]
    msgs = c["messages"]
    fmt = QwenSumerFormat(tok, system=msgs[0]["content"])
    ids = fmt.prompt(msgs[1]["content"])
    assert ids == CASES["prompt"]["ids"]
    i = 2
    while i < len(msgs):
        gen = _generated(tok, msgs[i])
        calls, tagged = fmt.parse(gen)
        assert tagged and calls == [ToolCall(tc["function"]["name"], tc["function"]["arguments"])
                                    for tc in msgs[i]["tool_calls"]]
        ids += gen
        j = i + 1
        while j < len(msgs) and msgs[j]["role"] == "tool":
            j += 1
        if j > i + 1:
            ids += fmt.tool_turn([m["content"] for m in msgs[i + 1:j]], closed=fmt.closed(gen))
        i = j
    if not c["add_generation_prompt"]:
        ids += tok.encode("\n")
    assert ids == c["ids"]


def test_cut_turn_gets_its_im_end(tok):
    fmt = QwenSumerFormat(tok)
    cut = tok.encode('<tool_call>\n{"name": "search_memory", "arguments": {"query": "a"}}\n</tool_call>')
    assert not fmt.closed(cut)
    assert fmt.tool_turn(["r"], closed=False) == [tok.im_end_id] + fmt.tool_turn(["r"], closed=True)
    with pytest.raises(ValueError, match="no results"):
        fmt.tool_turn([])


def test_transformers_live(tok):
    transformers = pytest.importorskip("transformers", reason="transformers not installed (it is on the GPU machine)")
    hf = transformers.AutoTokenizer.from_pretrained(str(ASSET))
    for c in GOLDEN["cases"]:
        out = hf.apply_chat_template(c["messages"], tools=c["tools"], add_generation_prompt=c["add_generation_prompt"],
                                     tokenize=True)
        out = out["input_ids"] if hasattr(out, "keys") else out
        assert list(out) == c["ids"] == tok.apply_chat_template(c["messages"], c["add_generation_prompt"],
                                                                 tools=c["tools"]), c["name"]


SEARCH = SUMER_TOOLS[0]["function"]


@pytest.mark.parametrize("text, expect", [
    ("no call here", None),
    ('<tool_call>\n{"name": "search_memory", "arguments": {"query": "x"}}\n</tool_call>',
     [ToolCall("search_memory", {"query": "x"})]),
    ('<tool_call>{"name": "submit_answer", "arguments": "{\\"answer\\": \\"Paris\\"}"}</tool_call>',
     [ToolCall("submit_answer", {"answer": "Paris"})]),
    ('<tool_call>{"name": "a", "arguments": {}}<tool_call>{"name": "b"}', [ToolCall("a"), ToolCall("b")]),
    ('<tool_call>\n{"name": "search_memory", "arguments": {"query": "x"\n</tool_call>', ["not valid JSON"]),
    ("<tool_call>[1, 2]</tool_call>", ["must be a JSON object"]),
    ('<tool_call>{"arguments": {}}</tool_call>', ['no "name"']),
    ('<tool_call>{"name": "s", "arguments": [1]}</tool_call>', ["must be a JSON object, got list"]),
    ('<tool_call>{"name": "s", "arguments": "oops"}</tool_call>', ["string that is not a JSON object"]),
    ("<tool_call>" + "[" * 100000 + "</tool_call>", ["could not be read"]),
    ("<tool_call></tool_call>", ["not valid JSON"]),
])
def test_parse_tool_calls(text, expect):
    calls, tagged = parse_tool_calls(text)
    if expect is None:
        assert calls == [] and not tagged
        return
    assert tagged and len(calls) == len(expect)
    for got, want in zip(calls, expect):
        if isinstance(want, str):
            assert isinstance(got, CallError) and want in got.message
        else:
            assert got == want


@pytest.mark.parametrize("args, expect", [
    ({"query": "x"}, {"query": "x"}),
    ({"query": "x", "mode": "keyword", "speaker": "Ann", "session": "3"}, {"query": "x", "mode": "keyword",
                                                                         "speaker": "Ann", "session": 3}),
    ({"query": "x", "session": 2.0, "speaker": None}, {"query": "x", "session": 2}),
    ({}, "missing required argument(s) query"),
    ({"query": 5}, "'query' of search_memory must be of type string"),
    ({"query": "x", "mode": "fuzzy"}, 'must be one of "semantic", "keyword"'),
    ({"query": "x", "session": True}, "must be of type integer"),
    ({"query": "x", "session": "two"}, "must be of type integer"),
    ({"query": "x", "k": 3}, "has no argument 'k'"),
])
def test_check_arguments(args, expect):
    out, err = check_arguments(SEARCH, args)
    if isinstance(expect, dict):
        assert err is None and out == expect
    else:
        assert out == {} and expect in err


def test_format_rejects_unknown_tool(tok):
    fmt = QwenSumerFormat(tok)
    calls, _ = fmt.parse(tok.encode('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>') + [tok.im_end_id])
    assert isinstance(calls[0], CallError) and "unknown tool 'rm_rf'" in calls[0].message


PIECES = st.sampled_from(["<tool_call>", "</tool_call>", "{", "}", '"name"', ":", '"search_memory"', ",",
                          '"arguments"', '"query"', '"x"', "[", "]", "null", "1", '"', "\\", "\n", " ", "é"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=40))
def test_parse_never_raises_on_fuzz(parts):
    fmt_calls, tagged = parse_tool_calls("".join(parts))
    assert tagged == ("<tool_call>" in "".join(parts))
    for c in fmt_calls:
        assert isinstance(c, (ToolCall, CallError))
        if isinstance(c, ToolCall):
            args, err = check_arguments(SEARCH, c.arguments)
            assert err is None or args == {}


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["query", "mode", "speaker", "session", "zz"]),
                       st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=4), st.booleans(), st.floats())))
def test_check_arguments_never_raises(args):
    out, err = check_arguments(SEARCH, args)
    assert (err is None) or out == {}
