"""Evaluation harnesses above data/rewards/memory (never imported by them): LoCoMo scoring, tables and charts."""

from .engine_judge import EngineJudge
from .locomo import LocomoEvalConfig, run_locomo_eval
from .locomo_harness import evaluate_locomo
from .locomo_table import score_table

__all__ = ["EngineJudge", "LocomoEvalConfig", "evaluate_locomo", "run_locomo_eval", "score_table"]
