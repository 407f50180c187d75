r"""`python -m memjax.evaluate [CONFIG.py] [--set key=value ...]`: held-out evaluation of a policy, by config type.

- MemAgent accuracy vs document length (the default): for each N in `num_docs`, RULER-HotpotQA contexts
  (memjax.data.hotpotqa) through the MemAgent workflow, scored by SQuAD sub-EM on the last \boxed{} answer (EM and
  F1 too); with `baseline`, the same model answers from the full context when it fits (FULL_CONTEXT_TEMPLATE).
  Writes results.json, results.md, accuracy.png and traces.jsonl after every length.
- `SystemEvalConfig`: any registered system's held-out evaluation (System.evaluate, as `memjax.train` runs it) of
  `policy` (an HF directory such as <train out_dir>/hf) -> results.json, traces.jsonl.
- `LocomoEvalConfig` (configs/locomo_<system>.py): LoCoMo, memjax/evaluation/locomo.py; `LongMemEvalConfig`
  (configs/<paper>/longmemeval.py): LongMemEval, memjax/evaluation/longmemeval.py.
Configs live in memjax/cli/eval_config.py. Every kind ends by writing out_dir/report.html and printing its path.
Invariants: the config is checked and out_dir locked before the model loads; finished work is written as it
completes, so a failure loses nothing finished; with several processes (memjax.launch) the held-out items are split,
every process gets the gathered result and process 0 alone writes. Nothing is downloaded. docs/evaluation.md.
"""

from __future__ import annotations

# The CLI only: the evaluations run from memjax/cli/evaluate_run.py and their configs come from memjax/cli/eval_config.py,
# imported when first used, so that bad arguments and a bad launch environment (memjax.parallel.startup.check_env)
# end before jax loads (tests/e2e/test_imports.py). `from memjax.evaluate import EvalConfig, evaluate` still works.
import sys

from ..core.cli import run_cli
from ..core.lazy import exports, names

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
    from ..parallel.startup import check_env
    from .check import check_evaluate

    return run_cli("python -m memjax.evaluate", __doc__, argv, _default_config, _evaluate_and_report,
                   check=check_evaluate, precheck=check_env)


if __name__ == "__main__":
    sys.exit(main())
