"""MemAgent's official data layouts and the plain JSONL (memjax/data/memagent_files.py): detected by content, read
as typed, one-line errors naming file, row and field; the committed fixtures are what the project's script writes."""

import json
import shutil
from pathlib import Path

import pytest

from memjax.data.memagent_files import detect_layout, load_qa_file

LAYOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "data" / "memagent_layouts"


def test_fixtures_are_written_by_the_project_script(tmp_path):
    from tests.fixtures.data.make_memagent_layouts import main

    main(["--out", str(tmp_path)])
    for f in ("hotpot_docs.json", "eval_8.json", "eval_12800.json", "questions.jsonl"):
        assert (tmp_path / f).read_bytes() == (LAYOUTS / f).read_bytes(), f
    assert load_qa_file(tmp_path / "train.parquet")[:] == load_qa_file(LAYOUTS / "train.parquet")[:]


def test_each_layout_detected_by_content_and_read(tmp_path):
    renamed = tmp_path / "data.bin"  # the name says nothing
    for f, layout in (("train.parquet", "parquet"), ("eval_8.json", "eval_json"), ("questions.jsonl", "jsonl"),
                      ("hotpot_docs.json", "hotpotqa")):
        shutil.copy(LAYOUTS / f, renamed)
        assert detect_layout(renamed) == layout, f
    parquet, ev, jl = (load_qa_file(LAYOUTS / f) for f in ("train.parquet", "eval_8.json", "questions.jsonl"))
    assert len(parquet) == len(ev) == len(jl) == 6
    assert parquet[3] == ev[3]  # the eval file is the parquet converted as convert_to_eval.py does
    assert parquet[0]["question"] == "Who is the mayor of Amberfold?" and parquet[0]["answers"] == ["Ada Fenwick"]
    assert parquet[0]["num_docs"] == 8 and parquet[0]["context"].count("Document ") == 8
    assert jl[2]["id"] == "town-2" and jl[2]["num_docs"] == 0 and "Ada" not in jl[2]["answers"][0]
    over = load_qa_file(LAYOUTS / "eval_12800.json", docs_path=LAYOUTS / "hotpot_docs.json")
    assert over[0]["num_docs"] == 12800 and over[0]["context"].count("Document ") == 12
    assert "Ada Fenwick" in over[0]["context"]


def _err(path, **kw) -> str:
    with pytest.raises(ValueError) as e:
        load_qa_file(path, **kw)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_bad_rows_name_file_row_and_field(tmp_path):
    ev = json.loads((LAYOUTS / "eval_8.json").read_text())
    ev[2]["answers"] = []
    (tmp_path / "e.json").write_text(json.dumps(ev))
    assert "row 2: field 'answers' must be a non-empty list of strings" in _err(tmp_path / "e.json")
    del ev[2]["input"]
    ev[2]["answers"] = ["x"]
    (tmp_path / "e.json").write_text(json.dumps(ev))
    assert "row 2: field 'input' must be a non-empty string (got nothing: the field is missing)" in _err(tmp_path / "e.json")
    (tmp_path / "q.jsonl").write_text('{"context": "c", "question": "q", "answers": ["a"]}\n{"context": "c", '
                                      '"question": "", "answers": "a"}\n')
    assert "row 1: field 'question'" in _err(tmp_path / "q.jsonl")
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = load_qa_file(LAYOUTS / "train.parquet")
    pq.write_table(pa.Table.from_pylist([{"prompt": [{"role": "user", "content": "q"}], "context": "c",
                                          "reward_model": {"style": "rule", "ground_truth": ["a"]},
                                          "extra_info": {"index": 0}}]), tmp_path / "t.parquet")
    assert "row 0: field 'extra_info.num_docs' must be a non-negative integer" in _err(tmp_path / "t.parquet")
    assert len(rows) == 6
    assert "document numbers" in _err(LAYOUTS / "eval_12800.json")   # no docs_path
    (tmp_path / "x.txt").write_text("hello")
    assert "not a MemAgent data file" in _err(tmp_path / "x.txt")
