"""A LoCoMo evaluation writes its table in the layout of the paper whose metric profile scored it, the paper's
published rows beside it (memjax/evaluation/paper_tables.py; issue 49 item 4)."""

from pathlib import Path

from memjax.data.locomo import load_locomo
from memjax.data.locomo_splits import split_questions
from memjax.evaluation.locomo import evaluate_locomo
from memjax.evaluation.paper_tables import MEMORY_R2, SUMER, paper_markdown
from memjax.rewards.locomo import RuleBasedJudge

FIXTURE = Path(__file__).parents[2] / "fixtures" / "data" / "locomo_fixture.json"


def test_published_rows_have_every_cell_and_overall_matches_the_text():
    for pt in (MEMORY_R2, SUMER):
        assert all(len(v) == len(pt.columns) * len(pt.metrics) for v in pt.rows.values())
    # the overall F1 / B1 / J the papers' prose quotes (Memory-R2 §4: 50.60 / 44.01 / 80.99; SUMER: 48.65 / 43.44 / 66.79)
    assert MEMORY_R2.rows["Memory-R2"][-3:] == (50.60, 44.01, 80.99)
    assert MEMORY_R2.rows["Memory-R1"][-3:-1] == (43.14, 36.44)
    assert SUMER.rows["SUMER-GRPO"][-3:] == (48.65, 43.44, 66.79) and SUMER.rows["SUMER-Base"][-1] == 48.55


def test_evaluation_writes_each_papers_layout(tmp_path):
    qs = split_questions(load_locomo(FIXTURE), "memory_r1")["train"]
    for metrics, first_col, paper_row in (("memory_r2", "multi-hop F1", "Memory-R2 (paper)"),
                                          ("sumer", "single-hop F1", "SUMER-GRPO (paper)"), ("locomo", None, None)):
        out = tmp_path / metrics
        res = evaluate_locomo(qs, lambda q: "Buddy", RuleBasedJudge(), out, title="fixture", metrics=metrics)
        path = out / "paper_table.md"
        if first_col is None:
            assert not path.exists() and paper_markdown(res["table"], metrics) is None
            continue
        text = path.read_text()
        head = text.splitlines()[4]
        assert head.startswith(f"| method | {first_col} | ") and head.rstrip().endswith("overall J |")
        ours = text.splitlines()[6].split("|")[2:-1]
        pt = {"memory_r2": MEMORY_R2, "sumer": SUMER}[metrics]
        want = [res["table"][c][m] for c in pt.columns for m in pt.metrics]
        assert [float(x) for x in ours] == [round(v, 2) for v in want]
        assert paper_row in text
