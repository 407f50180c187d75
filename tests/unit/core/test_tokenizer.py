"""memjax.core.tokenizer: golden ids from transformers, the token-level chat template, the parts API, errors."""

from __future__ import annotations

import json
import shutil
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memjax.core.tokenizer as mt
from memjax.core.tokenizer import DEFAULT_SYSTEM_PROMPT, TokenIds, Tokenizer

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "chat_template.json"
ASSETS = Path(mt.__file__).parents[1] / "assets" / "qwen2.5-tokenizer"
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Text biased towards what breaks tokenisers: whitespace runs, newlines, angle brackets/pipes (special-token
# look-alikes), combining marks (NFC), CJK, emoji, contractions; plus arbitrary unicode.
_ALPHABET = st.sampled_from(list(" \n\n\r\t  <|>'sdm") + ["e", "\u0301", "中", "文", "😀", "ß", "A", "1", "."])
TEXT = st.one_of(st.text(max_size=60), st.text(_ALPHABET, max_size=40))
PLAIN = TEXT.filter(lambda t: "<|" not in t)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.default()


@pytest.fixture(scope="module")
def golden() -> dict:
    # A committed fixture (tests/fixtures/make_golden.py, real transformers): missing is a failure, not a skip.
    if not GOLDEN.is_file():
        pytest.fail(f"{GOLDEN} is missing; it is a committed fixture made by tests/fixtures/make_golden.py")
    data = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert data["chat"] and data["encode"], "golden file has no cases"
    return data


# ---- golden: transformers' own ids -------------------------------------------------------------------

def test_golden_chat_template(tok: Tokenizer, golden: dict) -> None:
    for case in golden["chat"]:
        ids = tok.apply_chat_template(case["messages"], case["add_generation_prompt"], tools=case.get("tools"))
        assert ids == case["ids"], case["name"]


def test_golden_encode_decode(tok: Tokenizer, golden: dict) -> None:
    assert any(not c["text"].isascii() for c in golden["encode"]), "golden texts should include non-ASCII"
    for case in golden["encode"]:
        assert tok.encode(case["text"]) == case["ids"], case["text"][:80]
        assert tok.decode(case["ids"]) == unicodedata.normalize("NFC", case["text"])


def test_golden_render_matches_ids(tok: Tokenizer, golden: dict) -> None:
    for case in golden["chat"]:
        text = tok.render_chat(case["messages"], case["add_generation_prompt"], tools=case.get("tools"))
        if "text" in case:  # transformers' tokenize=False rendering
            assert text == case["text"], case["name"]
        assert tok.encode(text) == case["ids"], case["name"]


# ---- special tokens, vocabulary, loading -----------------------------------------------------------------

def test_special_ids_and_vocab(tok: Tokenizer) -> None:
    assert tok.vocab_size == 151665
    assert (tok.endoftext_id, tok.im_start_id, tok.im_end_id) == (151643, 151644, 151645)
    assert (tok.eos_id, tok.pad_id, tok.bos_id) == (151645, 151643, None)
    assert tok.token_to_id("<|im_end|>") == 151645 and tok.id_to_token(151644) == "<|im_start|>"
    assert tok.token_to_id("<|file_sep|>") == 151664 and tok.id_to_token(151665) is None
    assert {151643, 151644, 151645} <= tok.special_ids
    assert tok.encode("<|im_start|>user\n") == [151644, 872, 198]
    assert tok.decode([151644, 872, 198, 151645], skip_special_tokens=True) == "user\n"
    assert Tokenizer.default() is tok


def test_from_dir_equals_default(tok: Tokenizer) -> None:
    other = Tokenizer.from_dir(ASSETS)
    msgs = [{"role": "user", "content": "Wie spät ist es? 几点了?"}]
    assert other.apply_chat_template(msgs) == tok.apply_chat_template(msgs)
    assert other.vocab_size == tok.vocab_size and other.eos_id == tok.eos_id


def test_tool_template_matches_jinja(tok: Tokenizer) -> None:
    # Expected strings rendered by jinja2 3.1.6 from the shipped chat_template with transformers' environment
    # (ImmutableSandboxedEnvironment, trim/lstrip blocks, tojson = json.dumps(ensure_ascii=False)).
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": 'Wetter für <Ort> & "Zeit"',
        "parameters": {"type": "object", "properties": {"loc": {"type": "string"}}, "required": ["loc"]}}}
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"loc": "Zürich", "n": [1, 2]}}},
                {"name": "f2", "arguments": '{"a": 1}'}]},
            {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "rain <b>"},
            {"role": "assistant", "content": "done"}]
    expected = (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
        "signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
        "\"get_weather\", \"description\": \"Wetter f\u00fcr <Ort> & \\\"Zeit\\\"\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"loc\": {\"type\": \"string\"}}, \"required\": [\"loc\"]}}}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nweather?<|im_end|>\n<|im_start|>"
        "assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"loc\": \"Z\u00fcrich\", \"n\": "
        "[1, 2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"f2\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>"
        "<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain <b>\n"
        "</tool_response><|im_end|>\n<|im_start|>assistant\ndone<|im_end|>\n<|im_start|>assistant\n")
    assert tok.render_chat(msgs, tools=[weather]) == expected
    assert tok.apply_chat_template(msgs, tools=[weather]) == tok.encode(expected)
    msgs2 = [{"role": "tool", "content": "first"}, {"role": "user", "content": "u"},
             {"role": "assistant", "content": None,
              "tool_calls": [{"function": {"name": "g", "arguments": {"k": "ü"}}}]},
             {"role": "tool", "content": "r"}, {"role": "user", "content": "bye"}]
    expected2 = (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nfirst\n</tool_response><|im_end|>\n<|im_start|>user\nu<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"g\", \"arguments\": {\"k\": \"\u00fc\"}}\n</tool_call>"
        "<|im_end|>\n<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n<|im_start|>user\nbye"
        "<|im_end|>\n<|im_start|>assistant\n")
    assert tok.render_chat(msgs2) == expected2
    assert tok.apply_chat_template(msgs2) == tok.encode(expected2)


def test_template_structure(tok: Tokenizer) -> None:
    sys_ids = [151644, *tok.encode("system\n" + DEFAULT_SYSTEM_PROMPT), 151645, *tok.encode("\n")]
    user = [151644, *tok.encode("user\nHi"), 151645, *tok.encode("\n")]
    gen = [151644, *tok.encode("assistant\n")]
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}]) == sys_ids + user + gen
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=False) == sys_ids + user
    own = tok.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}])
    assert own == [151644, *tok.encode("system\nS"), 151645, *tok.encode("\n")] + user + gen


# ---- properties --------------------------------------------------------------------------------------------

@PROPS
@given(text=TEXT)
def test_roundtrip(tok: Tokenizer, text: str) -> None:
    assert tok.decode(tok.encode(text)) == unicodedata.normalize("NFC", text)  # the normaliser is NFC


@PROPS
@given(a=TEXT, b=TEXT, special=st.sampled_from(range(151643, 151665)))
def test_special_tokens_split_before_bpe(tok: Tokenizer, a: str, b: str, special: int) -> None:
    # The claim the token-level template rests on: no token spans a special token.
    s = tok.id_to_token(special)
    assert tok.encode(a + s + b) == tok.encode(a) + [special] + tok.encode(b)


_ROLE_MSG = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": TEXT})


@PROPS
@given(msgs=st.lists(_ROLE_MSG, min_size=1, max_size=5), gen=st.booleans())
def test_token_level_equals_string_level(tok: Tokenizer, msgs: list[dict], gen: bool) -> None:
    assert tok.apply_chat_template(msgs, gen) == tok.encode(tok.render_chat(msgs, gen))


@PROPS
@given(pre=PLAIN, suf=PLAIN, ids=st.lists(st.integers(0, 151664), max_size=12), role=st.sampled_from(["user", "tool"]),
       kind=st.sampled_from(["TokenIds", "list", "tuple", "ndarray"]))
def test_parts_splice_ids_verbatim(tok: Tokenizer, pre: str, suf: str, ids: list[int], role: str, kind: str) -> None:
    # Splicing ids at token level == encoding the text with a sentinel special token there, then swapping it.
    part = {"TokenIds": TokenIds(ids), "list": ids, "tuple": tuple(ids), "ndarray": np.array(ids, np.int32)}[kind]
    msgs = [{"role": "user", "content": "q"}, {"role": role, "content": [pre, part, suf]}]
    sentinel = 151656  # <|video_pad|>
    ref = tok.encode(tok.render_chat([msgs[0], {"role": role, "content": pre + "<|video_pad|>" + suf}]))
    assert ref.count(sentinel) == 1
    k = ref.index(sentinel)
    assert tok.apply_chat_template(msgs) == ref[:k] + ids + ref[k + 1:]


@PROPS
@given(parts=st.lists(TEXT, max_size=4))
def test_str_parts_equal_concatenation(tok: Tokenizer, parts: list[str]) -> None:
    as_parts = tok.apply_chat_template([{"role": "user", "content": parts}])
    assert as_parts == tok.apply_chat_template([{"role": "user", "content": "".join(parts)}])


def test_id_part_is_a_hard_boundary(tok: Tokenizer) -> None:
    # "\n\n" is one token when encoded together; an (even empty) id part between the newlines splits it.
    split = tok.apply_chat_template([{"role": "user", "content": ["a\n", TokenIds([]), "\nb"]}], False)
    tail = [151644, *tok.encode("user\na\n"), *tok.encode("\nb"), 151645, *tok.encode("\n")]
    assert split[-len(tail):] == tail
    assert tok.encode("user\na\n") + tok.encode("\nb") != tok.encode("user\na\n\nb")


# ---- errors ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("msgs, match", [
    ([{"role": "bot", "content": "x"}], r"message 0: role 'bot' is not one of"),
    ([{"role": "user", "content": "x"}, {"content": "y"}], r"message 1: role None"),
    ([{"role": "user", "content": 3}], r"message 0 \(user\): content must be a str or a list of parts"),
    ([{"role": "user", "content": None}], r"message 0 \(user\): content must be"),
    ([{"role": "user", "content": [{"type": "text", "text": "x"}]}], r"message 0 \(user\): content part 0 is dict"),
    ([{"role": "user", "content": [1, 2]}], r"content part 0 is int"),
    ([{"role": "user", "content": ["a", [1, 151665]]}], r"part 1: token id 151665 outside the vocabulary"),
    ([{"role": "user", "content": [[1.0]]}], r"part 0: token id 0 is float"),
    ([{"role": "user", "content": [np.array([1.5])]}], r"1-D integer array"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"arguments": {}}]}],
     r"tool_calls\[0\] needs a str 'name'"),
    ([], r"non-empty list"),
    ("hello", r"non-empty list"),
    (["hello"], r"message 0: expected a mapping"),
])
def test_bad_messages(tok: Tokenizer, msgs: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tok.apply_chat_template(msgs)  # type: ignore[arg-type]


def test_bad_ids_and_text(tok: Tokenizer) -> None:
    with pytest.raises(ValueError, match=r"decode: token id -1 outside"):
        tok.decode([5, -1])
    with pytest.raises(ValueError, match=r"TokenIds: token id 0 is bool"):
        TokenIds([True])
    with pytest.raises(TypeError, match="encode expects str"):
        tok.encode(b"bytes")  # type: ignore[arg-type]


def _copy_assets(dst: Path) -> Path:
    dst.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ASSETS / name, dst / name)
    return dst


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="tokenizer directory not found"):
        Tokenizer.from_dir(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=r"empty/tokenizer\.json: file not found"):
        Tokenizer.from_dir(tmp_path.joinpath("empty").mkdir() or tmp_path / "empty")
    bad = _copy_assets(tmp_path / "bad")
    (bad / "tokenizer.json").write_text('{"version": "1.0", "model": 3}')
    with pytest.raises(ValueError, match=r"bad/tokenizer\.json: not a valid tokenizers file"):
        Tokenizer.from_dir(bad)
    badcfg = _copy_assets(tmp_path / "badcfg")
    (badcfg / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"badcfg/tokenizer_config\.json: invalid JSON"):
        Tokenizer.from_dir(badcfg)


def test_config_optional_and_checked(tmp_path: Path) -> None:
    bare = _copy_assets(tmp_path / "bare")
    (bare / "tokenizer_config.json").unlink()
    t = Tokenizer.from_dir(bare)
    assert t.apply_chat_template([{"role": "user", "content": "x"}])[:1] == [151644]
    with pytest.raises(ValueError, match="no eos_token configured"):
        _ = t.eos_id
    other = _copy_assets(tmp_path / "other")
    cfg = json.loads((other / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}"
    cfg["eos_token"] = {"content": "<|endoftext|>"}
    (other / "tokenizer_config.json").write_text(json.dumps(cfg))
    t2 = Tokenizer.from_dir(other)
    assert t2.eos_id == 151643 and t2.encode("hi") == [6023]
    with pytest.raises(ValueError, match="chat_template is not the Qwen2.5 template"):
        t2.apply_chat_template([{"role": "user", "content": "x"}])
    cfg["eos_token"] = "<|nope|>"
    (other / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"eos_token '<\|nope\|>' is not in the vocabulary"):
        Tokenizer.from_dir(other)
