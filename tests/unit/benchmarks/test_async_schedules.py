"""benchmarks/async_schedules.py's table and summary from rows (the runs themselves are the benchmark's: its result
file is benchmarks/results/async_schedules_cpu.json): the ratio is async over sync, the standard deviation is over
seeds, and a bad argument is argparse's one line."""

import pytest

from benchmarks.async_schedules import main, summary, table


def _row(schedule, seed, acc, s):
    return {"schedule": schedule, "seed": seed, "steps": 8, "heldout_accuracy_before": 0.5, "heldout_accuracy": acc,
            "s_per_step": s, "rollout_s": s / 2, "update_s": s / 2, "staleness_token_mean": 0.5 * (schedule != "sync")}


def test_summary_and_table():
    rows = [_row("sync", 0, 0.6, 4.0), _row("colocated_async", 0, 0.7, 3.0),
            _row("sync", 1, 0.8, 6.0), _row("colocated_async", 1, 0.7, 3.0)]
    s = summary(rows)
    assert s["sync"]["heldout_accuracy_mean"] == pytest.approx(0.7)
    assert s["sync"]["heldout_accuracy_std"] == pytest.approx(0.1414, abs=1e-4)
    assert s["colocated_async"]["heldout_accuracy_std"] == 0.0
    assert s["s_per_step_ratio"] == pytest.approx(3.0 / 5.0) and s["rollout_s_ratio"] == pytest.approx(3.0 / 5.0)
    md = table(rows, s, "x.json")
    assert md.count("\n| sync |") == 2 and "| **colocated_async** | mean of 2 |" in md and "0.600 (measured" in md


@pytest.mark.parametrize("argv", [["--steps", "1"], ["--max-staleness", "-1"]])
def test_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "error:" in capsys.readouterr().err
