"""SQuAD (v1.1 / v2.0 JSON layout) loading for RULER's `qa_1` task.

Owns: reading and validating a SQuAD file into a sorted unique paragraph pool plus its answerable questions.

Invariants (as RULER's `read_squad`):
- `docs` = every unique paragraph `context` in the file, sorted (Python string order);
- only answerable questions are kept (`is_impossible` false, at least one answer; v1.1 files have no
  `is_impossible` and count as answerable); answers are the answer texts, duplicates removed in first-seen order;
- each question knows its own paragraph (`doc_id`) and the other paragraphs of its article (`article_doc_ids`),
  which RULER uses as the first distractors.
- Bad input raises a one-line error naming the file and the JSON path of the offending field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SquadQuestion:
    """One answerable question; ids index `SquadCorpus.docs`."""

    id: str
    question: str
    answers: tuple[str, ...]
    doc_id: int
    article_doc_ids: tuple[int, ...]


@dataclass(frozen=True)
class SquadCorpus:
    """A loaded SQuAD file: sorted unique paragraphs and the answerable questions."""

    path: str
    docs: tuple[str, ...]
    questions: tuple[SquadQuestion, ...]

    def __len__(self) -> int:
        return len(self.questions)


def _need(cond: bool, path: Path, where: str, what: str) -> None:
    if not cond:
        raise ValueError(f"{path}: {where}: {what}")


def load_squad(path: str | Path) -> SquadCorpus:
    """Reads a SQuAD JSON file (`{"data": [{"paragraphs": [{"context", "qas": [...]}]}]}`)."""
    p = Path(path)
    try:
        data: Any = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: SQuAD file not found") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: cannot read SQuAD file ({e})") from None
    _need(isinstance(data, dict) and isinstance(data.get("data"), list), p, "top level",
          "expected an object with a 'data' list (SQuAD layout)")
    for a, art in enumerate(data["data"]):
        _need(isinstance(art, dict) and isinstance(art.get("paragraphs"), list), p, f"data[{a}]",
              "missing 'paragraphs' list")
        for k, par in enumerate(art["paragraphs"]):
            where = f"data[{a}].paragraphs[{k}]"
            _need(isinstance(par, dict) and isinstance(par.get("context"), str), p, where, "missing 'context' string")
            _need(isinstance(par.get("qas"), list), p, where, "missing 'qas' list")
            for j, qa in enumerate(par["qas"]):
                w = f"{where}.qas[{j}]"
                _need(isinstance(qa, dict) and isinstance(qa.get("question"), str), p, w, "missing 'question' string")
                _need(isinstance(qa.get("answers", []), list), p, w, "'answers' must be a list")
                for m, ans in enumerate(qa.get("answers", [])):
                    _need(isinstance(ans, dict) and isinstance(ans.get("text"), str), p, f"{w}.answers[{m}]",
                          "missing 'text' string")
    docs = tuple(sorted({par["context"] for art in data["data"] for par in art["paragraphs"]}))
    index = {d: i for i, d in enumerate(docs)}
    questions = []
    for a, art in enumerate(data["data"]):
        article = list(dict.fromkeys(index[par["context"]] for par in art["paragraphs"]))
        for k, par in enumerate(art["paragraphs"]):
            own = index[par["context"]]
            for j, qa in enumerate(par["qas"]):
                answers = tuple(dict.fromkeys(ans["text"] for ans in qa.get("answers", [])))
                if qa.get("is_impossible", False) or not answers:
                    continue
                qid = str(qa.get("id", f"{a}.{k}.{j}"))
                questions.append(SquadQuestion(id=qid, question=qa["question"], answers=answers, doc_id=own,
                                               article_doc_ids=tuple(d for d in article if d != own)))
    if not questions:
        raise ValueError(f"{p}: no answerable questions")
    return SquadCorpus(path=str(p), docs=docs, questions=tuple(questions))
