"""memjax.rl: the RolloutBatch training layout, advantages, losses, DAPO extras, the trainer."""

from . import advantages, dapo, estimators, losses
from .advantages import (ADV_NORMS, AdvantageConfig, broadcast_to_tokens, compute_advantages, grpo_advantages,
                         trajectory_row_weight)
from .batch import FIELDS, Conversation, RolloutBatch, build_batch, pad_rows_tokens
from .dapo import DynamicSampler, concat_batches, filter_groups, overlong_penalty
from .losses import (AGG_MODES, KL_ESTIMATORS, agg_denominator, agg_loss, agg_parts, combine_parts, kl_penalty,
                     policy_loss, policy_loss_parts, value_loss, value_loss_parts)

__all__ = ["advantages", "dapo", "estimators", "losses", "ADV_NORMS", "AdvantageConfig", "broadcast_to_tokens",
           "compute_advantages", "grpo_advantages", "trajectory_row_weight", "Conversation", "RolloutBatch",
           "build_batch", "FIELDS", "pad_rows_tokens", "DynamicSampler", "concat_batches", "filter_groups",
           "overlong_penalty", "AGG_MODES",
           "KL_ESTIMATORS", "agg_denominator", "agg_loss", "agg_parts", "combine_parts", "kl_penalty",
           "policy_loss", "policy_loss_parts", "value_loss", "value_loss_parts"]
