"""MemAgent's length extrapolation, CI-sized (benchmarks/memagent/length_extrapolation.py,
docs/memagent.md, "Length extrapolation (tiny task)"): the shipped models only, no training.

The MemAgent warm start (memjax/systems/memagent/tiny/warmstart.py, supervised at 3 chunks) keeps its accuracy from 3 to 24 chunks
(8x the training length), while the full-context baseline of the same size (memjax/systems/memagent/tiny/full_context.py, the same
warm start supervised on one-prompt documents of 3 chunks) falls toward chance (1 of 16 places); greedy, on the
study's held-out questions (QUESTIONS one-hop + QUESTIONS two-hop at each length).
Measured (CPU; deterministic for these shipped weights on one device kind: the study's values,
benchmarks/results/memagent_length_extrapolation_cpu.json):
                       3 chunks            24 chunks
  MemAgent warm start  0.438 (1-hop 0.594)  0.438 (1-hop 0.625)
  full context         0.438 (1-hop 0.531)  0.094 (1-hop 0.125)
Thresholds at about half of each measured gap: full context loses >= 0.17 of its accuracy from 3 to 24 chunks
(measured 0.344); at 24 chunks MemAgent's accuracy is >= 0.17 above full context's (measured 0.344); MemAgent
loses at most 0.12 from 3 to 24 chunks (measured 0.000; one question of 64 is 0.016, the binomial std at 64
questions about 0.06). Another CPU may take other float paths: the margins are sized for that.
The RL-vs-shuffled comparison is in the study only: its two training runs take 4-10 minutes on 2 busy cores,
and its seed-1 gap at 24 chunks (0.06 mean accuracy) is too small for a CI margin (the docs page).
"""

from __future__ import annotations

import pytest

from benchmarks.memagent.length_extrapolation import eval_full_context, eval_memagent, memagent_engine

pytestmark = pytest.mark.e2e

QUESTIONS, LONG = 32, 24
MIN_FC_DROP, MIN_MEMAGENT_OVER_FC, MAX_MEMAGENT_DROP = 0.17, 0.17, 0.12


@pytest.mark.slow(seconds=51)  # two engines compiled, 64 questions x 2 lengths x 2 models: 51 s on 2 cores, load ~10
def test_memagent_keeps_its_accuracy_where_full_context_falls():
    from memjax.systems.memagent.tiny.full_context import load_baseline
    from memjax.systems.memagent.tiny.warmstart import load_warmstart

    warm, _ = load_warmstart(log=lambda m: None)
    mem = eval_memagent(memagent_engine(warm, QUESTIONS), warm, [3, LONG], QUESTIONS)
    fc = eval_full_context(load_baseline(log=lambda m: None)[0], [3, LONG], QUESTIONS, LONG)
    long = str(LONG)
    assert fc["3"]["accuracy"] - fc[long]["accuracy"] >= MIN_FC_DROP, fc
    assert mem[long]["accuracy"] - fc[long]["accuracy"] >= MIN_MEMAGENT_OVER_FC, (mem, fc)
    assert mem["3"]["accuracy"] - mem[long]["accuracy"] <= MAX_MEMAGENT_DROP, mem


def test_memory_retention_reads_the_trace():
    """`retention` finds the key's facts in the document and checks the memory after the right chunks."""
    from benchmarks.memagent.length_extrapolation import retention
    from memjax.systems.memagent.tiny.task import TaskConfig, make_sample

    two = make_sample(TaskConfig(num_chunks=12, multihop_frac=1.0), 2, 0)
    one = make_sample(TaskConfig(num_chunks=12, multihop_frac=0.0), 2, 1)
    teacher = [{"memories": s["memories"]} for s in (one, two)]
    assert retention([one, two], teacher) == {"hop1_written": 1.0, "hop1_kept_final": 1.0, "hop2_written": 1.0,
                                              "hop2_kept_to_second": 1.0, "hop2_other_before_second": 0.0,
                                              "hop2_second_written": 1.0, "hop2_both_final": 1.0}
    first = two["memories"][-1].split(" . ")[0] + " ."  # K in C
    dropped = [m.replace(first, "").strip() or "none" for m in two["memories"]]  # K in C never kept
    got = retention([one, two], [{"memories": ["none"] * 12}, {"memories": dropped}])
    assert got == {"hop1_written": 0.0, "hop1_kept_final": 0.0, "hop2_written": 0.0, "hop2_kept_to_second": 0.0,
                   "hop2_other_before_second": 0.0, "hop2_second_written": 0.0, "hop2_both_final": 0.0}
    c2 = next(i for i, m in enumerate(two["memories"]) if len(m.split(" . ")) > 1)  # chunk of `C in P`
    crowded = [f"{first} bob in rome ." if i == c2 - 1 else m for i, m in enumerate(two["memories"])]  # a distractor kept
    assert retention([two], [{"memories": crowded}])["hop2_other_before_second"] == 1.0
