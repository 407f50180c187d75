"""memjax.rl: the RolloutBatch training layout, advantages, losses, the train step and loop."""

from .batch import Conversation, RolloutBatch, build_batch

__all__ = ["Conversation", "RolloutBatch", "build_batch"]
