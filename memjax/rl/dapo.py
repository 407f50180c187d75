"""DAPO extras: dynamic sampling (group filtering + an accumulator over generation batches), RolloutBatch
concatenation, and overlong reward shaping. Host-side numpy (these run between rollout and training).

Owns `filter_groups` (keep a sample iff its group's rewards are not all equal; groups of one are dropped unless
`keep_singletons`), `DynamicSampler` (accumulates informative groups over generation batches up to
`target_groups` or `max_gen_batches`; a short batch is returned and reported, not refused), `overlong_penalty`
(DAPO's soft overlong punishment) and `concat_batches` (re-exported from memjax/rl/batch.py).
Invariants: with `across_processes=True` the sampler's counts are global (one small all-gather per generation
batch), `done` is the same on every process, and each process's `take()` is its part of what one process given
every batch keeps, numbered in that one-process batch (batch.info["global_samples"]); a process whose groups were
all dropped gets an empty batch, and None comes back only when no process kept anything.
docs/trainer.md, "Losses", has the formulas and where they differ from verl.
"""

from __future__ import annotations

import logging

import jax
import numpy as np

from .assemble import all_processes
from .batch import RolloutBatch, concat_batches

__all__ = ["filter_groups", "concat_batches", "DynamicSampler", "overlong_penalty"]

log = logging.getLogger(__name__)


def filter_groups(reward, sample_group, *, keep_singletons: bool = False) -> np.ndarray:
    """keep[s]: True iff group(s) has >= 2 distinct rewards (or is a singleton and keep_singletons)."""
    r = np.asarray(reward)
    g = np.asarray(sample_group)
    if r.ndim != 1 or g.shape != r.shape:
        raise ValueError(f"filter_groups: reward {r.shape} and sample_group {g.shape} must both be [S]")
    if r.size == 0:
        return np.zeros(0, bool)
    uniq, inv = np.unique(g, return_inverse=True)
    hi = np.full(len(uniq), -np.inf)
    lo = np.full(len(uniq), np.inf)
    np.maximum.at(hi, inv, r)
    np.minimum.at(lo, inv, r)
    count = np.bincount(inv, minlength=len(uniq))
    keep_group = (hi > lo) | (keep_singletons & (count == 1))
    return keep_group[inv]


class DynamicSampler:
    """Collects informative groups from successive generation batches until `target_groups` are kept or
    `max_gen_batches` batches were used (see module docstring)."""

    def __init__(self, target_groups: int, max_gen_batches: int, *, keep_singletons: bool = False,
                 pad_id: int = 0, across_processes: bool = False):
        if not (isinstance(target_groups, int) and target_groups >= 1):
            raise ValueError(f"DynamicSampler: target_groups must be an int >= 1, got {target_groups!r}")
        if not (isinstance(max_gen_batches, int) and max_gen_batches >= 1):
            raise ValueError(f"DynamicSampler: max_gen_batches must be an int >= 1, got {max_gen_batches!r}")
        self.target_groups = target_groups
        self.max_gen_batches = max_gen_batches
        self.keep_singletons = keep_singletons
        self.pad_id = pad_id
        self.across_processes = across_processes
        self._reset()

    def _reset(self):
        self._kept: list[RolloutBatch] = []
        self._per_batch: list[tuple[RolloutBatch | None, np.ndarray]] = []  # (kept part, kept groups per process)
        self._empty: RolloutBatch | None = None
        self.num_gen_batches = 0
        self.num_groups = 0  # informative groups kept so far
        self.groups_seen = 0
        self.samples_seen = 0

    @property
    def done(self) -> bool:
        return self.num_groups >= self.target_groups or self.num_gen_batches >= self.max_gen_batches

    def add(self, batch: RolloutBatch) -> bool:
        """Filter one generation batch and keep its informative groups; returns `done`."""
        if self.done:
            raise RuntimeError(f"DynamicSampler.add: already done ({self.num_groups}/{self.target_groups} "
                               f"groups, {self.num_gen_batches}/{self.max_gen_batches} batches); call take()")
        keep = filter_groups(batch.reward, batch.sample_group, keep_singletons=self.keep_singletons)
        self.num_gen_batches += 1
        mine = [len(np.unique(batch.sample_group[keep])), len(np.unique(batch.sample_group)), batch.num_samples]
        every = all_processes(np.asarray(mine, np.int64)) if self.across_processes else np.asarray([mine])
        self.groups_seen += int(every[:, 1].sum())
        self.samples_seen += int(every[:, 2].sum())
        self.num_groups += int(every[:, 0].sum())
        kept = batch.select_samples(keep) if keep.any() else None
        self._empty = batch.select_samples(np.zeros(batch.num_samples, bool))
        if self.across_processes:
            self._per_batch.append((kept, every[:, 0]))
        elif kept is not None:
            self._kept.append(kept)
        return self.done

    def _mine(self) -> list[RolloutBatch | None]:
        """This process's kept part of every generation batch trimmed to its share of the first target_groups
        groups (global order); None where it keeps nothing."""
        me, before, out = jax.process_index(), 0, []
        for kept, counts in self._per_batch:
            allow = int(np.clip(self.target_groups - before - counts[:me].sum(), 0, counts[me]))
            before += int(counts.sum())
            if kept is not None and allow:
                ids = np.unique(kept.sample_group)[:allow]  # its first `allow` groups, ascending id
                out.append(kept.select_samples(np.isin(kept.sample_group, ids)))
            else:
                out.append(None)
        return out

    def take(self) -> tuple[RolloutBatch | None, dict]:
        """(batch of at most target_groups groups, or None; info) and reset for the next training step."""
        filled = self.num_groups >= self.target_groups
        info = {"num_gen_batches": self.num_gen_batches, "target_groups": self.target_groups,
                "groups_kept": self.num_groups, "groups_seen": self.groups_seen,
                "groups_dropped": self.groups_seen - self.num_groups, "samples_seen": self.samples_seen,
                "filled": filled}
        batch = None
        if self.across_processes:
            mine = self._mine()
            # each local sample's index in the one-process batch: (generation batch, process, sample) order
            sizes = [0 if b is None else b.num_samples for b in mine]
            every = all_processes(np.asarray(sizes, np.int64)).reshape(-1, len(sizes))  # [P, generation batches]
            me = jax.process_index()
            before = np.concatenate([[0], np.cumsum(every.sum(0))[:-1]]) + every[:me].sum(0)
            numbers = np.concatenate([np.arange(n) + b for n, b in zip(sizes, before)] + [np.zeros(0, np.int64)])
            kept_parts = [b for b in mine if b is not None and b.num_samples]
            if self.num_groups:  # some process kept groups: every process trains (maybe on nothing)
                batch = concat_batches(kept_parts, pad_id=self.pad_id) if kept_parts else self._empty
                batch = batch.replace(info={**batch.info, "global_samples": numbers.astype(np.int64),
                                            "total_samples": int(every.sum())})
        elif self._kept:
            batch = concat_batches(self._kept, pad_id=self.pad_id)
            if self.num_groups > self.target_groups:
                batch = batch.select_samples(batch.sample_group < self.target_groups)
                batch = batch.replace(info={**batch.info,
                                            "group_origin": batch.info["group_origin"][:self.target_groups]})
        info["num_groups"] = min(self.num_groups, self.target_groups)
        info["num_samples"] = 0 if batch is None else batch.num_samples
        if self.across_processes:
            info["num_samples"] = int(all_processes(np.asarray([info["num_samples"]], np.int64)).sum())
        if not filled:
            log.warning("dynamic sampling: %d/%d informative groups after %d generation batches (limit); "
                        "training on what there is", self.num_groups, self.target_groups, self.num_gen_batches)
        self._reset()
        return batch, info


def overlong_penalty(response_len, max_len: int, buffer: int, penalty_factor: float = 1.0) -> np.ndarray:
    """DAPO soft overlong punishment, float32 with response_len's shape (see module docstring)."""
    if not (buffer > 0 and max_len >= buffer):
        raise ValueError(f"overlong_penalty: need 0 < buffer <= max_len, got buffer={buffer}, max_len={max_len}")
    if not penalty_factor >= 0:
        raise ValueError(f"overlong_penalty: penalty_factor must be >= 0, got {penalty_factor}")
    n = np.asarray(response_len, np.float64)
    exceed = np.clip((n - (max_len - buffer)) / buffer, 0.0, 1.0)
    return (-penalty_factor * exceed).astype(np.float32)
