r"""How Memory-R2 reads a LoCoMo question's evidence list: the official reading (default) or memjax's repair.

Owns: `EVIDENCE_READINGS`, `read_evidence_official(raw)` and `questions_as_read(questions, reading)`.
- "official" (MemoryR2Section.evidence default): ahmedehabb/Memory-R2 @357b4ec data/locomo/data_preprocess.py's
  `parse_dia_id` (`re.match(r"D(\d+):(\d+)", s.strip())`, anchored at the start only): a malformed string holding
  several ids yields only its FIRST id ("D8:6; D9:17" -> D8:6), "D:11:26" and "D" yield nothing, leading zeros are
  read as numbers ("D30:05" -> D30:5), text after the id is ignored ("D2:4:6" -> D2:4), ids naming no turn are
  kept, and a question whose evidence reads as nothing is skipped. Equal to the official function on
  tests/fixtures/evidence_goldens_memory_r2.json (scripts/gen_evidence_goldens_memory_r2.py).
- "repaired" (memjax's own reading, a named option): the LoCoMo loader's `Question.evidence` (every id of a
  multi-id string, stray colons and leading zeros repaired, ids naming no turn dropped).
Where the readings differ on LoCoMo 10: docs/metric_profiles.md (the evidence row). The evidence sets a question's
credited sessions, the local branch's Q_t and M-Fail.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from ...data.locomo import Question

EVIDENCE_READINGS = ("official", "repaired")
_DIA = re.compile(r"D(?P<sess>\d+):(?P<dia>\d+)")  # the official pattern, applied with re.match


def read_evidence_official(raw: Iterable[object]) -> tuple[str, ...]:
    """The evidence ids the official preprocessing reads from a raw LoCoMo evidence list, as `D<s>:<t>`."""
    out = []
    for e in raw:
        if not e or not isinstance(e, str):
            continue
        m = _DIA.match(e.strip())
        if m:
            out.append(f"D{int(m.group('sess'))}:{int(m.group('dia'))}")
    return tuple(out)


def questions_as_read(questions: Sequence[Question], reading: str) -> list[Question]:
    """`questions` with their evidence as `reading` reads it; the official reading skips a question whose evidence
    reads as nothing (the repaired one keeps the loader's evidence as it is)."""
    if reading not in EVIDENCE_READINGS:
        raise ValueError(f"Memory-R2 evidence reading must be one of {EVIDENCE_READINGS}, got {reading!r}")
    if reading == "repaired":
        return list(questions)
    out = []
    for q in questions:
        ev = read_evidence_official(q.evidence_raw)
        if ev:
            out.append(dataclasses.replace(q, evidence=ev))
    return out
