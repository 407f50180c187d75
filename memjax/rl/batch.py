"""RolloutBatch: the (group, conversation, token) training layout shared by every algorithm.

Owns the container agent workflows fill and trainers consume, and its builder from per-conversation records. One
row per conversation (a MemAgent memory update, a final answer turn, a tool-use turn...), left-aligned and
right-padded to T tokens: token fields [N, T] (input_ids int32, loss_mask f32 ...), row fields [N] and sample
fields [S] (S trajectories); `RolloutBatch`'s docstring describes every field.
FIELDS is the one table of fields (name -> Field(kind, dtype, pad value, optional)); every operation on a batch
(select_samples, concat_batches, pad_rows_tokens) walks it, so a new field is added in one place.
Invariants: numpy only (workflows build it below the trainer's stage); optional fields are None unless an
algorithm or rollout fills them, and rows that leave one out get its pad value; group-id fields (group,
sample_group, local_group) are renumbered by concatenation; old_logp[i, t] scores input_ids[i, t] given
input_ids[i, :t], so the trainer compares it with log_softmax(logits[i, t - 1])[input_ids[i, t]].
docs/async.md has the policy-version fields (version, behaviour_logp).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np


class Field(NamedTuple):
    kind: str  # "token" [N, T], "row" [N], "sample" [S]
    dtype: type
    pad: float = 0  # value of padded tokens / rows (input_ids: the batch's pad_id instead)
    optional: bool = False


FIELDS: dict[str, Field] = {
    "input_ids": Field("token", np.int32), "loss_mask": Field("token", np.float32),
    "old_logp": Field("token", np.float32), "ref_logp": Field("token", np.float32, optional=True),
    "advantages": Field("token", np.float32, optional=True), "values": Field("token", np.float32, optional=True),
    "returns": Field("token", np.float32, optional=True),
    "lengths": Field("row", np.int32), "prompt_len": Field("row", np.int32), "sample": Field("row", np.int32),
    "group": Field("row", np.int32), "turn": Field("row", np.int32), "step": Field("row", np.int32),
    "role": Field("row", np.int32), "is_final": Field("row", np.bool_),
    "row_advantage": Field("row", np.float32, optional=True), "row_weight": Field("row", np.float32, optional=True),
    "policy": Field("row", np.int32, optional=True),
    "local_group": Field("row", np.int32, -1, optional=True), "snapshot": Field("row", np.int32, -1, optional=True),
    "temperature": Field("row", np.float32, 1.0, optional=True),
    "unit": Field("row", np.int32, -1, optional=True), "unit_reward": Field("row", np.float32, optional=True),
    "version": Field("token", np.int32, -1, optional=True),
    "behaviour_logp": Field("token", np.float32, optional=True),
    "reward": Field("sample", np.float32), "sample_group": Field("sample", np.int32),
}
GROUP_FIELDS = ("group", "sample_group", "local_group")


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
    extra: Mapping[str, float] | None = None  # optional row fields of FIELDS (e.g. local_group, unit_reward)
    response_versions: Sequence[int] | None = None  # policy version of each response token (async rollouts)

    def __post_init__(self):
        if len(self.response_logprobs) != len(self.response_ids):
            raise ValueError(f"Conversation(sample={self.sample}, turn={self.turn}): {len(self.response_ids)} "
                             f"response ids but {len(self.response_logprobs)} log-probs")
        if self.response_mask is not None and len(self.response_mask) != len(self.response_ids):
            raise ValueError(f"Conversation(sample={self.sample}, turn={self.turn}): response_mask length "
                             f"{len(self.response_mask)} != {len(self.response_ids)} response ids")
        if self.response_versions is not None and len(self.response_versions) != len(self.response_ids):
            raise ValueError(f"Conversation(sample={self.sample}, turn={self.turn}): response_versions length "
                             f"{len(self.response_versions)} != {len(self.response_ids)} response ids")
        for k in self.extra or ():
            if k not in FIELDS or FIELDS[k].kind != "row" or not FIELDS[k].optional:
                raise ValueError(f"Conversation(sample={self.sample}, turn={self.turn}): extra field {k!r} is not "
                                 f"an optional row field of RolloutBatch")


@dataclass(frozen=True)
class RolloutBatch:
    """The training batch: one row per conversation, left-aligned and right-padded to T tokens.

    Token fields [N, T]: input_ids int32 (prompt ids then response ids, pad_id after); loss_mask f32 (1 on response
    tokens the policy generated; tool outputs and prompts 0); old_logp f32 (rollout log-prob of token t at position
    t, 0 where loss_mask is 0); ref_logp f32 (reference-model log-probs, filled by the trainer) or None.
    Row fields [N]: lengths int32 (valid tokens, prompt + response), prompt_len int32, and the per-conversation
    metadata (int32): sample (trajectory index), group (GRPO group: the question), turn (0-based turn within the
    trajectory), step (Memory-R2 step id; = turn by default), role (workflow-defined, e.g. 0 memory update, 1 final
    answer), is_final (bool).
    Sample fields [S]: reward f32, sample_group int32.
    Optional fields (None unless an algorithm fills them): advantages f32 [N, T] (per token), values f32 [N, T]
    (critic), returns f32 [N, T]; row_advantage f32 [N] (per row, e.g. step-level losses), row_weight f32 [N] (loss
    weight of a row in the aggregation, e.g. 1 / conversations of its trajectory), policy int32 [N] (policy / role-model
    id), local_group int32 [N] (LoGo-GRPO local group, -1 = none), snapshot int32 [N] (memory-snapshot id a re-rollout
    started from, -1 = none), temperature f32 [N] (sampling temperature of the row), unit int32 [N] (credit unit within
    the row's sample: rows sharing (sample, unit) share one reward and one advantage, e.g. one role's calls in one
    Memory-R2 session; -1 = none), unit_reward f32 [N] (the reward of the row's unit). A workflow sets optional row
    fields through `Conversation.extra`.
    Policy versions (optional token fields, None unless a rollout recorded them): version int32 [N, T] is the policy
    version (updates applied to the sampling weights) that sampled token t, -1 where loss_mask is 0; behaviour_logp
    f32 [N, T] is the engine's log-prob of that token, kept when the trainer replaces old_logp with its recomputed
    (proximal) log-probs. Without them a batch is synchronous (`token_versions`, `with_behaviour`).
    """
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
    advantages: np.ndarray | None = None
    values: np.ndarray | None = None
    returns: np.ndarray | None = None
    row_advantage: np.ndarray | None = None
    row_weight: np.ndarray | None = None
    policy: np.ndarray | None = None
    local_group: np.ndarray | None = None
    snapshot: np.ndarray | None = None
    temperature: np.ndarray | None = None
    unit: np.ndarray | None = None
    unit_reward: np.ndarray | None = None
    version: np.ndarray | None = None
    behaviour_logp: np.ndarray | None = None
    info: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        n, s = self.input_ids.shape[0], self.reward.shape[0]
        for name, f in FIELDS.items():
            a = getattr(self, name)
            if a is None:
                if not f.optional:
                    raise ValueError(f"RolloutBatch.{name} is required")
                continue
            want = {"token": (n, self.input_ids.shape[1]), "row": (n,), "sample": (s,)}[f.kind]
            if a.shape != want:
                raise ValueError(f"RolloutBatch.{name} has shape {a.shape}, expected {want}")

    def arrays(self, kind: str | None = None) -> dict[str, np.ndarray]:
        """The fields that are set (of one kind: "token", "row" or "sample"), in FIELDS order."""
        return {k: getattr(self, k) for k, f in FIELDS.items()
                if (kind is None or f.kind == kind) and getattr(self, k) is not None}

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

    def token_versions(self, step_version: int) -> np.ndarray:
        """int32 [N, T]: each token's policy version; a batch without `version` is synchronous (every trained
        token of `step_version`, -1 elsewhere)."""
        if self.version is not None:
            return self.version
        return np.where(self.loss_mask > 0, np.int32(step_version), np.int32(-1)).astype(np.int32)

    def with_behaviour(self) -> "RolloutBatch":
        """The batch with behaviour_logp set (from old_logp when unset: call before old_logp is recomputed)."""
        return self if self.behaviour_logp is not None else replace(self, behaviour_logp=self.old_logp.copy())

    def select_samples(self, keep: np.ndarray) -> "RolloutBatch":
        """Keep the rows of the samples where keep[s] (bool [S]); samples are renumbered 0..S'-1."""
        keep = np.asarray(keep, bool)
        new_id = np.cumsum(keep) - 1
        rows = keep[self.sample]
        out = {k: a[keep] if FIELDS[k].kind == "sample" else a[rows] for k, a in self.arrays().items()}
        out["sample"] = new_id[self.sample[rows]].astype(np.int32)
        return replace(self, **out)


def build_batch(convs: Sequence[Conversation], rewards: Sequence[float], sample_groups: Sequence[int], *,
                pad_id: int = 0, pad_to_multiple: int = 1, max_len: int | None = None,
                version: int | None = None) -> RolloutBatch:
    """Pad conversations into a RolloutBatch. T = longest row rounded up to pad_to_multiple.
    Versions: when `version` is given or any conversation has response_versions, the batch gets `version`
    (a conversation's response_versions, else `version` on every trained token; -1 elsewhere) and
    behaviour_logp (the engine's log-probs, equal to old_logp as built); otherwise neither is set."""
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
    extra = {k: np.full(n, FIELDS[k].pad, FIELDS[k].dtype) for k in dict.fromkeys(
        k for c in convs for k in (c.extra or ()))}
    versioned = version is not None or any(c.response_versions is not None for c in convs)
    vers = np.full((n, t), -1, np.int32) if versioned else None
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
        for k, v in (c.extra or {}).items():
            extra[k][i] = v
        if versioned:
            if c.response_versions is None and version is None:
                raise ValueError(f"build_batch: conversation {i} has no response_versions and no step version "
                                 f"was given (version=)")
            rv = np.full(r, version, np.int32) if c.response_versions is None else np.asarray(c.response_versions)
            vers[i, p:p + r] = np.where(mask[i, p:p + r] > 0, rv, -1)
    if versioned:
        extra.update(version=vers, behaviour_logp=logp.copy())
    return RolloutBatch(input_ids=ids, loss_mask=mask, old_logp=logp, lengths=np.asarray(lens, np.int32),
                        prompt_len=np.asarray([len(c.prompt_ids) for c in convs], np.int32), is_final=final,
                        reward=np.asarray(rewards, np.float32), sample_group=np.asarray(sample_groups, np.int32),
                        **meta, **extra)


def concat_batches(batches: Sequence[RolloutBatch], *, pad_id: int = 0) -> RolloutBatch:
    """Stack RolloutBatches: rows right-padded to the largest T (input_ids with pad_id, other token fields
    with their FIELDS pad value); sample ids offset so they stay 0..S-1 in batch order; group ids (group,
    sample_group, local_group) renumbered densely 0..G-1 (batch-major, ascending original id within a batch;
    a batch's ids are those of its sample_group and rows' group), because two generation batches may reuse
    ids; local groups are renumbered after all global groups. An optional field must be set in all batches
    or in none. info = {"source_batches": k, "group_origin": int64 [G, 2] (batch index, original group id)}."""
    batches = [b for b in batches if b.num_samples > 0]
    if not batches:
        raise ValueError("concat_batches: no batch with samples")
    present = {}
    for k, f in FIELDS.items():
        has = [getattr(b, k) is not None for b in batches]
        if f.optional and any(has) and not all(has):
            raise ValueError(f"concat_batches: {k} is set in batches {[i for i, h in enumerate(has) if h]} "
                             f"but not in the others; fill it everywhere or nowhere")
        present[k] = all(has)
    t = max(int(b.input_ids.shape[1]) for b in batches)
    out: dict[str, list[np.ndarray]] = {k: [] for k, p in present.items() if p}
    origin, s_off, g_off, l_off = [], 0, 0, 0
    n_global = sum(len(np.unique(np.concatenate([b.sample_group, b.group]))) for b in batches)
    for bi, b in enumerate(batches):
        ids = np.unique(np.concatenate([np.asarray(b.sample_group), np.asarray(b.group)]))
        for k in out:
            a = getattr(b, k)
            if FIELDS[k].kind == "token":
                a = pad_tokens(a, t, pad_id if k == "input_ids" else FIELDS[k].pad)
            elif k == "sample":
                a = a + s_off
            elif k in ("group", "sample_group"):
                a = np.searchsorted(ids, a) + g_off
            elif k == "local_group":
                local = np.unique(a[a >= 0])
                a = np.where(a >= 0, np.searchsorted(local, a) + n_global + l_off, -1)
                l_off += len(local)
            out[k].append(a)
        origin.extend((bi, int(i)) for i in ids)
        s_off += b.num_samples
        g_off += len(ids)
    cat = {k: np.concatenate(v).astype(FIELDS[k].dtype) for k, v in out.items()}
    return RolloutBatch(**cat, info={"source_batches": len(batches),
                                     "group_origin": np.asarray(origin, np.int64).reshape(-1, 2)})


def unit_index(batch: RolloutBatch) -> tuple[np.ndarray, np.ndarray]:
    """Credit units of a batch with `unit` set: (first row of each unit, unit of each row), units being the
    distinct (sample, unit) pairs in sorted order (a row with unit -1 is its sample's unit -1)."""
    if batch.unit is None:
        raise ValueError("unit_index: the batch has no `unit` field")
    _, first, inv = np.unique(np.stack([batch.sample, batch.unit], 1), axis=0, return_index=True,
                              return_inverse=True)
    return first, inv.reshape(-1)


def pad_tokens(x: np.ndarray, t: int, value) -> np.ndarray:
    """Right-pad a [N, T'] array to [N, t] with `value` (returned as is when T' == t)."""
    if x.shape[1] == t:
        return x
    return np.pad(x, ((0, 0), (0, t - x.shape[1])), constant_values=value)


def pad_rows_tokens(batch: RolloutBatch, row_multiple: int, token_multiple: int, *, kinds=("token",),
                    pad_id: int = 0) -> dict[str, np.ndarray]:
    """The batch's set fields of the given kinds, rows padded up to a multiple of row_multiple and tokens
    to a multiple of token_multiple (padding with each field's pad value; padded rows have loss_mask 0)."""
    n = -(-batch.num_rows // row_multiple) * row_multiple
    t = -(-batch.input_ids.shape[1] // token_multiple) * token_multiple
    out = {}
    for k, a in batch.arrays().items():
        f = FIELDS[k]
        if f.kind not in kinds or f.kind == "sample":
            continue
        shape = (n, t) if f.kind == "token" else (n,)
        out[k] = np.full(shape, pad_id if k == "input_ids" else f.pad, a.dtype)
        out[k][tuple(slice(0, d) for d in a.shape)] = a
    return out
