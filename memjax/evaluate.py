"""`python -m memjax.evaluate`: the command's name; the command is memjax/cli/evaluate.py. `from memjax.evaluate
import EvalConfig, evaluate` (what config files and scripts import) resolves each name on first use."""
from .cli.evaluate import main
from .core.lazy import exports, names

__getattr__, __dir__ = exports(globals(), {
    **names(".cli.evaluate_run", "FULL_CONTEXT_TEMPLATE", "evaluate", "evaluate_and_report", "evaluate_system"),
    **names(".cli.eval_config", "EvalConfig", "SystemEvalConfig")})

if __name__ == "__main__":
    raise SystemExit(main())
