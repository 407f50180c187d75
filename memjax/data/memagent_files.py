"""MemAgent's data files as its users have them: the official training parquet, the official `eval_{N}.json`
evaluation files, and a plain JSONL of {context, question, answers}, beside raw HotpotQA (which
memjax.data.hotpotqa synthesises from).

Owns `detect_layout(path)` (by content, never by file name; its docstring describes each layout, from
BytedTsinghua-SIA/MemAgent @76b7a65, no code of which is used), `QAFile` (the records of one such file, validated,
as a random-access source of plain dicts for grain and the MemAgent workflow) and `load_qa_file`.
Invariants: every record is validated when the file is loaded; a bad one raises ValueError in one line naming the
file, the row (0-based), the field and what is expected. Records come out as dicts with `id`, `question`,
`answers` (list of str), `context` (str), `num_docs` (int, 0 when the file does not say) and `index`. Official
files over 10,000 documents hold `context` as document numbers into the HotpotQA dev pool: they need `docs_path`,
and their text is built only when a record is read, so a 3.5M-token context is never held for the whole file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .hotpotqa import format_context, load_hotpotqa

LAYOUTS = ("parquet", "eval_json", "jsonl", "hotpotqa")
PARQUET_MAGIC = b"PAR1"


def detect_layout(path: str | Path) -> str:
    r"""Which of LAYOUTS the file at `path` holds, from its content; ValueError naming the file otherwise.

    Layouts (facts read from BytedTsinghua-SIA/MemAgent @76b7a65):
    - `parquet` (the file starts with the parquet magic `PAR1`; taskutils/memory_data/processing.py writes it): one row
      per question with `prompt` = [{role, content}] (the question is prompt[0].content, as convert_to_eval.py reads
      it), `context` (the document text), `reward_model.ground_truth` (the list of answers), `extra_info.num_docs` and
      `extra_info.index`; `data_source` and the other columns are carried but not needed.
    - `eval_json` (a JSON array whose records have `input`; convert_to_eval.py and different_docs_eval.py write it):
      `context`, `input` (the question), `answers`, `num_docs`, `index`. For N > 10,000 documents the official files
      hold `context` as a list of document numbers into the sorted unique paragraph pool of the HotpotQA dev file
      (memjax.data.hotpotqa's pool is that pool); they need `docs_path` and their text is built only when a record is
      read ("Document {i}:\n{doc}" joined by blank lines, as the official over-1M script does), so a file of
      128 x 3.5M-token contexts is never held as text.
    - `jsonl` (one JSON object a line): `context`, `question`, `answers` (a string or a list of strings); optional `id`.
    - `hotpotqa` (a JSON array of raw HotpotQA records: `supporting_facts`): not read here (load_hotpotqa).
    """
    p = Path(path)
    with p.open("rb") as f:
        head = f.read(4)
        if head == PARQUET_MAGIC:
            return "parquet"
        f.seek(0)
        start = f.read(4096).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not start:
        raise ValueError(f"{p}: the file is empty (no record to read)")
    if start.startswith("{"):
        return "jsonl"
    if start.startswith("["):
        first = _first_record(p)
        if isinstance(first, dict) and "supporting_facts" in first:
            return "hotpotqa"
        if isinstance(first, dict) and "input" in first:
            return "eval_json"
        raise ValueError(f"{p}: a JSON array that is neither raw HotpotQA (records with supporting_facts) nor an "
                         f"official MemAgent eval file (records with context, input, answers, num_docs, index)")
    raise ValueError(f"{p}: not a MemAgent data file: expected parquet, a JSON array (raw HotpotQA or eval_{{N}}.json) "
                     f"or JSONL of {{context, question, answers}}")


def _first_record(p: Path) -> Any:
    data = _json(p)
    return data[0] if isinstance(data, list) and data else None


def _json(p: Path) -> Any:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: not valid JSON ({e})") from None


@dataclass(frozen=True)
class _Row:
    id: str
    question: str
    answers: tuple[str, ...]
    context: str | tuple[int, ...]   # text, or document numbers into the pool (index-only eval files)
    num_docs: int
    index: int


class QAFile(Sequence):
    """The validated records of one file (any layout but `hotpotqa`); `qa[i]` is record i as a plain dict."""

    def __init__(self, path: str | Path, layout: str, rows: list[_Row], docs: tuple[str, ...] | None = None):
        self.path, self.layout, self._rows, self._docs = str(path), layout, rows, docs

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        r = self._rows[i]
        ctx = r.context if isinstance(r.context, str) else format_context([self._docs[k] for k in r.context])
        return {"id": r.id, "question": r.question, "query": r.question, "answers": list(r.answers), "context": ctx,
                "num_docs": r.num_docs, "index": r.index}

    def num_docs(self) -> list[int]:
        return [r.num_docs for r in self._rows]

    def __repr__(self) -> str:
        return f"QAFile(path={self.path!r}, layout={self.layout!r}, records={len(self)})"


class _Checker:
    def __init__(self, path: Path, row: int):
        self.where = f"{path}: row {row}"

    def fail(self, field: str, want: str, got: Any) -> ValueError:
        return ValueError(f"{self.where}: field {field!r} must be {want} (got {_show(got)})")

    def text(self, rec: Any, field: str, *keys: str | int) -> str:
        v = _dig(rec, keys)
        if not isinstance(v, str) or not v.strip():
            raise self.fail(field, "a non-empty string", v)
        return v

    def answers(self, rec: Any, field: str, *keys: str) -> tuple[str, ...]:
        v = _dig(rec, keys)
        if hasattr(v, "tolist"):  # numpy arrays from pandas-written files
            v = v.tolist()
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, (list, tuple)) or not v or not all(isinstance(a, (str, int, float)) for a in v):
            raise self.fail(field, "a non-empty list of strings", v)
        return tuple(str(a) for a in v)

    def count(self, rec: Any, field: str, *keys: str, required: bool = True) -> int:
        v = _dig(rec, keys)
        if v is _MISSING and not required:
            return 0
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self.fail(field, "a non-negative integer", v)
        return v


_MISSING = object()


def _dig(rec: Any, keys) -> Any:
    for k in keys:
        if isinstance(k, int):
            if not isinstance(rec, (list, tuple)) or len(rec) <= k:
                return _MISSING
            rec = rec[k]
        elif isinstance(rec, dict) and k in rec:
            rec = rec[k]
        else:
            return _MISSING
    return rec


def _show(v: Any) -> str:
    if v is _MISSING:
        return "nothing: the field is missing"
    s = repr(v)
    return f"{type(v).__name__} {s[:60]}{'...' if len(s) > 60 else ''}"


def _parquet_rows(p: Path) -> list[_Row]:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:  # a memjax dependency; a stripped environment gets the fix in one line
        raise ImportError("reading MemAgent parquet files needs pyarrow: pip install 'pyarrow>=17'") from e
    try:
        records = pq.read_table(p).to_pylist()
    except Exception as e:  # pyarrow's errors for truncated or foreign files name no file
        raise ValueError(f"{p}: not a readable parquet file ({type(e).__name__}: {e})") from None
    rows = []
    for i, rec in enumerate(records):
        c = _Checker(p, i)
        prompt = _dig(rec, ("prompt",))
        if not isinstance(prompt, list) or not prompt or not isinstance(prompt[0], dict):
            raise c.fail("prompt", "a non-empty list of {role, content} messages", prompt)
        index = c.count(rec, "extra_info.index", "extra_info", "index")
        rows.append(_Row(str(index), c.text(rec, "prompt[0].content", "prompt", 0, "content"),
                         c.answers(rec, "reward_model.ground_truth", "reward_model", "ground_truth"),
                         c.text(rec, "context", "context"), c.count(rec, "extra_info.num_docs", "extra_info", "num_docs"),
                         index))
    return rows


def _eval_rows(p: Path, records: Any) -> tuple[list[_Row], bool]:
    if not isinstance(records, list) or not records:
        raise ValueError(f"{p}: an official eval file must be a non-empty JSON array of records")
    rows, index_only = [], False
    for i, rec in enumerate(records):
        c = _Checker(p, i)
        ctx = _dig(rec, ("context",))
        if isinstance(ctx, list):
            if not ctx or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in ctx):
                raise c.fail("context", "a string or a non-empty list of document numbers", ctx)
            ctx, index_only = tuple(ctx), True
        else:
            ctx = c.text(rec, "context", "context")
        index = c.count(rec, "index", "index")
        rows.append(_Row(str(index), c.text(rec, "input", "input"), c.answers(rec, "answers", "answers"), ctx,
                         c.count(rec, "num_docs", "num_docs"), index))
    return rows, index_only


def _jsonl_rows(p: Path) -> list[_Row]:
    rows = []
    with p.open(encoding="utf-8") as f:
        for i, line in enumerate(ln for ln in f if ln.strip()):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{p}: row {i}: not a JSON object ({e})") from None
            c = _Checker(p, i)
            if not isinstance(rec, dict):
                raise c.fail("(row)", "a JSON object with context, question, answers", rec)
            rid = rec.get("id", i)
            if not isinstance(rid, (str, int)) or isinstance(rid, bool):
                raise c.fail("id", "a string or an integer", rid)
            rows.append(_Row(str(rid), c.text(rec, "question", "question"), c.answers(rec, "answers", "answers"),
                             c.text(rec, "context", "context"), c.count(rec, "num_docs", "num_docs", required=False), i))
    if not rows:
        raise ValueError(f"{p}: no records (JSONL: one {{context, question, answers}} object a line)")
    return rows


def load_qa_file(path: str | Path, *, docs_path: str | Path = "") -> QAFile:
    """The records of an official parquet, official eval JSON or plain JSONL file. Index-only eval files (the official
    files for N > 10,000) need `docs_path`, the HotpotQA dev JSON their document numbers point into."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: file not found")
    layout = detect_layout(p)
    if layout == "hotpotqa":
        raise ValueError(f"{p}: raw HotpotQA, not a question file: load it with memjax.data.load_hotpotqa")
    if layout == "parquet":
        return QAFile(p, layout, _parquet_rows(p))
    if layout == "jsonl":
        return QAFile(p, layout, _jsonl_rows(p))
    rows, index_only = _eval_rows(p, _json(p))
    if not index_only:
        return QAFile(p, layout, rows)
    if not docs_path:
        raise ValueError(f"{p}: its contexts are document numbers (the official files for N > 10,000): give the "
                         f"HotpotQA dev JSON they index (docs_path=...)")
    docs = load_hotpotqa(docs_path).docs
    for i, r in enumerate(rows):
        if isinstance(r.context, tuple) and max(r.context) >= len(docs):
            raise ValueError(f"{p}: row {i}: field 'context' names document {max(r.context)} but {docs_path} holds "
                             f"{len(docs)} (is it the dev file the eval file was made from?)")
    return QAFile(p, layout, rows, docs)
