"""`python -m memjax.launch --nproc 2 --devices-per-proc 2 -- memjax.evaluate CONFIG` (real jax.distributed
processes on CPU) gives the one-process result: each process runs its share of the held-out set and process 0
alone writes results.json / traces.jsonl / predictions.jsonl / report.html.

- the tiny MemAgent system (configs/memagent/tiny_eval.py, System.evaluate through memjax/agents/heldout.py): greedy and
  sampled accuracies, per-hop accuracies and the traces equal the one-process run's exactly (the sampled
  answers too: a request's seed comes from its global trajectory index, not from the process that ran it);
- LoCoMo (configs/locomo_answers.py on the fixture plus a third conversation, split sumer/validation): the conversations
  are dealt over the processes, the table and the counters equal the one-process ones, and every question is
  in predictions.jsonl exactly once;
- Memory-R1 on LoCoMo (configs/memory_r1/eval.py, memory_r1/test on two conversations, the engine scripted
  by tests/unit/evaluation/memory_r1_scripted.py): each process builds the memory banks of its conversation and
  answers its questions; the table, the counters and the banks equal the one-process ones, every question once
  in predictions.jsonl;
- the dealing itself (memjax/parallel/split.py): blocks cover the items in order, groups stay whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.parallel.split import block, deal_groups
from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH

# 3 launches of 2 real processes + 3 references (two compile their engine; Memory-R1's is scripted: 18 s):
# 106 + 18 s at load 8 on 2 cores
pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=125)]

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "data" / "locomo_fixture.json"


def _launch(args: list[str], module: str = "memjax.evaluate") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC",
                                                                      "JAX_PROCESS_ID", "SLURM_", "OMPI_"))}
    env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu")
    cmd = [sys.executable, "-m", "memjax.launch", "--nproc", "2", "--devices-per-proc", "2", "--",
           module, *args]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def test_dealing():
    for n in (0, 1, 5, 8):
        got = [block(n, p, 3) for p in range(3)]
        assert got[0][0] == 0 and got[-1][1] == n and all(a[1] == b[0] for a, b in zip(got, got[1:]))
        assert max(h - lo for lo, h in got) - min(h - lo for lo, h in got) <= 1
    keys = ["a", "a", "b", "c", "b", "a", "d"]
    masks = [deal_groups(keys, p, 2) for p in range(2)]
    assert masks[0] == [True, True, False, True, False, True, False]      # groups a, c: first seen 1st and 3rd
    assert [a != b for a, b in zip(*masks)] == [True] * len(keys)          # every item on exactly one process


def test_tiny_memagent_evaluation_two_processes(tmp_path):
    from memjax.cli import evaluate

    sets = ["--set", "agent.heldout_size=6", "--set", "agent.eval_samples=2"]
    assert evaluate.main([str(ROOT / "configs" / "memagent" / "tiny_eval.py"), *sets, "--set", f"out_dir={tmp_path / 'one'}"]) == 0
    p = _launch(["configs/memagent/tiny_eval.py", *sets, "--set", f"out_dir={tmp_path / 'two'}"])
    one, two = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "two"))
    assert one["metrics"] == two["metrics"] and set(one["metrics"]) >= {"accuracy", "accuracy_sampled"}
    assert 0 < one["metrics"]["accuracy_sampled"] < 1                    # sampled answers differ: seeds matter
    assert (tmp_path / "one" / "traces.jsonl").read_text() == (tmp_path / "two" / "traces.jsonl").read_text()
    lines = p.stdout.splitlines()
    assert any(x.startswith("[0] report:") for x in lines) and not any(x.startswith("[1] report:") for x in lines)


def test_locomo_evaluation_two_processes(tmp_path):
    from memjax.data.locomo import load_locomo
    from memjax.data.locomo_splits import split_questions
    from memjax.cli.evaluate import main as evaluate_main

    convs = json.loads(FIXTURE.read_text())     # a third conversation: the sumer split's validation part is two
    data = tmp_path / "locomo3.json"
    data.write_text(json.dumps(convs + [{**convs[0], "sample_id": "conv-99"}]))
    qs = split_questions(load_locomo(data), "sumer")["validation"]
    assert len({q.conversation for q in qs}) == 2                          # both processes get a conversation
    ans = tmp_path / "answers.jsonl"   # right, wrong and missing answers, so every column has something to show
    ans.write_text("".join(json.dumps({"qid": q.qid, "answer": q.answer if i % 3 == 0 else "no idea",
                                       "memory_dia_ids": list(q.evidence)[: i % 2]}) + "\n"
                           for i, q in enumerate(qs) if i % 4 != 3))
    sets = ["--set", f"data_path={data}", "--set", "split=sumer", "--set", "part=validation", "--set",
            f"answers={ans}", "--set", "batch_size=2"]
    cfg = "configs/locomo_answers.py"
    assert evaluate_main([str(ROOT / cfg), *sets, "--set", f"out_dir={tmp_path / 'one'}"]) == 0
    _launch([cfg, *sets, "--set", f"out_dir={tmp_path / 'two'}"])
    one, two = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "two"))
    assert one["table"] == two["table"] and one["counts"] == two["counts"] and one["table"]["overall"]["n"] == len(qs)
    assert 0 < one["table"]["overall"]["J"] < 100 and one["counts"]["no_answer"] > 0
    preds = [json.loads(x) for x in (tmp_path / "two" / "predictions.jsonl").read_text().splitlines()]
    assert sorted(r["qid"] for r in preds) == sorted(q.qid for q in qs)
    assert [r["qid"] for r in preds] != [q.qid for q in qs]     # rounds interleave the two processes' shares


def test_memory_r1_locomo_evaluation_two_processes(tmp_path):
    from memjax import Tokenizer
    from memjax.cli.evaluate import main as evaluate_main

    from tests.unit.systems.memory_r1.test_memory_r1_eval import model
    from scripted_engine import ScriptedEngine, engine_replaced

    convs = {c["sample_id"]: c for c in json.loads(FIXTURE.read_text())}   # test part: every conversation but
    data = tmp_path / "locomo_r1.json"                                     # conv-26 and conv-30
    data.write_text(json.dumps(list(convs.values()) + [{**convs["conv-26"], "sample_id": "conv-98"},
                                                       {**convs["conv-30"], "sample_id": "conv-99"}]))
    sets = [f"data_path={data}", "part=test", "embedder=hashbow", "max_prompt_tokens=1400", "batch_size=4"]
    sets = [a for s in sets for a in ("--set", s)]
    cfg = str(ROOT / "configs" / "memory_r1" / "eval.py")
    tok = Tokenizer.default()
    with engine_replaced(lambda m, c: ScriptedEngine(tok, model)):
        assert evaluate_main([cfg, *sets, "--set", f"out_dir={tmp_path / 'one'}"]) == 0
    _launch([cfg, *sets, "--set", f"out_dir={tmp_path / 'two'}"], module="tests.unit.evaluation.memory_r1_scripted")
    one, two = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "two"))
    assert one["table"] == two["table"] and one["counts"] == two["counts"]
    n = one["table"]["overall"]["n"]
    assert n > 2 and one["table"]["overall"]["M-Fail"] is not None
    preds = [json.loads(x) for x in (tmp_path / "two" / "predictions.jsonl").read_text().splitlines()]
    lines = (tmp_path / "one" / "predictions.jsonl").read_text().splitlines()
    ones = {r["qid"]: r for r in map(json.loads, lines)}
    assert len(preds) == n and {r["qid"] for r in preds} == set(ones)
    assert {r["qid"][:7] for r in preds} == {"conv-98", "conv-99"}
    for r in preds:
        assert r == ones[r["qid"]], r["qid"]
    assert len({r["prediction"] for r in preds}) > 2      # the scripted answers differ by question
    for c in ("conv-98", "conv-99"):                      # each built by one process, as one process builds it
        assert (tmp_path / "two" / "banks" / f"{c}.json").read_text() == \
            (tmp_path / "one" / "banks" / f"{c}.json").read_text()
