"""Bounded staleness by pacing: which rollout groups may start, and which are trained at the next update.

Owns `Pacer`, host-side bookkeeping (pure Python, no device, no clock) between the rollout side and the trainer of
an asynchronous schedule. Its unit is a GRPO group, admitted and trained whole; a group's version is the trainer
version when it was admitted (that of its oldest token); LoGo local branches join their anchor's group (`branch`).
With B groups per batch and s = max_staleness: admission is oldest first while fewer than (s + 1) * B groups are
outstanding (s = 0 is the synchronous schedule); policy "pace" trains the B oldest kept groups and waits for a
running one, so nothing is dropped for being slow and a group admitted at version v trains at t <= v + s; policy
"drop" (for comparison) trains the oldest complete groups and drops those beyond the bound; `discard` frees the
place of a flat-reward group for a refill.
Invariants (a violation raises PacingError): a trained group is complete and its staleness t - v <= s; under
"pace" batches are in admission order and nothing is dropped. docs/async.md, "Bounded staleness by pacing".
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Pacer", "PacingError", "POLICIES", "Group"]

POLICIES = ("pace", "drop")


class PacingError(RuntimeError):
    """A call against the pacing rules (admitting past the bound, finishing an unknown sample, ...)."""


@dataclass
class Group:
    gid: int
    version: int
    samples: list[int]
    pending: set[int]
    state: str = "running"  # running | complete | trained | filtered | dropped
    trained_at: int | None = None

    @property
    def complete(self) -> bool:
        return not self.pending


@dataclass
class Pacer:
    batch_groups: int
    max_staleness: int = 0
    policy: str = "pace"
    version: int = 0
    groups: dict[int, Group] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # outstanding group ids in admission order
    stats: dict[str, int] = field(default_factory=lambda: {"admitted": 0, "trained": 0, "filtered": 0,
                                                           "dropped": 0, "paced": 0, "waits": 0})
    _sample_group: dict[int, int] = field(default_factory=dict)
    _next_gid: int = 0
    _next_sample: int = 0
    _in_update: int = 0  # groups of the batch taken and not yet applied (they hold their places until applied)

    def __post_init__(self):
        if self.batch_groups <= 0:
            raise ValueError(f"Pacer.batch_groups must be > 0, got {self.batch_groups}")
        if self.max_staleness < 0:
            raise ValueError(f"Pacer.max_staleness must be >= 0, got {self.max_staleness}")
        if self.policy not in POLICIES:
            raise ValueError(f"Pacer.policy must be one of {POLICIES}, got {self.policy!r}")

    # -- rollout side --------------------------------------------------------------------------------
    @property
    def bound(self) -> int:
        """Outstanding groups allowed: (max_staleness + 1) * batch_groups."""
        return (self.max_staleness + 1) * self.batch_groups

    def outstanding(self) -> list[Group]:
        return [self.groups[g] for g in self.order]

    def admissible(self) -> int:
        """How many new groups may be admitted now (the caller also bounds it by its own capacity)."""
        room = self.bound - len(self.order) - self._in_update
        oldest = self.groups[self.order[0]].version if self.order else self.version
        if self.version - oldest > self.max_staleness:  # cannot happen under "pace"; "drop" has dropped it
            raise PacingError(f"Pacer: outstanding group {self.order[0]} of version {oldest} is older than "
                              f"max_staleness={self.max_staleness} at version {self.version}")
        return max(room, 0)

    def admit(self, group_size: int) -> Group:
        """Admit one group of `group_size` trajectories at the current version; its sample ids are new."""
        if group_size <= 0:
            raise ValueError(f"Pacer.admit: group_size must be > 0, got {group_size}")
        if self.admissible() <= 0:
            self.stats["paced"] += 1
            raise PacingError(f"Pacer.admit: {len(self.order)} groups outstanding, the bound is {self.bound} "
                              f"(max_staleness={self.max_staleness} x batch_groups={self.batch_groups} + 1 batch)")
        ids = list(range(self._next_sample, self._next_sample + group_size))
        self._next_sample += group_size
        g = Group(self._next_gid, self.version, ids, set(ids))
        self._next_gid += 1
        self.groups[g.gid] = g
        self.order.append(g.gid)
        for s in ids:
            self._sample_group[s] = g.gid
        self.stats["admitted"] += 1
        return g

    def branch(self, gid: int, count: int) -> list[int]:
        """`count` new trajectories (LoGo local re-rollouts) in running group `gid`: its version, trained with it."""
        g = self.groups.get(gid)
        if g is None or g.state != "running":
            raise PacingError(f"Pacer.branch: group {gid} is not running (state "
                              f"{None if g is None else g.state})")
        ids = list(range(self._next_sample, self._next_sample + count))
        self._next_sample += count
        g.samples += ids
        g.pending.update(ids)
        for s in ids:
            self._sample_group[s] = gid
        return ids

    def finish(self, sample: int) -> Group:
        """Trajectory `sample` ended; returns its group (complete when none of its trajectories runs)."""
        gid = self._sample_group.get(sample)
        g = None if gid is None else self.groups[gid]
        if g is None or sample not in g.pending or g.state != "running":
            raise PacingError(f"Pacer.finish: sample {sample} is not running"
                              + ("" if g is None else f" (its group {g.gid} is {g.state})"))
        g.pending.discard(sample)
        if g.complete:
            g.state = "complete"
        return g

    def discard(self, gid: int) -> None:
        """Dynamic sampling filtered completed group `gid` (flat rewards): it leaves, a refill may be admitted."""
        g = self.groups[gid]
        if g.state != "complete":
            raise PacingError(f"Pacer.discard: group {gid} is {g.state}, only a complete group is filtered")
        g.state = "filtered"
        self.order.remove(gid)
        self.stats["filtered"] += 1

    # -- trainer side ------------------------------------------------------------------------------
    def _batch(self) -> list[Group] | None:
        out = []
        for gid in self.order:
            g = self.groups[gid]
            if g.state == "complete":
                out.append(g)
                if len(out) == self.batch_groups:
                    return out
            elif self.policy == "pace":  # the oldest group still runs: wait for it
                return None
        return None

    def ready(self) -> bool:
        return self._batch() is not None

    def take(self) -> list[Group] | None:
        """The next training batch (B groups, marked trained at the current version), or None to wait."""
        if self._in_update:
            raise PacingError("Pacer.take: the previous batch's update is not done (call update_done first)")
        batch = self._batch()
        if batch is None:
            self.stats["waits"] += 1
            return None
        for g in batch:
            if self.version - g.version > self.max_staleness:
                raise PacingError(f"Pacer.take: group {g.gid} of version {g.version} would train at version "
                                  f"{self.version}, beyond max_staleness={self.max_staleness}")
            g.state, g.trained_at = "trained", self.version
            self.order.remove(g.gid)
        self.stats["trained"] += len(batch)
        self._in_update = len(batch)
        return batch

    def update_done(self) -> list[Group]:
        """The trainer applied an update (version + 1). Under "drop", returns the groups dropped because the next
        update would train them beyond the bound (the caller aborts their running trajectories)."""
        if not self._in_update:
            raise PacingError("Pacer.update_done: no batch was taken")
        self.version += 1
        self._in_update = 0
        if self.policy != "drop":
            return []
        dropped = [self.groups[g] for g in self.order if self.version - self.groups[g].version > self.max_staleness]
        for g in dropped:
            g.state = "dropped"
            self.order.remove(g.gid)
        self.stats["dropped"] += len(dropped)
        return dropped

    def forget_trained(self) -> int:
        """Drop the bookkeeping of trained groups (a long run's Pacer stays small); returns how many."""
        gone = [gid for gid, g in self.groups.items() if g.state == "trained" and not self._in_update]
        for gid in gone:
            for s in self.groups.pop(gid).samples:
                self._sample_group.pop(s, None)
        return len(gone)

    def staleness(self, gid: int) -> int:
        """t - v of a group: at training for a trained group, now otherwise."""
        g = self.groups[gid]
        return (self.version if g.trained_at is None else g.trained_at) - g.version
