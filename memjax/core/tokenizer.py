"""Qwen byte-level BPE tokenisation and the Qwen2.5 chat template, built at token-id level.

Owns loading `tokenizer.json` (+ `tokenizer_config.json`) through the `tokenizers` library (never `transformers`),
the shipped Qwen2.5 assets (`memjax/assets/qwen2.5-tokenizer/`, see NOTICE.md there) and the Qwen2.5-Instruct
chat template reimplemented in Python (tools, tool_calls and tool responses included).
Invariants:
- `encode` adds no special tokens but recognises special-token strings in the text as single ids, as transformers.
- `apply_chat_template(msgs)` returns exactly transformers' `apply_chat_template(msgs, tokenize=True)` ids for string
  content, without rendering the prompt to a string: template special tokens are emitted as ids and each run of text
  between them is encoded as one string (equivalent, since added tokens are split out before BPE).
- Content parts that are token ids are spliced verbatim and are hard boundaries (principle 1: text is never
  re-tokenised between turns); adjacent text parts are merged before encoding.
- A tokenizer_config.json with another chat_template loads for encode / decode, but `apply_chat_template` raises.
  The normaliser is NFC, so `decode(encode(t)) == unicodedata.normalize("NFC", t)`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from hashlib import sha256
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer as _HFTokenizer

DEFAULT_SYSTEM_PROMPT = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
ROLES = ("system", "user", "assistant", "tool")
# sha256 of the chat_template string in Qwen2.5(-Instruct) tokenizer_config.json: the one implemented here.
_QWEN25_TEMPLATE_SHA256 = "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f"
_TOOLS_HEADER = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                 "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
_TOOLS_FOOTER = ("\n</tools>\n\nFor each function call, return a json object with function name and "
                 "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                 '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')


@dataclass(frozen=True, init=False)
class TokenIds:
    """Token ids to splice verbatim into a chat message's content (never re-tokenised)."""

    ids: tuple[int, ...]

    def __init__(self, ids: Iterable[int]) -> None:
        object.__setattr__(self, "ids", tuple(_as_ids(ids, "TokenIds")))


Part = str | TokenIds | Sequence[int] | np.ndarray
_Seg = str | tuple[int, ...]  # text to encode, or ids to emit


def _as_ids(x: Any, where: str) -> list[int]:
    """Checks that `x` is a 1-D sequence of ints (not bools/floats) and returns them as Python ints."""
    if isinstance(x, np.ndarray):
        if x.ndim != 1 or not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"{where}: token ids must be a 1-D integer array, got {x.dtype} shape {x.shape}")
        return x.tolist()
    if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
        raise ValueError(f"{where}: expected a sequence of token ids, got {type(x).__name__}")
    out = list(x)
    for i, v in enumerate(out):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{where}: token id {i} is {type(v).__name__} {v!r}, expected int")
    return [int(v) for v in out]


def _tojson(x: Any) -> str:
    # transformers' `tojson` filter: json.dumps, ensure_ascii=False, insertion order, no HTML escaping.
    return json.dumps(x, ensure_ascii=False)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read: {e}") from None


class Tokenizer:
    """Qwen2.5 tokenizer: `encode`/`decode` and the chat template at token-id level."""

    def __init__(self, tokenizer_json: str, config_json: str | None = None, source: str = "<memory>") -> None:
        try:
            self._tok = _HFTokenizer.from_str(tokenizer_json)
        except Exception as e:  # the Rust side raises a plain Exception
            raise ValueError(f"{source}/tokenizer.json: not a valid tokenizers file: {e}") from None
        try:
            cfg: dict[str, Any] = json.loads(config_json) if config_json is not None else {}
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}/tokenizer_config.json: invalid JSON: {e}") from None
        if not isinstance(cfg, dict):
            raise ValueError(f"{source}/tokenizer_config.json: expected a JSON object")
        self.source = source
        template = cfg.get("chat_template")
        self._template_ok = template is None or (
            isinstance(template, str) and sha256(template.encode()).hexdigest() == _QWEN25_TEMPLATE_SHA256)
        self._named: dict[str, int | None] = {}
        for key in ("eos_token", "pad_token", "bos_token"):
            tok = cfg.get(key)
            tok = tok.get("content") if isinstance(tok, dict) else tok
            tid = None if tok is None else self._tok.token_to_id(tok)
            if tok is not None and tid is None:
                raise ValueError(f"{source}/tokenizer_config.json: {key} {tok!r} is not in the vocabulary")
            self._named[key] = tid
        self.vocab_size: int = self._tok.get_vocab_size(with_added_tokens=True)
        self.special_ids: frozenset[int] = frozenset(
            i for i, t in self._tok.get_added_tokens_decoder().items() if t.special)
        self.im_start_id = self._required("<|im_start|>")
        self.im_end_id = self._required("<|im_end|>")
        self.endoftext_id = self._required("<|endoftext|>")

    @classmethod
    def from_dir(cls, path: str | Path) -> Tokenizer:
        """Loads `path/tokenizer.json` and, when present, `path/tokenizer_config.json`."""
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: tokenizer directory not found")
        cfg = path / "tokenizer_config.json"
        return cls(_read(path / "tokenizer.json"), _read(cfg) if cfg.exists() else None, str(path))

    @staticmethod
    def default() -> Tokenizer:
        """The Qwen2.5 tokenizer shipped with memjax (cached; the object is immutable)."""
        return _default()

    def _required(self, token: str) -> int:
        tid = self._tok.token_to_id(token)
        if tid is None:
            raise ValueError(f"{self.source}/tokenizer.json: special token {token} missing (not a Qwen tokenizer)")
        return tid

    def _named_id(self, key: str) -> int:
        tid = self._named[key]
        if tid is None:
            raise ValueError(f"{self.source}: no {key} configured (tokenizer_config.json absent or null)")
        return tid

    @property
    def eos_id(self) -> int:
        return self._named_id("eos_token")

    @property
    def pad_id(self) -> int:
        return self._named_id("pad_token")

    @property
    def bos_id(self) -> int | None:
        return self._named["bos_token"]

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._tok.id_to_token(int(token_id))

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; no special tokens added, special-token strings in the text recognised."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects str, got {type(text).__name__}")
        try:
            return self._tok.encode(text, add_special_tokens=False).ids
        except TypeError:  # the tokenizers library's only word for text that is not valid Unicode
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValueError(f"encode: text is not valid Unicode: lone surrogate {text[e.start]!r} at character "
                                 f"{e.start} (near {text[max(0, e.start - 20): e.start]!r})") from None
            raise

    def decode(self, ids: Sequence[int] | np.ndarray, skip_special_tokens: bool = False,
               skip_unknown: bool = False) -> str:
        """Text of `ids`. Ids outside the vocabulary raise, unless skip_unknown (for model output: a model's
        embedding has padding rows beyond the tokenizer, e.g. 151,936 vs 151,665, that decode to nothing,
        as in transformers)."""
        ids = _as_ids(ids, "decode")
        ids = [i for i in ids if 0 <= i < self.vocab_size] if skip_unknown else self._checked(ids, "decode")
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def count_unknown(self, ids: Sequence[int]) -> int:
        """How many ids fall outside the vocabulary (model padding rows)."""
        return sum(1 for i in ids if not 0 <= int(i) < self.vocab_size)

    def _checked(self, ids: list[int], where: str) -> list[int]:
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"{where}: token id {bad[0]} outside the vocabulary [0, {self.vocab_size})")
        return ids

    # ---- chat template -------------------------------------------------------------------------------

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
                            tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
        """Prompt ids of the Qwen2.5-Instruct template (== transformers' ids for string content)."""
        out: list[int] = []
        text: list[str] = []
        for seg in self._segments(messages, add_generation_prompt, tools):
            if isinstance(seg, str):
                text.append(seg)
                continue
            if text:
                out += self.encode("".join(text))
                text = []
            out += seg
        if text:
            out += self.encode("".join(text))
        return out

    def render_chat(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
                    tools: Sequence[Mapping[str, Any]] | None = None) -> str:
        """The template rendered as a string (id parts decoded), for debugging and comparison."""
        segs = self._segments(messages, add_generation_prompt, tools)
        return "".join(s if isinstance(s, str) else self._tok.decode(list(s), skip_special_tokens=False)
                       for s in segs)

    def _content(self, i: int, msg: Mapping[str, Any], optional: bool) -> list[_Seg]:
        c = msg.get("content")
        where = f"message {i} ({msg.get('role')})"
        if c is None and optional:
            return []
        if isinstance(c, str):
            return [c] if c else []
        if isinstance(c, (TokenIds, np.ndarray)):
            c = [c]
        if not isinstance(c, (list, tuple)):
            raise ValueError(f"{where}: content must be a str or a list of parts (str or token ids), "
                             f"got {type(c).__name__}")
        segs: list[_Seg] = []
        for j, p in enumerate(c):
            if isinstance(p, str):
                segs += [p] if p else []
            elif isinstance(p, TokenIds):
                segs.append(tuple(self._checked(list(p.ids), f"{where} part {j}")))
            elif isinstance(p, (list, tuple, np.ndarray)):
                segs.append(tuple(self._checked(_as_ids(p, f"{where} part {j}"), f"{where} part {j}")))
            else:
                raise ValueError(f"{where}: content part {j} is {type(p).__name__}; parts must be str or "
                                 "token ids (TokenIds, list[int], 1-D integer np.ndarray)")
        return segs

    def _tool_calls(self, i: int, msg: Mapping[str, Any]) -> list[str]:
        calls = msg.get("tool_calls")
        if not isinstance(calls, (list, tuple)):
            raise ValueError(f"message {i}: tool_calls must be a list, got {type(calls).__name__}")
        out = []
        for j, call in enumerate(calls):
            call = call.get("function", call) if isinstance(call, Mapping) else call
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str) or "arguments" not in call:
                raise ValueError(f"message {i}: tool_calls[{j}] needs a str 'name' and 'arguments'")
            out.append('\n<tool_call>\n{"name": "' + call["name"] + '", "arguments": '
                       + _tojson(call["arguments"]) + "}\n</tool_call>")
        return out

    def _segments(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool,
                  tools: Sequence[Mapping[str, Any]] | None) -> list[_Seg]:
        """The template as a list of text / id segments; follows tokenizer_config.json's Jinja line by line."""
        if not self._template_ok:
            raise ValueError(f"{self.source}/tokenizer_config.json: chat_template is not the Qwen2.5 template, "
                             "the only one implemented")
        if isinstance(messages, (str, Mapping)) or not isinstance(messages, Sequence) or not messages:
            raise ValueError("messages must be a non-empty list of {'role', 'content'} mappings")
        roles: list[str] = []
        contents: list[list[_Seg]] = []
        calls: list[list[str]] = []
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise ValueError(f"message {i}: expected a mapping with 'role' and 'content', got {type(m).__name__}")
            role = m.get("role")
            if role not in ROLES:
                raise ValueError(f"message {i}: role {role!r} is not one of {', '.join(ROLES)}")
            has_calls = role == "assistant" and bool(m.get("tool_calls"))
            roles.append(role)
            contents.append(self._content(i, m, optional=has_calls))
            calls.append(self._tool_calls(i, m) if has_calls else [])
        S, E = (self.im_start_id,), (self.im_end_id,)
        system = contents[0] if roles[0] == "system" else [DEFAULT_SYSTEM_PROMPT]
        segs: list[_Seg] = [S, "system\n", *system]
        if tools:
            if isinstance(tools, (str, Mapping)) or not all(isinstance(t, Mapping) for t in tools):
                raise ValueError("tools must be a list of JSON-schema mappings")
            segs += [_TOOLS_HEADER, *("\n" + _tojson(dict(t)) for t in tools), _TOOLS_FOOTER]
        segs += [E, "\n"]
        n = len(roles)
        for i, (role, content) in enumerate(zip(roles, contents)):
            if role == "user" or (role == "system" and i > 0) or (role == "assistant" and not calls[i]):
                segs += [S, role + "\n", *content, E, "\n"]
            elif role == "assistant":
                segs += [S, "assistant", *(["\n", *content] if content else []), *calls[i], E, "\n"]
            elif role == "tool":
                if i == 0 or roles[i - 1] != "tool":
                    segs += [S, "user"]
                segs += ["\n<tool_response>\n", *content, "\n</tool_response>"]
                if i == n - 1 or roles[i + 1] != "tool":
                    segs += [E, "\n"]
        if add_generation_prompt:
            segs += [S, "assistant\n"]
        return segs


@lru_cache(maxsize=1)
def _default() -> Tokenizer:
    d = resources.files("memjax") / "assets" / "qwen2.5-tokenizer"
    try:
        return Tokenizer(d.joinpath("tokenizer.json").read_text("utf-8"),
                         d.joinpath("tokenizer_config.json").read_text("utf-8"), f"memjax/assets/{d.name}")
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{d}: shipped tokenizer asset missing ({e.filename}); reinstall memjax") from None
