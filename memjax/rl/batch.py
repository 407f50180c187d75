"""RolloutBatch: the (group, conversation, token) training layout shared by every algorithm.

Owns: the container agent workflows fill and trainers consume, and its builder from per-conversation
records. One row per conversation (a MemAgent memory update, a final answer turn, a tool-use turn...),
left-aligned and right-padded to T tokens:
  input_ids   int32 [N, T]  prompt ids then response ids, pad_id after
  loss_mask   f32   [N, T]  1 on response tokens the policy generated (tool outputs / prompts: 0)
  old_logp    f32   [N, T]  rollout log-prob of token t at position t (0 where loss_mask is 0)
  ref_logp    f32   [N, T]  reference-model log-probs (filled by the trainer), or None
  lengths     int32 [N]     valid tokens per row (prompt + response)
  prompt_len  int32 [N]
Per-conversation metadata (int32 [N]): sample (trajectory index), group (GRPO group: the question),
turn (0-based turn within the trajectory), step (Memory-R2 step id; = turn by default), role
(workflow-defined: e.g. 0 memory update, 1 final answer), is_final (bool).
Per-sample (S trajectories): reward f32 [S], sample_group int32 [S].
Token log-prob alignment: old_logp[i, t] scores input_ids[i, t] given input_ids[i, :t], so the
trainer compares it with log_softmax(logits[i, t - 1])[input_ids[i, t]].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True)
class Conversation:
    """One conversation of one trajectory, as a workflow records it."""

    prompt_ids: Sequence[int]
    response_ids: Sequence[int]
    response_logprobs: Sequence[float]
    sample: int
    group: int
    turn: int
    role: int = 0
    is_final: bool = False
    step: int | None = None
    response_mask: Sequence[int] | None = None  # default: all response tokens are trained on

    def __post_init__(self):
        if len(self.response_logprobs) != len(self.response_ids):
            raise ValueError(f"Conversation(sample={self.sample}, turn={self.turn}): {len(self.response_ids)} "
                             f"response ids but {len(self.response_logprobs)} log-probs")
        if self.response_mask is not None and len(self.response_mask) != len(self.response_ids):
            raise ValueError(f"Conversation(sample={self.sample}, turn={self.turn}): response_mask length "
                             f"{len(self.response_mask)} != {len(self.response_ids)} response ids")


@dataclass(frozen=True)
class RolloutBatch:
    input_ids: np.ndarray
    loss_mask: np.ndarray
    old_logp: np.ndarray
    lengths: np.ndarray
    prompt_len: np.ndarray
    sample: np.ndarray
    group: np.ndarray
    turn: np.ndarray
    step: np.ndarray
    role: np.ndarray
    is_final: np.ndarray
    reward: np.ndarray  # [S]
    sample_group: np.ndarray  # [S]
    ref_logp: np.ndarray | None = None
    info: dict = field(default_factory=dict, compare=False)

    @property
    def num_rows(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_samples(self) -> int:
        return int(self.reward.shape[0])

    def replace(self, **changes) -> "RolloutBatch":
        return replace(self, **changes)

    def row_reward(self) -> np.ndarray:
        """The sample reward broadcast to its conversations, f32 [N]."""
        return self.reward[self.sample]

    def select_samples(self, keep: np.ndarray) -> "RolloutBatch":
        """Keep the rows of the samples where keep[s] (bool [S]); samples are renumbered 0..S'-1."""
        keep = np.asarray(keep, bool)
        new_id = np.cumsum(keep) - 1
        rows = keep[self.sample]
        arrays = {k: getattr(self, k)[rows] for k in ("input_ids", "loss_mask", "old_logp", "lengths",
                                                       "prompt_len", "group", "turn", "step", "role", "is_final")}
        ref = None if self.ref_logp is None else self.ref_logp[rows]
        return replace(self, **arrays, sample=new_id[self.sample[rows]].astype(np.int32), ref_logp=ref,
                       reward=self.reward[keep], sample_group=self.sample_group[keep])


def build_batch(convs: Sequence[Conversation], rewards: Sequence[float], sample_groups: Sequence[int], *,
                pad_id: int = 0, pad_to_multiple: int = 1, max_len: int | None = None) -> RolloutBatch:
    """Pad conversations into a RolloutBatch. T = longest row rounded up to pad_to_multiple."""
    if not convs:
        raise ValueError("build_batch: no conversations")
    s = len(rewards)
    if len(sample_groups) != s:
        raise ValueError(f"build_batch: {len(sample_groups)} sample groups for {s} rewards")
    lens = [len(c.prompt_ids) + len(c.response_ids) for c in convs]
    t = max(lens)
    t = -(-t // pad_to_multiple) * pad_to_multiple
    if max_len is not None and max(lens) > max_len:
        raise ValueError(f"build_batch: a conversation has {max(lens)} tokens > max_len={max_len}")
    n = len(convs)
    ids = np.full((n, t), pad_id, np.int32)
    mask = np.zeros((n, t), np.float32)
    logp = np.zeros((n, t), np.float32)
    meta = {k: np.zeros(n, np.int32) for k in ("sample", "group", "turn", "step", "role")}
    final = np.zeros(n, bool)
    for i, c in enumerate(convs):
        p, r = len(c.prompt_ids), len(c.response_ids)
        if not 0 <= c.sample < s:
            raise ValueError(f"build_batch: conversation {i} has sample={c.sample} outside [0, {s})")
        ids[i, :p] = c.prompt_ids
        ids[i, p:p + r] = c.response_ids
        mask[i, p:p + r] = 1.0 if c.response_mask is None else np.asarray(c.response_mask, np.float32)
        logp[i, p:p + r] = np.asarray(c.response_logprobs, np.float32) * mask[i, p:p + r]
        meta["sample"][i], meta["group"][i], meta["turn"][i] = c.sample, c.group, c.turn
        meta["step"][i] = c.turn if c.step is None else c.step
        meta["role"][i], final[i] = c.role, c.is_final
    return RolloutBatch(input_ids=ids, loss_mask=mask, old_logp=logp, lengths=np.asarray(lens, np.int32),
                        prompt_len=np.asarray([len(c.prompt_ids) for c in convs], np.int32), is_final=final,
                        reward=np.asarray(rewards, np.float32), sample_group=np.asarray(sample_groups, np.int32),
                        **meta)
