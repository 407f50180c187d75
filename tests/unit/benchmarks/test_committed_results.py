"""Benchmark scripts write where their command line says and never over a committed result unless asked."""

from pathlib import Path

from benchmarks import committed, guard_committed
from benchmarks.locomo_retrieval import main

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests/fixtures/data/locomo_fixture.json"
COMMITTED = REPO / "benchmarks/results/locomo_retrieval_sumer_validation.json"


def test_locomo_retrieval_refuses_committed_results_and_writes_its_out_dir(tmp_path, capsys):
    before = COMMITTED.read_bytes()
    assert committed(COMMITTED) and not committed(tmp_path / "x.json")
    assert main([str(FIXTURE), "--out", str(COMMITTED.parent)]) == 2
    assert capsys.readouterr().err.strip() == (f"benchmarks.locomo_retrieval: error: {COMMITTED.parent}"
                                               f"/{COMMITTED.name} is a committed result; write elsewhere with --out "
                                               "DIR, or --update-committed to replace it")
    assert COMMITTED.read_bytes() == before
    assert main([str(FIXTURE), "--out", str(tmp_path)]) == 0
    assert (tmp_path / COMMITTED.name).is_file() and COMMITTED.read_bytes() == before
    assert guard_committed([COMMITTED], True, "p") is None
