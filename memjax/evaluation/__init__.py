"""Evaluation harnesses above data/rewards/memory (never imported by them): LoCoMo scoring, tables and charts."""

from .locomo import LocomoEvalConfig, evaluate_locomo, score_table

__all__ = ["LocomoEvalConfig", "evaluate_locomo", "score_table"]
