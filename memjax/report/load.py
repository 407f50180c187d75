"""Reading a run directory for the report: which kind of run it is and everything it wrote, as plain dicts.

Owns: `RunData` (the files of one out_dir, parsed) and `load_run(path)`. Kinds, from the files present:
- "train": memjax.train's out_dir (metrics.jsonl, evals.jsonl, traces.jsonl, result.json);
- "system_eval": memjax.evaluate with a SystemEvalConfig (results.json with "metrics", traces.jsonl);
- "length_eval": memjax.evaluate with an EvalConfig (results.json with "rows" per document length, traces.jsonl);
- "locomo_eval": a LoCoMo evaluation (results.json with "table", predictions.jsonl, banks/ when built).
Invariants: reads only; a torn last JSONL line (a run killed mid-write) is skipped and counted, never fatal;
a path that is no run directory raises ReportError with one line naming the path and the files looked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.environment import newest as newest_env

RUN_FILES = ("metrics.jsonl", "result.json", "results.json", "traces.jsonl", "predictions.jsonl")


class ReportError(Exception):
    """A one-line, user-facing reason why no report can be written."""


@dataclass
class RunData:
    path: Path
    kind: str
    config: dict[str, Any] = field(default_factory=dict)
    system: str = ""
    metrics: list[dict] = field(default_factory=list)      # metrics.jsonl, one dict per training step
    evals: list[dict] = field(default_factory=list)        # held-out evaluations {"step", metric: value}
    result: dict[str, Any] = field(default_factory=dict)   # result.json (train) or results.json (evaluations)
    traces: list[dict] = field(default_factory=list)       # traces.jsonl
    predictions: list[dict] = field(default_factory=list)  # predictions.jsonl (LoCoMo)
    banks: dict[str, dict] = field(default_factory=dict)   # banks/<conversation>.json (LoCoMo Memory-R1)
    torn_lines: int = 0
    images: list[Path] = field(default_factory=list)       # PNGs the run wrote itself
    environment: dict[str, Any] = field(default_factory=dict)  # what it ran on: result(s).json's, else run.json's


def _jsonl(path: Path, data: RunData) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            data.torn_lines += 1
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    return obj if isinstance(obj, dict) else {}


def load_run(path: str | Path) -> RunData:
    p = Path(path)
    if not p.exists():
        raise ReportError(f"{path}: no such directory")
    if not p.is_dir():
        raise ReportError(f"{path}: not a directory (give a run's out_dir)")
    if not any((p / f).is_file() for f in RUN_FILES):
        raise ReportError(f"{path}: not a memjax run directory (none of {', '.join(RUN_FILES)} in it)")
    data = RunData(path=p, kind="train")
    train_result, eval_result = _json(p / "result.json"), _json(p / "results.json")
    data.metrics = _jsonl(p / "metrics.jsonl", data)
    data.traces = _jsonl(p / "traces.jsonl", data)
    data.predictions = _jsonl(p / "predictions.jsonl", data)
    if data.metrics or train_result:
        data.kind, data.result = "train", train_result
        data.evals = _jsonl(p / "evals.jsonl", data) or list(train_result.get("evals", []))
    elif "table" in eval_result or data.predictions:
        data.kind, data.result = "locomo_eval", eval_result
    elif "rows" in eval_result:
        data.kind, data.result = "length_eval", eval_result
    else:
        data.kind, data.result = "system_eval", eval_result
    data.config = data.result.get("config") or {}
    agent = data.config.get("agent")
    data.system = str(data.result.get("system") or (agent.get("name", "") if isinstance(agent, dict) else ""))
    if data.kind == "locomo_eval":
        data.system = data.system or str(data.result.get("title", "LoCoMo"))
        banks = p / "banks"
        if banks.is_dir():
            data.banks = {b.stem: _json(b) for b in sorted(banks.glob("*.json"))}
    data.images = sorted(x for x in p.glob("*.png"))
    env = data.result.get("environment")  # an unfinished training run has no result.json: its run.json says
    data.environment = env if isinstance(env, dict) else (newest_env(_json(p / "run.json")) or {})
    return data
