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
    assert s["s_per_step_ratio"] == {"colocated_async": pytest.approx(3.0 / 5.0)}
    assert s["rollout_s_ratio"] == {"colocated_async": pytest.approx(3.0 / 5.0)}
    assert "split_async" not in s  # only the schedules that ran
    md = table(rows, s, "x.json")
    assert md.count("\n| sync |") == 2 and "| **colocated_async** | mean of 2 |" in md
    assert "s/step colocated_async / sync: 0.600 (rollout s: 0.600) (measured" in md
    s3 = summary(rows + [_row("split_async", 0, 0.5, 2.0), _row("split_async", 1, 0.7, 3.0)])
    assert s3["s_per_step_ratio"]["split_async"] == pytest.approx(2.5 / 5.0) and "split_async / sync: 0.500" in \
        table(rows, s3, "x.json")


@pytest.mark.parametrize("argv", [["--steps", "1"], ["--max-staleness", "-1"], ["--schedules", "split_async"],
                                  ["--devices", "4", "--rollout-split", "4"], ["--schedules", "sync", "fast"],
                                  ["--system", "sumer", "--schedules", "sync", "colocated_async"]])
def test_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "error:" in capsys.readouterr().err
