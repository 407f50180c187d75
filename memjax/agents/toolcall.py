"""Function calling in Qwen2.5's own (Hermes-style) format, at token-id level: parse, check, respond.

Owns: `ToolCall` / `CallError` (one parsed call or why it is unusable), `parse_tool_calls(text)`,
`check_arguments(schema, args)` (a JSON-schema subset) and `QwenToolFormat` (prompt, stop ids, tool turn).
The format is what Qwen2.5's chat template renders (memjax/assets/qwen2.5-tokenizer; golden ids in
tests/fixtures/golden/sumer_chat.json): tools as JSON lines in `<tools></tools>` in the system turn, calls as
`<tool_call>` JSON blocks in the assistant turn, results as `tool` messages merged into ONE user turn.
Invariants:
- `parse_tool_calls` and `check_arguments` never raise on model output (fuzzed): every defect (bad JSON, unknown
  tool, missing / unknown / mistyped argument, ...) is a `CallError` whose message is that call's tool result.
- prompt + generated turn + `QwenToolFormat.tool_turn(results, closed)` ... equals `apply_chat_template` of the
  whole episode whenever the generated turn equals the template's encoding (tests); `closed=False` first appends
  the missing `<|im_end|>`; appended ids are never trained (they are not the policy's tokens).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)(?:" + re.escape(CLOSE) + r"|(?=" + re.escape(OPEN) + r")|\Z)", re.S)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallError:
    message: str  # shown to the model as the call's tool result
    raw: str = ""


def _short(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[:n] + "..."


def _parse_block(body: str) -> ToolCall | CallError:
    raw = body.strip()
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        return CallError(f"Error: the tool call is not valid JSON ({e.msg} at character {e.pos}); expected "
                         '{"name": <function-name>, "arguments": <args-json-object>}', raw)
    except (RecursionError, ValueError) as e:  # absurd nesting, huge integers
        return CallError(f"Error: the tool call could not be read as JSON ({type(e).__name__})", raw)
    if not isinstance(obj, dict):
        return CallError(f"Error: the tool call must be a JSON object, got {type(obj).__name__}", raw)
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return CallError('Error: the tool call has no "name" string', raw)
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except (json.JSONDecodeError, RecursionError, ValueError):
            return CallError(f'Error: "arguments" of {_short(name)} is a string that is not a JSON object', raw)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return CallError(f'Error: "arguments" of {_short(name)} must be a JSON object, got {type(args).__name__}', raw)
    return ToolCall(name, args)


def parse_tool_calls(text: str) -> tuple[list[ToolCall | CallError], bool]:
    """(calls in order, whether the text holds any `<tool_call>` tag). Never raises.

    A block runs to its `</tool_call>`, or, when that is missing (generation cut short), to the next
    `<tool_call>` or the end of the turn; such a block is still parsed (its JSON is usually incomplete).
    `arguments` given as a JSON string holding an object is accepted (some checkpoints emit it so)."""
    if not isinstance(text, str) or OPEN not in text:
        return [], False
    return [_parse_block(m.group(1)) for m in _BLOCK.finditer(text)], True


def _type_ok(kind: str | None, value: Any) -> tuple[bool, Any]:
    """(ok, value coerced): integers also accepted as integral floats or digit strings ("3")."""
    if kind == "string":
        return isinstance(value, str), value
    if kind == "integer":
        if isinstance(value, bool):
            return False, value
        if isinstance(value, int):
            return True, value
        if isinstance(value, float) and value.is_integer():
            return True, int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,9}\s*", value):
            return True, int(value)
        return False, value
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool), value
    if kind == "boolean":
        return isinstance(value, bool), value
    return True, value


def check_arguments(function: Mapping[str, Any], args: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Check `args` against a tool's `function` schema: (coerced args, None) or ({}, error message).
    Optional arguments given as null are dropped."""
    name = function.get("name", "?")
    params = function.get("parameters", {}) or {}
    props: Mapping[str, Any] = params.get("properties", {}) or {}
    required = list(params.get("required", []) or [])
    expected = ", ".join(props) or "none"
    out: dict[str, Any] = {}
    for key, value in args.items():
        if key not in props:
            return {}, f"Error: {name} has no argument {_short(str(key), 40)!r} (arguments: {expected})"
        if value is None and key not in required:
            continue
        spec = props[key]
        ok, value = _type_ok(spec.get("type"), value)
        if not ok:
            return {}, f"Error: argument {key!r} of {name} must be of type {spec.get('type')}"
        if "enum" in spec and value not in spec["enum"]:
            return {}, (f"Error: argument {key!r} of {name} must be one of "
                        f"{', '.join(json.dumps(v) for v in spec['enum'])}")
        out[key] = value
    missing = [k for k in required if k not in out]
    if missing:
        return {}, f"Error: {name} is missing required argument(s) {', '.join(missing)}"
    return out, None


class QwenToolFormat:
    """Qwen2.5 function calling on a memjax Tokenizer (ids built as the chat template renders them)."""

    def __init__(self, tokenizer, tools: Sequence[Mapping[str, Any]], system: str):
        self.tok, self.tools, self.system = tokenizer, [dict(t) for t in tools], system
        self.functions = {t["function"]["name"]: t["function"] for t in self.tools}
        self.stop_ids = (tokenizer.im_end_id, tokenizer.endoftext_id)
        self.pad_id = tokenizer.pad_id
        self._nl = tokenizer.encode("\n")
        self._gen = [tokenizer.im_start_id] + tokenizer.encode("assistant\n")

    def prompt(self, user: str) -> list[int]:
        msgs = [{"role": "system", "content": self.system}, {"role": "user", "content": user}]
        return self.tok.apply_chat_template(msgs, add_generation_prompt=True, tools=self.tools)

    def text(self, ids: Sequence[int]) -> str:
        ids = list(ids)
        if ids and ids[-1] in self.stop_ids:
            ids = ids[:-1]
        return self.tok.decode(ids, skip_unknown=True)

    def parse(self, ids: Sequence[int]) -> tuple[list[ToolCall | CallError], bool]:
        """Calls of a generated assistant turn, each checked against the tool schemas."""
        calls, tagged = parse_tool_calls(self.text(ids))
        return [self.check(c) for c in calls], tagged

    def check(self, call: ToolCall | CallError) -> ToolCall | CallError:
        if isinstance(call, CallError):
            return call
        fn = self.functions.get(call.name)
        if fn is None:
            return CallError(f"Error: unknown tool {_short(call.name, 40)!r} (tools: {', '.join(self.functions)})")
        args, err = check_arguments(fn, call.arguments)
        return CallError(err) if err else ToolCall(call.name, args)

    def closed(self, ids: Sequence[int]) -> bool:
        return bool(ids) and ids[-1] == self.tok.im_end_id

    def tool_turn(self, results: Sequence[str], closed: bool = True) -> list[int]:
        """Ids after a generated assistant turn: its `<|im_end|>` when it was cut short, the tool results as
        the template renders consecutive tool messages, and the next `<|im_start|>assistant\\n`."""
        if not results:
            raise ValueError("QwenToolFormat.tool_turn: no results")
        body = "user" + "".join(f"\n<tool_response>\n{r}\n</tool_response>" for r in results)
        out = [] if closed else [self.tok.im_end_id]
        return out + self._nl + [self.tok.im_start_id] + self.tok.encode(body) + [self.tok.im_end_id] + self._nl + self._gen
