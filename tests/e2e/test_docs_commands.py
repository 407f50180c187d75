"""Every documented command runs: the `python -m memjax...`, `python -m benchmarks...` and `make ...`
commands of README.md, BUILD.md, docs/*.md (fenced blocks and inline code) and the configs' docstrings.

COMMANDS (below) names, per documented command as the docs spell it (whitespace normalised), what the test runs:
the command as typed with its placeholders replaced (PLACEHOLDERS: `/ckpt/...`, `...`, `PATH`, `DIR` -> a tiny
HF directory, the repository's data fixtures, a temporary folder) and then only small-scale arguments appended:
`--check` for the memjax CLIs (validate the config, build the system, resolve data paths and mesh, print what
would run, exit 0: GPU-sized runs), tiny shapes / a temporary output folder for benchmarks, `make -n` for the
make targets (what `make` would run; tests/e2e/test_demo.py runs the demo itself). The test checks that each row's
command begins with the documented one after substitution (nothing but the listed additions), that every
documented command has a row (new docs must be registered here) and that every row is still documented.
To register a command: add `"<the command as documented>": "<extra arguments>"` to COMMANDS (e.g.
`"python -m memjax.report OUT_DIR": ""` with `"OUT_DIR": "{tmp}/run"` in PLACEHOLDERS).
The `python -m` commands run four at a time, each in its own process forked from a server that has already imported
jax, flax, optax and numpy (tests/forked_cli.py: runpy as `python -m` runs a module, ~0.7 CPU-s less per command;
about a third of the CPU of fresh processes); `make -n` rows run as subprocesses. PARSE rows (the
slow benchmarks and warm starts) only parse their documented arguments: their own tests run them.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forked_cli import ForkedCLI

# every documented command: about 30 s alone on 2 cores
pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=50)]

REPO = Path(__file__).resolve().parents[2]
FIXTURES = "tests/fixtures/data"
CMD = re.compile(r"python -m (?:memjax|benchmarks)\b|make [a-z]")

# placeholder in the docs -> what the test passes ({hf}: a tiny random HF model dir, {tmp}: a temporary folder)
PLACEHOLDERS = {
    "model.hf_path=/ckpt/Qwen2.5-7B-Instruct": "model.hf_path={hf}",
    "model.hf_path=/path/to/Qwen2.5-7B-Instruct": "model.hf_path={hf}",
    "model.hf_path=/path/to/Qwen2.5-14B-Instruct": "model.hf_path={hf}",
    "model.hf_path=...": "model.hf_path={hf}",
    "/data/hotpot_train_v1.1.json": f"{FIXTURES}/hotpotqa_dev_excerpt.json",
    "/path/to/hotpot_train_v1.1.json": f"{FIXTURES}/hotpotqa_dev_excerpt.json",
    "hotpot_train.json": f"{FIXTURES}/hotpotqa_dev_excerpt.json",
    "/data/hotpot_dev.json": f"{FIXTURES}/hotpotqa_dev_excerpt.json",
    "hotpot_dev.json": f"{FIXTURES}/hotpotqa_dev_excerpt.json",
    "/path/to/locomo10.json": f"{FIXTURES}/locomo_fixture.json",
    "locomo10.json": f"{FIXTURES}/locomo_fixture.json",
    "agent.locomo_path=...": f"agent.locomo_path={FIXTURES}/locomo_fixture.json",
    "answers.jsonl": "{tmp}/answers.jsonl",
    "out/tiny/hf": "memjax/assets/tiny/warmstart",  # a tiny policy (the shipped warm start: the task's vocabulary)
    "out/demo/tiny/hf": "memjax/assets/tiny/warmstart",
    "--out DIR": "--out {tmp}/gpu_pass",
    "stats PATH": f"stats {FIXTURES}/locomo_fixture.json",
    "memjax.data.longmemeval stats PATH": f"memjax.data.longmemeval stats {FIXTURES}/longmemeval_fixture.json",
    "/path/to/longmemeval_s.json": f"{FIXTURES}/longmemeval_fixture.json",
    "longmemeval_s.json": f"{FIXTURES}/longmemeval_fixture.json",
    "/path/to/hypotheses.jsonl": "{tmp}/hypotheses.jsonl",
    "hypotheses.jsonl": "{tmp}/hypotheses.jsonl",
    "benchmarks.locomo_retrieval PATH": f"benchmarks.locomo_retrieval {FIXTURES}/locomo_fixture.json",
    "CONFIG.py": "configs/tiny.py",
    "CONFIG": "configs/tiny.py",
    "--devices N --hbm-gib G": "--devices 1 --hbm-gib 80",
    "agent.name=...": "agent.name=tiny",
    "{hf2orbax,orbax2hf,hf2hf,random} SRC DST": "random tiny {tmp}/convert_out",
    "[--set key=value ...]": "--set steps=1",
    "[--set mesh.fsdp=... ]": "--set mesh.fsdp=1",
    "[--set steps=60 --set seed=1 ...]": "--set steps=60 --set seed=1",
    "[--set seed=1 ...]": "--set seed=1",
    "[--set seed=1 --set ablation=shuffle_rewards ...]": "--set seed=1 --set ablation=shuffle_rewards",
    "[--dtype bfloat16]": "--dtype bfloat16",
    "/path/to/answers.jsonl": "{tmp}/answers.jsonl",
    "/path/to/answer_agent_hf": "{hf}",
    "[--set manager_hf_path=/path/to/manager_hf]": "--set manager_hf_path={hf}",
    "[--set distill=false]": "--set distill=false",
    "[--set policy=out/sumer/hf]": "--set policy={hf}",
    "[--set agent.frozen_hf_path=/path/to/stage1/hf]": "--set agent.frozen_hf_path={hf}",
    "/path/to/hotpot_dev_distractor_v1.json": f"{FIXTURES}/hotpotqa_dev_excerpt.json",
    "/data/memagent/eval": f"{FIXTURES}/memagent_layouts",
    "/data/memagent/hotpotqa_dev.json": f"{FIXTURES}/memagent_layouts/hotpot_docs.json",
    "/path/to/memagent_eval": f"{FIXTURES}/memagent_layouts",
    "/path/to/hotpotqa_dev.json": f"{FIXTURES}/memagent_layouts/hotpot_docs.json",
    "model.hf_path=/path/to/RL-MemAgent-7B": "model.hf_path={hf}",
    "agent.data.path=FILE": f"agent.data.path={FIXTURES}/memagent_layouts/train.parquet",
    # an OpenAI-compatible judge: optional parts are left out; where typed, --check resolves but never calls it
    "[--set judge=openai --set judge_url=http://host:8000/v1]": "",
    "[--set agent.judge=openai --set agent.judge_url=http://judge-host:8000/v1]": "",
    "http://HOST:8000/v1": "http://127.0.0.1:8000/v1",
    "--out runs/eval": "--out {tmp}/locomo_openai",
    "memjax.convert ...": "memjax.convert random tiny {tmp}/convert_dots",
    "memjax.evaluate ...": "memjax.evaluate configs/memagent/tiny_eval.py",
    "configs/memagent/train.py --set ...": f"configs/memagent/train.py --set model.hf_path={{hf}} --set agent.data.path="
                                     f"{FIXTURES}/hotpotqa_dev_excerpt.json --set agent.data.num_docs=20",
    "[--json]": "--json",
    "[--with-speaker]": "--with-speaker",
    "[--min-tokens 32 --max-tokens 96]": "--min-tokens 32 --max-tokens 96",
    "configs/<name>.py": "configs/sumer/train.py",
    "--hbm-gib G --json": "--hbm-gib 80 --json",
    "memjax.train ...": "memjax.train configs/tiny.py",
    "model.hf_path=/shared/ckpt/Qwen2.5-7B-Instruct": "model.hf_path={hf}",
    "/shared/data/hotpot_train_v1.1.json": f"{FIXTURES}/hotpotqa_dev_excerpt.json",
    "out_dir=/shared/runs/memagent7b": "out_dir={tmp}/memagent7b",
    "out_dir=out/tiny2": "out_dir={tmp}/tiny2",
    "OUT_DIR": "{tmp}/locomo_run",  # a LoCoMo evaluation the workspace fixture runs
    "out/demo/tiny": "{tmp}/locomo_run",
    "--screenshot docs/img/report_demo.png": "--screenshot {tmp}/report.png",
}

CHECK = "--check"  # memjax.train / memjax.evaluate: validate, build, resolve, print what would run, exit 0
# the LoCoMo fixture holds 2 conversations (conv-26, conv-30): the memory_r1 split's test part, a config's default, is
# empty there, which memjax.evaluate refuses; a part that has questions in the fixture is named instead
FIXTURE_PART = "--set split=sumer --set part=validation "
# --check parses the training data: Memory-R2 trains on conv-43 / conv-47 of its split, which the
# 2-conversation fixture lacks: its rows read the fixture's two conversations copied under LoCoMo's ten ids
# (written by the workspace fixture: every part of the split is there)
R2_TRAIN_DATA = "--set agent.locomo_path={tmp}/locomo_r2.json "
PARSE = "--help"  # the documented arguments are parsed (types, choices) before --help prints the usage and exits 0
B = "--out-dir {tmp}/bench"  # benchmarks write their result files here, never into benchmarks/results
SWEEP = "python -m benchmarks.rollout_throughput --mode sweep"  # the GPU sweep of docs/performance.md
SHAPE = "--dtype bfloat16 --prompt-len 1024 --window 2048 --decode-tokens 128"
# documented command -> arguments appended to it (after PLACEHOLDERS); "make -n" rows run `make -n TARGET...`
COMMANDS = {
    "make demo": "make -n",
    "make test": "make -n",
    "make test TEST_JOBS=0": "make -n",
    "make test-gpu": "make -n",
    "make check": "make -n",
    "make census": "make -n",
    "make clean": "make -n",
    # the warm starts train for about a minute even at one step (their evaluation); tests/unit/tiny and the papers'
    # tiny tests run them
    "python -m memjax.systems.memagent.tiny.warmstart": PARSE,
    "python -m memjax.systems.memory_r2.tiny.warmstart": PARSE,
    "python -m memjax.systems.memory_r2.tiny.warmstart --sessions 8 --facts-per-session 1 --steps 100 "
    "--out memjax/assets/tiny/r2_warmstart_s8": PARSE,
    "python -m memjax.train": f"--set agent.data.path={FIXTURES}/hotpotqa_dev_excerpt.json {CHECK}",
    "python -m memjax.train --help": "",
    "python -m memjax.train configs/tiny.py": CHECK,
    "python -m memjax.train configs/tiny.py --set agent.name=...": CHECK,
    "python -m memjax.train configs/tiny.py [--set steps=60 --set seed=1 ...]": CHECK,
    "python -m memjax.train configs/memagent/tiny_ppo.py [--set seed=1 ...]": CHECK,
    "python -m memjax.train configs/sumer/tiny.py [--set seed=1 --set ablation=shuffle_rewards ...]": CHECK,
    "python -m memjax.train CONFIG.py [--set key=value ...]": CHECK,
    "python -m memjax.train configs/memagent/train.py --set model.hf_path=... --set agent.data.path=hotpot_train.json":
        CHECK,
    "python -m memjax.train configs/memagent.py --set model.hf_path=... --set agent.data.path=hotpot_train.json":
        CHECK,
    "python -m memjax.train configs/memagent/train.py --set model.hf_path=/ckpt/Qwen2.5-7B-Instruct "
    "--set agent.data.path=/data/hotpot_train_v1.1.json": CHECK,
    "python -m memjax.train configs/memagent/train.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct "
    "--set agent.data.path=/path/to/hotpot_train_v1.1.json": CHECK,
    "python -m memjax.train configs/memagent/train_14b.py --set model.hf_path=/path/to/Qwen2.5-14B-Instruct "
    "--set agent.data.path=/path/to/hotpot_train_v1.1.json": CHECK,
    "python -m memjax.train configs/memory_r1/train_answer.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct "
    "--set agent.data_path=/path/to/locomo10.json [--set agent.frozen_hf_path=/path/to/stage1/hf]": CHECK,
    "python -m memjax.train configs/memory_r1/train_manager.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct "
    "--set agent.data_path=/path/to/locomo10.json": CHECK,
    "python -m memjax.train configs/memory_r1/tiny.py --set advantage.estimator=gae --set agent.group_size=1 "
    "--set prompts_per_step=128": CHECK,
    "python -m memjax.train configs/memory_r2/train.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct "
    "--set agent.locomo_path=/path/to/locomo10.json": R2_TRAIN_DATA + CHECK,
    "python -m memjax.train configs/memory_r2/train.py --set model.hf_path=... --set agent.locomo_path=...":
        R2_TRAIN_DATA + CHECK,
    "python -m memjax.train configs/memory_r2/smoke.py": R2_TRAIN_DATA + CHECK,
    "python -m memjax.train configs/memory_r2/smoke.py --set agent.locomo_path=/path/to/locomo10.json":
        R2_TRAIN_DATA + CHECK,
    "python -m memjax.train configs/memory_r2/tiny.py --set agent.logo=false --set agent.group_size=12": CHECK,
    "python -m memjax.train configs/memory_r2/tiny.py --set agent.task.facts_per_session=1 --set agent.task.sessions=8 "
    "--set agent.warmstart=memjax/assets/tiny/r2_warmstart_s8 --set agent.logo=false --set agent.group_size=12 "
    "--set agent.credit=outcome": CHECK,
    "python -m memjax.train configs/sumer/train.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct "
    "--set agent.data_path=/path/to/locomo10.json --set agent.judge_url=http://judge-host:8000/v1": CHECK,
    "python -m memjax.evaluate": f"--set data_path={FIXTURES}/hotpotqa_dev_excerpt.json --set num_docs=10,20 {CHECK}",
    "python -m memjax.evaluate ...": "--set agent.eval_samples=1 " + CHECK,
    "python -m memjax.convert ...": "",
    "python -m memjax.evaluate configs/memagent/tiny_eval.py": "--set agent.eval_samples=1 --set out_dir={tmp}/tiny_eval",
    # tests/e2e/systems/memagent/test_eval_cpu.py runs it to the end (about a minute)
    "python -m memjax.evaluate configs/memagent/eval_cpu.py": CHECK,
    "python -m memjax.evaluate configs/memagent/tiny_eval.py --set policy=out/tiny/hf": CHECK,
    "python -m memjax.evaluate configs/memagent/tiny_eval.py --set policy=out/demo/tiny/hf": CHECK,
    "python -m memjax.evaluate configs/memagent/tiny_eval.py --set agent.eval_lengths=3,6,12,24,48,96": CHECK,
    # the excerpt has 80 paragraphs and the fixture directory eval_8 / eval_12800: the lengths they hold
    "python -m memjax.evaluate configs/memagent/eval.py --set model.hf_path=... --set data_path=hotpot_dev.json":
        "--set num_docs=10,20 " + CHECK,
    "python -m memjax.evaluate configs/memagent/eval.py --set model.hf_path=... --set data_path=/data/hotpot_dev.json":
        "--set num_docs=10,20 " + CHECK,
    "python -m memjax.evaluate configs/memagent/eval.py --set model.hf_path=... --set data_path=/data/memagent/eval "
    "--set docs_path=/data/memagent/hotpotqa_dev.json": "--set num_docs=8,12800 " + CHECK,
    "python -m memjax.evaluate configs/memagent/eval.py --set model.hf_path=/path/to/RL-MemAgent-7B "
    "--set data_path=/path/to/memagent_eval --set docs_path=/path/to/hotpotqa_dev.json": "--set num_docs=8,12800 " + CHECK,
    "python -m memjax.evaluate configs/locomo_answers.py --set data_path=locomo10.json --set answers=answers.jsonl":
        "--set split=sumer --set part=validation --set out_dir={tmp}/locomo_answers",
    "python -m memjax.evaluate configs/locomo_answers.py --set data_path=/path/to/locomo10.json "
    "--set answers=/path/to/answers.jsonl [--set judge=openai --set judge_url=http://host:8000/v1]": FIXTURE_PART + CHECK,
    "python -m memjax.evaluate configs/memory_r1/eval.py --set data_path=/path/to/locomo10.json "
    "--set model.hf_path=/path/to/answer_agent_hf [--set manager_hf_path=/path/to/manager_hf] [--set distill=false] "
    "[--set judge=openai --set judge_url=http://host:8000/v1]": FIXTURE_PART + CHECK,
    "python -m memjax.evaluate configs/sumer/eval.py --set agent.data_path=/path/to/locomo10.json "
    "--set model.hf_path=/path/to/Qwen2.5-7B-Instruct [--set policy=out/sumer/hf] "
    "[--set agent.judge=openai --set agent.judge_url=http://judge-host:8000/v1]": CHECK,
    "python -m memjax.evaluation.locomo locomo10.json --split sumer --part validation --answers answers.jsonl "
    "--judge openai --judge-url http://HOST:8000/v1 --judge-model gpt-oss-120b --out runs/eval": "--check",
    "python -m memjax.data.locomo_stats stats locomo10.json": "",
    "python -m memjax.data.locomo_stats stats PATH": "",
    "python -m memjax.data.longmemeval stats PATH": "",
    "python -m memjax.evaluate configs/longmemeval_answers.py --set data_path=longmemeval_s.json "
    "--set answers=hypotheses.jsonl": CHECK,
    "python -m memjax.evaluate configs/memory_r1/longmemeval.py --set data_path=longmemeval_s.json "
    "--set model.hf_path=/path/to/answer_agent_hf --set judge=openai --set judge_url=http://HOST:8000/v1": CHECK,
    "python -m memjax.evaluate configs/longmemeval_answers.py --set data_path=/path/to/longmemeval_s.json "
    "--set answers=/path/to/hypotheses.jsonl [--set judge=openai --set judge_url=http://host:8000/v1]": CHECK,
    "python -m memjax.evaluate configs/memory_r1/longmemeval.py --set data_path=/path/to/longmemeval_s.json "
    "--set model.hf_path=/path/to/answer_agent_hf [--set manager_hf_path=/path/to/manager_hf] "
    "[--set judge=openai --set judge_url=http://host:8000/v1]": CHECK,
    **{f"python -m memjax.evaluate configs/{paper}/longmemeval.py --set data_path=/path/to/longmemeval_s.json "
       "--set model.hf_path=/path/to/Qwen2.5-7B-Instruct [--set judge=openai --set judge_url=http://host:8000/v1]":
       CHECK for paper in ("sumer", "memory_r2", "memagent")},
    # the tiny trained policies on the tiny-vocabulary fixture (tests/e2e/systems/test_tiny_longmemeval.py runs
    # them in full)
    **{f"python -m memjax.evaluate configs/{paper}/longmemeval_tiny.py": CHECK
       for paper in ("memagent", "sumer", "memory_r1", "memory_r2")},
    "python -m memjax.convert {hf2orbax,orbax2hf,hf2hf,random} SRC DST [--dtype bfloat16]": "",
    # the plan compiles the update program (a minute or more per config on CPU; tests/unit/run/test_plan.py runs it):
    # here --check resolves the config, model and mesh on the devices asked for
    "python -m memjax.plan configs/memagent/train.py": "--devices 8 --hbm-gib 80 " + CHECK,
    "python -m memjax.plan configs/memagent/train.py --devices 8 --hbm-gib 80 --json": CHECK,
    "python -m memjax.plan configs/memagent/train_14b.py --devices 8 --hbm-gib 141": CHECK,
    "python -m memjax.plan configs/<name>.py --devices 8 --hbm-gib G --json": CHECK,
    "python -m memjax.plan configs/memory_r1/train_answer.py --devices 8 --hbm-gib 80": CHECK,
    "python -m memjax.plan configs/memory_r1/train_manager.py --devices 8 --hbm-gib 80": CHECK,
    "python -m memjax.plan configs/memory_r2/train.py --devices 8 --hbm-gib 80": CHECK,
    "python -m memjax.plan configs/sumer/train.py --devices 8 --hbm-gib 80": CHECK,
    "python -m memjax.plan configs/memagent/train.py --hosts 4 --devices 8 --hbm-gib 80": CHECK,
    "python -m memjax.report OUT_DIR": "",
    "python -m memjax.run_agent": "--help",
    'python -m memjax.run_agent --system memagent --model tiny --docs tests/fixtures/agent/tiny_facts.txt -q "where is kim ?" --out out/agent/memagent': "",
    'python -m memjax.run_agent --system sumer --model tiny --conversation tests/fixtures/agent/tiny_conversation.json -q "where is bob ?" --out out/agent/sumer': "",
    'python -m memjax.run_agent --system memory_r1 --model tiny --conversation tests/fixtures/agent/tiny_conversation.json -q "where is bob ?" --out out/agent/memory_r1': "",
    'python -m memjax.run_agent --system memory_r2 --model tiny --conversation tests/fixtures/agent/tiny_conversation.json -q "where is bob ?" --out out/agent/memory_r2': "",
    # the screenshot needs a headless Chromium (tests/e2e/report/test_page.py runs it where one is installed)
    "python -m memjax.report out/demo/tiny --screenshot docs/img/report_demo.png --size 1280x2300": PARSE,
    # docs/run_agent.md's screenshots: tests/e2e/cli/test_run_agent.py runs --screenshot (a browser is needed)
    'python -m memjax.run_agent --system memagent --model out/demo/tiny/hf --docs tests/fixtures/agent/tiny_facts.txt '
    '-q "where is kim ?" -q "where is dan ?" --out out/agent/demo --screenshot docs/img/agent_memagent.png '
    '--size 1000x680': PARSE,
    'python -m memjax.run_agent --system memory_r2 --model tiny --conversation '
    'tests/fixtures/agent/tiny_conversation.json -q "where is bob ?" --out out/agent/memory_r2 '
    '--screenshot docs/img/agent_memory_r2.png --size 1000x580': PARSE,
    "python -m memjax.launch --nproc 2 --devices-per-proc 4 -- memjax.train configs/tiny.py --set steps=3 "
    "--set prompts_per_step=4 --set out_dir=out/tiny2": CHECK,
    "python -m memjax.launch --nproc 2 -- memjax.evaluate configs/memagent/tiny_eval.py": CHECK,
    "python -m memjax.train ...": CHECK,
    "python -m memjax.train configs/memagent/train.py --set model.hf_path=/shared/ckpt/Qwen2.5-7B-Instruct "
    "--set agent.data.path=/shared/data/hotpot_train_v1.1.json --set out_dir=/shared/runs/memagent7b": CHECK,
    "python -m memjax.train configs/tiny.py --set out_dir=out/tiny2": CHECK,
    "python -m memjax.plan CONFIG --devices N --hbm-gib G [--set mesh.fsdp=... ] [--json]": CHECK,
    "python -m memjax.plan CONFIG.py --devices N --hbm-gib G [--json]": CHECK,
    # benchmarks: memagent.flops_linearity and locomo_retrieval run (seconds); the others take minutes even at tiny shapes
    # on a shared 2-core machine (measured 20-150 s each), so here their documented arguments are parsed up to
    # --help (PARSE) and their own tests (tests/unit/benchmarks/, tests/e2e/benchmarks/) run them
    "python -m benchmarks.memagent.flops_linearity": f"--models tiny --min-k 8 --max-k 16 {B}",
    "python -m benchmarks.locomo_retrieval locomo10.json [--with-speaker]": "--out {tmp}/bench",
    "python -m benchmarks.locomo_retrieval PATH [--with-speaker]": "--out {tmp}/bench",
    "python -m benchmarks.forward_throughput": PARSE,
    "python -m benchmarks.memagent.linearity --repeats 3": PARSE,
    "python -m benchmarks.rollout_throughput": PARSE,
    "python -m benchmarks.rollout_throughput --mode token_budget --budgets 0 80": PARSE,
    "python -m benchmarks.kernel_memory": PARSE,
    "python -m benchmarks.pool_size": PARSE,
    "python -m benchmarks.engine_data_parallel": PARSE,
    "python -m benchmarks.multihost": PARSE,
    "python -m benchmarks.multihost --config configs/memagent/train.py --hosts 4 --devices 8 --hbm-gib 80": PARSE,
    "python -m benchmarks.chained_turns [--min-tokens 32 --max-tokens 96]": PARSE,
    "python -m benchmarks.attention_memory": PARSE,
    "python -m benchmarks.train_step --preset qwen2.5-1.5b": PARSE,
    "python -m benchmarks.paged_attention": PARSE,
    "python -m benchmarks.gpu_aot_rounds": PARSE,
    # the sampler's truncation pass: timed at a small vocabulary here; the H100 compile needs the CUDA plugin
    # (tests/e2e/benchmarks/test_gpu_aot.py runs it)
    "python -m benchmarks.sampler_truncation --batches 32 64 --iters 5": "--batches 2 --vocab 512 --iters 1 "
                                                                         "--json {tmp}/sampler.json",
    "python -m benchmarks.sampler_truncation --batches 32 256": "--batches 2 --vocab 512 --iters 1 --json {tmp}/s.json",
    "python -m benchmarks.sampler_truncation --aot": PARSE,
    "python -m benchmarks.greedy_match BEFORE.npy AFTER.npy": PARSE,
    "python -m benchmarks.memagent.ruler_hotpotqa_lengths": PARSE,
    # the engine options timed on a GPU (docs/performance.md); tests/*/benchmarks/ run the sweep at tiny shapes
    f"{SWEEP} --preset qwen2.5-1.5b {SHAPE} --batches 32 256 "
    "--greedy-tokens": PARSE,
    f"{SWEEP} --preset qwen2.5-1.5b {SHAPE} --batches 32 256 "
    "--engine kernels.layers=unrolled --engine kernels.fuse_projections=true --engine kernels.fuse_rope_kv=true --greedy-tokens": PARSE,
    f"{SWEEP} --preset qwen2.5-1.5b {SHAPE} --batches 32 256 "
    "--engine schedule=mixed --greedy-tokens": PARSE,
    f"{SWEEP} --preset qwen2.5-7b {SHAPE} --batches 256 "
    "--engine kv.kv_dtype=float8_e4m3fn": PARSE,
    f"{SWEEP} --preset qwen2.5-1.5b {SHAPE} --batches 32 256 "
    "--temperature 0.7 --top-p 0.95": PARSE,
    "python -m benchmarks.kernel_speed": PARSE,
    "python -m benchmarks.gpu_pass --out DIR": PARSE,
    "python -m benchmarks.gpu_pass --out DIR --only decode_1.5b decode_7b": PARSE,
    "python -m benchmarks.gpu_pass --out DIR --only memagent_28k": PARSE,
    "python -m benchmarks.gpu_pass --out DIR --only train_3b": PARSE,
    "python -m benchmarks.memory_r1.operations": PARSE,
    "python -m benchmarks.memory_r1.distill": PARSE,
    "python -m memjax.systems.memory_r1.tiny.answer_warmstart": PARSE,
    "python -m benchmarks.memory_r2.credit": PARSE,
    "python -m benchmarks.memory_r2.logo_seeds --sessions 8 --seeds 0 1 2 --arms logo grpo outcome --steps 12 "
    "--eval-every 2 "
    "--heldout 64 --jobs 2": PARSE,
    "python -m benchmarks.sumer.search_behaviour --steps 20": PARSE,
    "python -m benchmarks.memagent.length_extrapolation": PARSE,
    "python -m benchmarks.memagent.length_table --questions 1": PARSE,
    "python -m benchmarks.memagent.constant_memory": PARSE,
    "python -m memjax.train --set agent.data.path=FILE": CHECK,
    "python -m memjax.train configs/memagent/train.py --set agent.data.path=FILE --check": "",
    "python -m memjax.systems.memagent.tiny.full_context": PARSE,
    "python -m benchmarks.peers.generation --peer tunix": PARSE,
    "python -m benchmarks.peers.generation --peer trl": PARSE,
    "python -m benchmarks.peers.generation --peer easydel --repeats 2": PARSE,
    "python -m benchmarks.peers.grpo --peer tunix": PARSE,
    "python -m benchmarks.peers.grpo --peer trl": PARSE,
    "python -m benchmarks.sumer.search_behaviour --steps 10 --heldout 32 --seeds 0 1 2 3 4": PARSE,
    # the end-to-end driver and the scaling run minutes (tests/e2e/test_memagent_command.py runs both at tiny
    # scale); the deviceless compiles need the CUDA plugin (tests/e2e/benchmarks/test_gpu_aot.py)
    "make venv": "make -n",
    "make lock": "make -n",
    "make venv CUDA_AOT=0": "make -n",
    "python -m benchmarks.e2e_memagent --scale 1.5b --out DIR --prompts 1 --steps 3 --attention cudnn": PARSE,
    "python -m benchmarks.scale_7b RUN_DIR": PARSE,
    "python -m benchmarks.schedule_sim": PARSE,
    "python -m benchmarks.step_model benchmarks/results/plan_memagent_7b_8x80_aot-h100.json --plan-32 "
    "benchmarks/results/plan_memagent_7b_4x8x80_aot-h100.json": PARSE,  # tests/unit/benchmarks/test_step_model.py
    "python -m benchmarks.step_model --all --markdown --json benchmarks/results/step_model_all_aot-h100-h200.json":
        PARSE,  # writes a tracked result; tests/unit/benchmarks/test_step_model.py runs --all into a temporary file
    "python -m benchmarks.async_schedules --seeds 0 1 2 --steps 8 --devices 8 --rollout-split 4 --out-dir /tmp/validate": PARSE,
    "python -m benchmarks.schedule_sim_validate --measured /tmp/validate/async_schedules_cpu.json --json "
    "benchmarks/results/schedule_sim_validation_cpu.json": PARSE,
    "python -m benchmarks.schedule_sim_validate --measured benchmarks/results/schedule_sim_validation_cpu.json": PARSE,
    "python -m benchmarks.async_schedules --system sumer --seeds 0 1 2 --steps 8 --devices 8 --rollout-split 4 "
    "--out-dir /tmp/validate": PARSE,
    "python -m benchmarks.schedule_sim_validate --measured /tmp/validate/async_schedules_sumer_cpu.json --json "
    "benchmarks/results/schedule_sim_validation_sumer_cpu.json": PARSE,
    "python -m benchmarks.async_schedules --seeds 0 1 2 --steps 8 --devices 8 --rollout-split 4 --out-dir benchmarks/results": PARSE,
    "python -m benchmarks.async_schedules --system sumer --seeds 0 1 2 --steps 8 --devices 8 --rollout-split 4 --out-dir benchmarks/results": PARSE,
    "python -m benchmarks.e2e_memagent --scale tiny --out /tmp/e2e --steps 2": PARSE,  # tests/e2e/test_memagent_command.py runs the command
    "python -m benchmarks.gpu_aot --train-step": PARSE,
    # tests/e2e/benchmarks/test_kv_fp8_gap.py runs its main() small; tests/e2e/benchmarks/test_gpu_aot.py compiles the float8 loop
    "python -m benchmarks.kv_fp8_gap": PARSE,
    "python -m benchmarks.kv_fp8_gap --preset qwen2.5-0.5b --prompts 4 --prompt-len 256 --max-tokens 32": PARSE,
    "python -m benchmarks.gpu_aot --attention pallas --kv-dtype float8_e4m3fn": PARSE,
    "python -m benchmarks.gpu_aot --train-step --preset qwen2.5-1.5b --slots 8 --window 8192": PARSE,
    "python -m benchmarks.gpu_aot --preset qwen2.5-1.5b --slots 256 --window 8192 --page-size 64": PARSE,
}


# ---------------------------------------------------------------- collecting the documented commands
def _cut(segment: str) -> str:
    """A command ends at a comment, a parenthesised note or the end of its code span; a sentence's full stop goes."""
    segment = re.split(r"\s#|\s\(|`", segment)[0].strip()
    return re.sub(r"(?<!\.)\.$", "", " ".join(segment.split()))


def _from_code(lines: list[str]) -> list[str]:
    out = []
    for i, line in enumerate(lines):
        for m in CMD.finditer(line):
            seg, j = line[m.start():], i
            while seg.rstrip().endswith("\\") and j + 1 < len(lines):  # shell continuation lines
                j += 1
                seg = seg.rstrip()[:-1] + " " + lines[j].strip()
            out.append(_cut(seg))
    return out


def _markdown(text: str) -> list[str]:
    code, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            code.append(line)
        else:
            code += re.findall(r"`([^`]+)`", line)
    return _from_code(code)


def documented_commands() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in [REPO / "README.md", REPO / "BUILD.md", *sorted((REPO / "docs").glob("*.md"))]:
        for c in _markdown(f.read_text()):
            found.setdefault(c, []).append(f.relative_to(REPO).as_posix())
    for f in sorted((REPO / "configs").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(f.read_text())) or ""
        for c in _from_code(doc.splitlines()):
            found.setdefault(c, []).append(f.relative_to(REPO).as_posix())
    return found


def substitute(command: str) -> str:
    for k in sorted(PLACEHOLDERS, key=len, reverse=True):  # longest first: `CONFIG.py` before `CONFIG`
        command = re.sub(rf"(?<![\w/.]){re.escape(k)}(?![\w/])", PLACEHOLDERS[k].replace("\\", r"\\"), command)
    return command


def resolved(command: str, extra: str) -> str:
    if extra.startswith("make -n"):
        return "make -n " + command.removeprefix("make ") + extra.removeprefix("make -n")
    return f"{substitute(command)} {extra}".strip()


# ---------------------------------------------------------------- the tests
def test_the_collector_reads_code_only():
    text = "Run `python -m memjax.train configs/x.py --set a=1`.\nprose python -m memjax.nope\n```bash\n" \
           "python -m benchmarks.b --n 1 \\\n    --m 2   # note\nmake demo\n```\n"
    assert _markdown(text) == ["python -m memjax.train configs/x.py --set a=1", "python -m benchmarks.b --n 1 --m 2",
                               "make demo"]


def test_every_documented_command_has_a_row_and_every_row_is_documented():
    docs = documented_commands()
    missing = sorted(set(docs) - set(COMMANDS))
    stale = sorted(set(COMMANDS) - set(docs))
    assert not missing, "documented commands no test runs (add them to COMMANDS):\n" + "\n".join(
        f"  {c!r}  ({', '.join(sorted(set(docs[c])))})" for c in missing)
    assert not stale, "COMMANDS rows no document has any more (remove them):\n" + "\n".join(f"  {c!r}" for c in stale)


def test_rows_add_only_placeholder_values_and_small_scale_arguments():
    for command, extra in COMMANDS.items():
        run = resolved(command, extra)
        if extra.startswith("make -n"):
            assert run.split()[2:] == command.split()[1:], command
            continue
        left = [t for t in ("...", " SRC ", " DST ", "CONFIG", " DIR", " PATH", "[") if t in f" {substitute(command)} "]
        assert not left, f"{command!r}: placeholders without a PLACEHOLDERS value: {left}"
        assert run.startswith(substitute(command)), command


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docs_commands")
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
    hf = tmp / "hf"
    p = subprocess.run([sys.executable, "-m", "memjax.convert", "random", "tiny-qwen-vocab", str(hf)], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    qids = [q["qid"] for q in _fixture_questions()]  # every question answered (a partial file is refused)
    (tmp / "answers.jsonl").write_text("".join(json.dumps({"qid": q, "answer": "x"}) + "\n" for q in qids))
    two = json.loads((REPO / FIXTURES / "locomo_fixture.json").read_text())
    ids = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48", "conv-49", "conv-50")
    r2 = [dict(json.loads(json.dumps(two[i % 2])), sample_id=sid) for i, sid in enumerate(ids)]  # every split part
    (tmp / "locomo_r2.json").write_text(json.dumps(r2))
    lme = json.loads((REPO / FIXTURES / "longmemeval_fixture.json").read_text())  # a hypothesis per question
    (tmp / "hypotheses.jsonl").write_text("".join(json.dumps({"question_id": q["question_id"], "hypothesis": "a beagle"})
                                                  + "\n" for q in lme))
    p = subprocess.run([sys.executable, "-m", "memjax.evaluate", "configs/locomo_answers.py", "--set",
                        f"data_path={FIXTURES}/locomo_fixture.json", "--set", f"answers={tmp}/answers.jsonl", "--set",
                        "split=sumer", "--set", "part=validation", "--set",
                        f"out_dir={tmp}/locomo_run"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr  # the run directory `memjax.report OUT_DIR` opens
    return tmp, hf, env


def _fixture_questions():
    from memjax.data.locomo import load_locomo

    data = load_locomo(REPO / FIXTURES / "locomo_fixture.json")
    return [{"qid": q.qid} for c in data.conversations for q in c.questions]


def _run(argv: list[str], env: dict) -> tuple[int, str, float]:
    import time

    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout + p.stderr, time.perf_counter() - t0


def test_every_documented_command_runs(workspace):
    tmp, hf, env = workspace
    jobs = {}
    for command, extra in COMMANDS.items():
        text = resolved(command, extra).replace("{tmp}", str(tmp)).replace("{hf}", str(hf))
        argv = shlex.split(text)
        if argv[0] == "python":
            argv[0] = sys.executable
        jobs[command] = argv
    modules = [c for c, a in jobs.items() if a[1:2] == ["-m"]]  # forked from a server that has imported jax & co
    with ForkedCLI(env, REPO) as cli:  # closed, the server reaps the commands: their CPU time is this module's
        results = dict(zip(modules, cli.run_all([jobs[c] for c in modules], jobs=4)))
    results.update({c: _run(a, env) for c, a in jobs.items() if c not in results})  # `make -n`
    results = {c: (rc, out[-1500:], dt) for c, (rc, out, dt) in results.items()}
    failed = [f"{c!r} -> {shlex.join(jobs[c])}: exit {rc}\n{out}" for c, (rc, out, _) in results.items() if rc != 0]
    slowest = sorted(((dt, c) for c, (_, _, dt) in results.items()), reverse=True)[:5]
    print("slowest:", "; ".join(f"{dt:.1f}s {c}" for dt, c in slowest))
    assert not failed, f"{len(failed)} of {len(jobs)} documented commands failed:\n" + "\n\n".join(failed)
    checked = [c for c, e in COMMANDS.items() if e.endswith(CHECK)]
    assert all("check: ok" in results[c][1] for c in checked), [c for c in checked if "check: ok" not in results[c][1]]
