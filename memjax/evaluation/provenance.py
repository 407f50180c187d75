"""What an evaluation scored, and the answers matched to the questions it scores.

Owns:
- `digest(path)`: a content digest of a file or a directory (large files sampled), or of a symbolic policy;
- `scored_inputs(...)`: the record of what a run scores: policy (paths and digests), answers file, data file, judge
  and metric profile; it goes into out_dir/inputs.json before anything is scored and into results.json;
- `claim_scores(out, inputs, rescore, stored)`: a resume reuses the stored scores only when the recorded inputs
  equal this run's (else a refusal naming the first difference, or, with `rescore`, a fresh scoring);
- `read_answers(path, id_key, answer_key)` and `match_answers(...)`: an answers file read into {id: record} with its
  duplicates counted (a duplicate id with two different answers is refused: the line order would decide the score),
  then matched to the questions: answered, missing, ids matching no question of the data file; more than
  `max_missing` (a fraction of the scored questions) without an answer is refused.
Invariants: every refusal is one line naming the file or out_dir and what to do; nothing here deletes a file that is
not named in `stored`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..core.config import ConfigError

INPUTS_FILE = "inputs.json"
_BIG, _PIECE = 64 << 20, 4 << 20


def _file_digest(p: Path, h) -> None:
    size = p.stat().st_size
    with p.open("rb") as f:
        if size <= _BIG:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return
        h.update(str(size).encode())
        for at in (0, size // 2, size - _PIECE):
            f.seek(at)
            h.update(f.read(_PIECE))


def digest(path: str | os.PathLike | None) -> str:
    """sha256 (first 16 hex digits) of a file's or a directory's content; "" for no path; a word that is not a path
    (a symbolic policy such as "random") is its own digest.

    sha256 over every file's relative name and content; a file over 64 MiB is read at its size and its first,
    middle and last 4 MiB, so that a 7B policy is digested in seconds."""
    if not path:
        return ""
    p = Path(path)
    if not p.exists():
        return str(path)
    h = hashlib.sha256()
    files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith("."))
    for q in files:
        h.update(str(q.relative_to(p) if q != p else q.name).encode() + b"\0")
        _file_digest(q, h)
    return h.hexdigest()[:16]


def scored_inputs(*, policy: dict[str, str] | None = None, answers: str = "", data: str = "", judge: str = "",
                  metrics: str = "") -> dict:
    """{"policy": {field: {"path", "digest"}}, "answers": {...}, "data": {...}, "judge", "metrics"}."""
    one = lambda p: {"path": str(p), "digest": digest(p)}  # noqa: E731
    return {"policy": {k: one(v) for k, v in (policy or {}).items()}, "answers": one(answers) if answers else None,
            "data": one(data) if data else None, "judge": judge, "metrics": metrics}


def _differences(old: dict, new: dict) -> list[str]:
    out = []
    for k in ("policy", "answers", "data", "judge", "metrics"):
        a, b = old.get(k), new.get(k)
        if k == "policy":
            for f in sorted(set(a or {}) | set(b or {})):
                x, y = (a or {}).get(f) or {}, (b or {}).get(f) or {}
                if x.get("digest") != y.get("digest"):
                    out.append(f"policy {f}: {_named(x)} -> {_named(y)}")
        elif isinstance(a, dict) or isinstance(b, dict):
            if (a or {}).get("digest") != (b or {}).get("digest"):
                out.append(f"{k} file: {_named(a or {})} -> {_named(b or {})}")
        elif a != b:
            out.append(f"{k}: {a} -> {b}")
    return out


def _named(x: dict) -> str:
    p, d = x.get("path") or "(none)", x.get("digest")
    return p if not d or d == p else f"{p} [{d}]"


def claim_scores(out: str | os.PathLike, inputs: dict, *, rescore: bool, stored: Iterable[str],
                 write: bool = True) -> bool:
    """Check out_dir's stored scores against this run's inputs; returns True when stored scores are kept for a
    resume. `stored`: the out dir's files that hold scores. `write`: record inputs.json (the process that writes).

    A resume reuses the stored scores only when the recorded inputs equal this run's; otherwise one ConfigError line
    names the first difference, or (`rescore`) the stored files are removed and everything is scored again."""
    out = Path(out)
    have = [f for f in stored if (out / f).exists()]
    rec = out / INPUTS_FILE
    old = None
    if rec.is_file():
        try:
            old = json.loads(rec.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
    diff = (_differences(old, inputs) if old is not None else
            ["its stored scores record no inputs (written by an older memjax or by hand)"]) if have else []
    if diff and not rescore:
        raise ConfigError(f"out_dir={out}: holds scores of other inputs ({diff[0]}"
                          f"{f'; and {len(diff) - 1} more' if len(diff) > 1 else ''}); use a new out_dir, or "
                          "rescore (--set rescore=true; --rescore) to score everything again there")
    if diff and write:
        for f in have:
            (out / f).unlink(missing_ok=True)
    if write:
        from ..core.outdir import write_atomic

        out.mkdir(parents=True, exist_ok=True)
        write_atomic(rec, json.dumps(inputs, indent=1))
    return bool(have) and not diff


def read_answers(path: str | os.PathLike, id_key: str, answer_key: str) -> tuple[dict[str, dict], dict]:
    """({id: record}, {"lines", "duplicates"}) of an answers JSONL; a duplicate id with another answer is refused."""
    table: dict[str, dict] = {}
    lines = dups = 0
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}); an answers file is JSON lines, one object with "
                         f"{id_key!r} and {answer_key!r} per line") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read the answers file ({e.strerror or e})") from None
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            key, ans = str(rec[id_key]), rec[answer_key] if answer_key in rec else rec.get("answer")
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"{path}:{n}: not a JSON object with {id_key!r} and {answer_key!r}") from None
        lines += 1
        if key in table:
            dups += 1
            prev = table[key]
            was = prev[answer_key] if answer_key in prev else prev.get("answer")
            if was != ans:
                raise ValueError(f"{path}:{n}: {id_key} {key} appears again with another answer ({_short(was)} "
                                 f"then {_short(ans)}); the line order would decide its score: keep one line per id")
        table[key] = rec
    return table, {"lines": lines, "duplicates": dups}


def _short(v) -> str:
    s = json.dumps(v)
    return s if len(s) <= 30 else s[:27] + "..."


def match_answers(path: str | os.PathLike, table: dict[str, dict], info: dict, scored_ids: Sequence[str],
                  all_ids: Iterable[str], max_missing: float) -> dict:
    """{"questions", "answered", "missing", "unmatched", "duplicates"}; refused (ValueError, one line) when the
    missing fraction of the scored questions exceeds max_missing."""
    known = set(all_ids)
    answered = sum(1 for i in scored_ids if i in table)
    m = {"questions": len(scored_ids), "answered": answered, "missing": len(scored_ids) - answered,
         "unmatched": sum(1 for i in table if i not in known), "duplicates": info["duplicates"]}
    if scored_ids and m["missing"] / len(scored_ids) > max_missing:
        raise ValueError(f"answers={path}: {m['missing']} of {m['questions']} questions have no answer there "
                         f"({m['unmatched']} of its {len(table)} ids match no question of the data file); more than "
                         f"max_missing={max_missing:g} of them: check the file, or set max_missing=1 (--set max_missing=1, "
                         "--max-missing 1) to score the missing ones as empty answers")
    return m


def match_line(m: dict) -> str:
    """The console's and results.md's line on how the answers matched the questions."""
    return (f"answers: {m['answered']} of {m['questions']} questions answered; {m['missing']} missing (scored as "
            f"empty answers), {m['unmatched']} ids matching no question, {m['duplicates']} duplicate lines")
