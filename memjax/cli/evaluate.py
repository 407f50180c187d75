"""`python -m memjax.evaluate [CONFIG.py] [--set key=value ...]`: MemAgent accuracy vs document length;
given a `SystemEvalConfig`, any registered system's held-out evaluation (System.evaluate, the same one
`memjax.train` runs before/during/after training) of a trained policy (`policy`: an HF directory such as
<train out_dir>/hf, or the system's initial model) -> results.json, traces.jsonl; or, given a `LocomoEvalConfig` (configs/locomo_<system>.py), a LoCoMo evaluation (memjax/evaluation/locomo.py:
F1 / BLEU-1 / J / M-Fail per category, predictions JSONL written as they finish, table and chart); or, given a
`LongMemEvalConfig` (configs/<paper>/longmemeval.py), a LongMemEval evaluation (memjax/evaluation/longmemeval.py).

Owns: the evaluation program (its configs live in memjax/cli/eval_config.py). For each N in `num_docs` it synthesises RULER-HotpotQA
contexts (memjax.data.hotpotqa) for the first `num_samples` questions, runs the MemAgent workflow, and
scores the last \\boxed{} answer with SQuAD sub-EM (the paper's accuracy; EM and F1 too). When
`baseline` is on and a context fits the engine window, the same model also answers from the full
context in one prompt (FULL_CONTEXT_TEMPLATE below, our wording) for comparison.
Writes to out_dir: results.json, results.md (score table like the paper's Table 2), accuracy.png,
traces.jsonl (memory after every chunk, final answer, scores). Results are written after every length
(results.json / results.md atomically, traces appended), so a failure at a later length loses nothing
finished; out_dir is locked for the run and the config is checked before the model loads. The CLI ends every
kind of evaluation by writing out_dir/report.html (memjax.report) and printing its path.
Several processes (`python -m memjax.launch --nproc N -- memjax.evaluate CONFIG`, or the JAX / SLURM / Open MPI
variables): every kind splits its held-out items over the processes (memjax/agents/heldout.py for workflows,
blocks of each length's questions and of the baseline prompts, LoCoMo by conversation), every process gets the
gathered one-process result, and process 0 alone takes the out_dir lock and writes the files and the report.
Nothing is downloaded: the model is an
HF directory (model.hf_path) or random weights of a preset, the data a HotpotQA JSON file (data_path).
"""

from __future__ import annotations

# The CLI only: the evaluations run from memjax/cli/evaluate_run.py and their configs come from memjax/cli/eval_config.py,
# imported when first used, so that bad arguments and a bad launch environment (memjax.parallel.startup.check_env)
# end before jax loads (tests/e2e/test_imports.py). `from memjax.evaluate import EvalConfig, evaluate` still works.

import sys

from ..config import run_cli
from ..lazy import exports, names

__getattr__, __dir__ = exports(globals(), {
    **names(".evaluate_run", "FULL_CONTEXT_TEMPLATE", "evaluate", "evaluate_and_report", "evaluate_system"),
    **names(".eval_config", "EvalConfig", "SystemEvalConfig")})


def _default_config():
    from .eval_config import EvalConfig

    return EvalConfig()


def _evaluate_and_report(cfg) -> dict:
    from .evaluate_run import evaluate_and_report

    return evaluate_and_report(cfg)


def main(argv: list[str] | None = None) -> int:
    from .check import check_evaluate
    from ..parallel.startup import check_env

    return run_cli("python -m memjax.evaluate", __doc__, argv, _default_config, _evaluate_and_report,
                   check=check_evaluate, precheck=check_env)


if __name__ == "__main__":
    sys.exit(main())
