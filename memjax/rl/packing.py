"""Sequence packing: conversations of a RolloutBatch laid into fixed-length rows with segment ids.

Owns the host-side layout the trainer's jitted programs consume (memjax/rl/update_programs.py): `row_length`
(the smallest bucket length that holds the longest conversation, so a run compiles one program per bucket at
most; without buckets, rounded up to `pad_tokens`), `pack` (best-fit-decreasing placement, at most `max_segments`
conversations per row, ties in batch order) and `Packing`: `tokens(x)` [N, T] -> [R, row_len] and its inverse
`unpack(y)`, `segment_ids()` (1, 2, ... per conversation, 0 on padding: the attention back-ends' convention),
`positions()` (restarting at every conversation, as the engine saw them) and `local_index()` (a conversation's
index within its micro-batch, for the step-level loss; -1 on padding).
Invariants: deterministic; a conversation is never split across rows and keeps its token order, so causal
attention within a segment is exactly the conversation's own attention.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np


def row_length(max_len: int, buckets: tuple[int, ...], pad_tokens: int) -> int:
    if not buckets:
        return max(-(-max_len // pad_tokens) * pad_tokens, pad_tokens)
    for b in sorted(buckets):
        if b >= max_len:
            return int(b)
    raise ValueError(f"a conversation has {max_len} tokens, more than the largest row bucket {max(buckets)} "
                     f"(UpdateConfig.row_buckets)")


@dataclass(frozen=True)
class Packing:
    row_len: int
    num_rows: int
    row: np.ndarray  # int64 [N] packed row of each conversation
    offset: np.ndarray  # int64 [N] first token position in that row
    lengths: np.ndarray  # int64 [N]

    @property
    def pad_fraction(self) -> float:
        return 1.0 - float(self.lengths.sum()) / max(self.num_rows * self.row_len, 1)

    def _index(self):
        """(conversation index, token index, flat destination) of every real token."""
        conv = np.repeat(np.arange(len(self.lengths)), self.lengths)
        starts = np.cumsum(self.lengths) - self.lengths
        tok = np.arange(int(self.lengths.sum())) - np.repeat(starts, self.lengths)
        dest = self.row[conv] * self.row_len + self.offset[conv] + tok
        return conv, tok, dest

    def tokens(self, x: np.ndarray, pad=0, rows: int | None = None) -> np.ndarray:
        """[N, T] -> [rows (default num_rows), row_len], padding `pad`."""
        rows = self.num_rows if rows is None else rows
        out = np.full(rows * self.row_len, pad, x.dtype)
        conv, tok, dest = self._index()
        out[dest] = x[conv, tok]
        return out.reshape(rows, self.row_len)

    def unpack(self, y: np.ndarray, t: int) -> np.ndarray:
        """[R >= num_rows, row_len] -> [N, t] (zeros past each conversation's length)."""
        out = np.zeros((len(self.lengths), t), y.dtype)
        conv, tok, dest = self._index()
        out[conv, tok] = y.reshape(-1)[dest]
        return out

    def segment_ids(self, rows: int | None = None) -> np.ndarray:
        rank = _rank_within(self.row, self.offset) + 1  # 1-based order of a conversation within its row
        return self.tokens(np.repeat(rank[:, None], self._t(), 1).astype(np.int32), 0, rows)

    def positions(self, rows: int | None = None) -> np.ndarray:
        t = self._t()
        return self.tokens(np.broadcast_to(np.arange(t, dtype=np.int32), (len(self.lengths), t)).copy(), 0, rows)

    def local_index(self, micro_rows: int, rows: int | None = None) -> np.ndarray:
        """Index of each conversation within its micro-batch (rows grouped by micro_rows), -1 on padding."""
        local = _rank_within(self.row // micro_rows, self.row * (self.row_len + 1) + self.offset)
        return self.tokens(np.repeat(local[:, None], self._t(), 1).astype(np.int32), -1, rows)

    def _t(self) -> int:
        return int(self.lengths.max()) if len(self.lengths) else 1


def pack(lengths, row_len: int, max_segments: int = 1, packed: bool = True) -> Packing:
    lengths = np.asarray(lengths, np.int64)
    if len(lengths) and lengths.max() > row_len:
        raise ValueError(f"pack: a conversation has {int(lengths.max())} tokens > row length {row_len}")
    if not packed or max_segments == 1:
        n = len(lengths)
        return Packing(row_len, n, np.arange(n), np.zeros(n, np.int64), lengths)
    row = np.zeros(len(lengths), np.int64)
    offset = np.zeros(len(lengths), np.int64)
    used: list[int] = []  # tokens used per row
    segs: list[int] = []
    open_rows: list[tuple[int, int]] = []  # (free tokens, row) of rows that may take more, sorted
    for i in np.argsort(-lengths, kind="stable"):  # best-fit decreasing
        n = int(lengths[i])
        k = bisect.bisect_left(open_rows, (n, -1))
        if k < len(open_rows):
            _, r = open_rows.pop(k)
        else:
            r = len(used)
            used.append(0)
            segs.append(0)
        row[i], offset[i] = r, used[r]
        used[r] += n
        segs[r] += 1
        if segs[r] < max_segments and used[r] < row_len:
            bisect.insort(open_rows, (row_len - used[r], r))
    return Packing(row_len, len(used), row, offset, lengths)


def _rank_within(group: np.ndarray, key: np.ndarray) -> np.ndarray:
    """0-based rank of each element by `key` among the elements of its `group`."""
    if len(group) == 0:  # a process may hold no conversation of a mini-batch
        return np.zeros(0, np.int64)
    order = np.lexsort((key, group))
    g = group[order]
    first = np.r_[0, np.nonzero(g[1:] != g[:-1])[0] + 1]
    start = np.repeat(first, np.diff(np.r_[first, len(g)]))
    rank = np.empty(len(group), np.int64)
    rank[order] = np.arange(len(group)) - start
    return rank
