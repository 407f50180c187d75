"""memjax.rl.staleness.Pacer: the admission bound, FIFO training under "pace", nothing dropped for slowness,
the staleness bound at train time, dynamic-sampling refills, LoGo branches in their anchor's group, the "drop"
policy for comparison; hypothesis drives random completion orders, filters and branches."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.rl.staleness import Pacer, PacingError


def test_max_staleness_zero_is_synchronous():
    p = Pacer(batch_groups=2, max_staleness=0)
    a, b = p.admit(4), p.admit(4)
    assert p.admissible() == 0 and a.version == b.version == 0
    with pytest.raises(PacingError, match="bound is 2"):
        p.admit(4)
    for s in a.samples + b.samples[:-1]:
        p.finish(s)
    assert p.take() is None  # waits for b's last trajectory
    p.finish(b.samples[-1])
    assert [g.gid for g in p.take()] == [0, 1]
    assert p.admissible() == 0  # the batch holds its places until its update is applied
    p.update_done()
    assert p.admissible() == 2 and p.admit(4).version == 1


def test_pace_waits_for_the_slow_oldest_group_while_newer_work_runs():
    p = Pacer(batch_groups=1, max_staleness=2)
    slow, *rest = [p.admit(2) for _ in range(3)]
    for g in rest:
        for s in g.samples:
            p.finish(s)
    assert p.take() is None and p.stats["waits"] == 1  # never skips the slow oldest group
    for s in slow.samples:
        p.finish(s)
    assert [g.gid for g in p.take()] == [slow.gid] and p.stats["dropped"] == 0


def test_drop_policy_trains_what_is_done_and_drops_the_slow():
    p = Pacer(batch_groups=1, max_staleness=1, policy="drop")
    slow, fast = p.admit(2), p.admit(2)
    for s in fast.samples:
        p.finish(s)
    assert [g.gid for g in p.take()] == [fast.gid]
    dropped = p.update_done()  # version 1: slow (version 0) could still train at 1
    assert dropped == [] and p.admit(2).version == 1
    newer = p.groups[2]
    for s in newer.samples:
        p.finish(s)
    assert [g.gid for g in p.take()] == [newer.gid]
    assert [g.gid for g in p.update_done()] == [slow.gid] and slow.state == "dropped"
    with pytest.raises(PacingError, match="group 0 is dropped"):
        p.finish(slow.samples[0])


def test_discard_refills_and_branches_join_their_anchor():
    p = Pacer(batch_groups=1, max_staleness=0)
    g = p.admit(2)
    extra = p.branch(g.gid, 3)  # LoGo local re-rollouts: same group, same version
    assert len(g.samples) == 5 and p.groups[g.gid].version == 0
    for s in g.samples:
        p.finish(s)
    p.discard(g.gid)  # flat rewards
    assert p.admissible() == 1 and p.admit(2).gid == 1
    with pytest.raises(PacingError, match="not running"):
        p.branch(g.gid, 1)
    assert extra == [2, 3, 4]


@st.composite
def _plans(draw):
    return dict(batch=draw(st.integers(1, 3)), s=draw(st.integers(0, 3)), group=draw(st.integers(1, 3)),
                updates=draw(st.integers(1, 8)), seed=draw(st.integers(0, 10**6)),
                filter_p=draw(st.sampled_from([0.0, 0.3])), branch_p=draw(st.sampled_from([0.0, 0.3])),
                policy=draw(st.sampled_from(["pace", "drop"])))


def _drive(plan):
    """Admit whenever allowed, finish running trajectories in a random order, sometimes filter a complete group or
    branch a running one, train whenever a batch is ready (the update lasting a random while, rollouts going on);
    returns the pacer and the batches in order."""
    rng = random.Random(plan["seed"])
    p = Pacer(batch_groups=plan["batch"], max_staleness=plan["s"], policy=plan["policy"])
    batches, steps, updating = [], 0, False
    while len(batches) < plan["updates"] and steps < 10_000:
        steps += 1
        while p.admissible() and rng.random() < 0.7:
            p.admit(plan["group"])
        running = [(g, s) for g in p.outstanding() if g.state == "running" for s in g.pending]
        if running and rng.random() < 0.8:
            g, s = rng.choice(sorted(running, key=lambda x: x[1]))
            if rng.random() < plan["branch_p"]:
                p.branch(g.gid, 1)
            p.finish(s)
            if p.groups[g.gid].complete and rng.random() < plan["filter_p"]:
                p.discard(g.gid)
        if updating:  # rollouts go on while the trainer updates (split devices): admit / finish meanwhile
            if rng.random() < 0.5:
                p.update_done()
                updating = False
            continue
        batch = p.take()
        if batch is not None:
            batches.append([(g.gid, g.version, p.version) for g in batch])
            updating = True
    return p, batches


@settings(max_examples=150, deadline=None)
@given(_plans())
def test_pacing_invariants(plan):
    p, batches = _drive(plan)
    s = plan["s"]
    assert len(batches) == plan["updates"]  # liveness: the driver always gets its batches
    trained = [gid for b in batches for gid, _, _ in b]
    for b in batches:
        assert len(b) == plan["batch"]
        for gid, v, t in b:
            assert 0 <= t - v <= s  # no trained group older than the bound
            assert p.groups[gid].complete
    if plan["policy"] == "pace":
        assert p.stats["dropped"] == 0  # nothing dropped for slowness
        kept = [gid for gid in sorted(p.groups) if p.groups[gid].state != "filtered"]
        assert trained == kept[:len(trained)]  # FIFO by admission, filtered groups skipped
    else:
        assert not set(trained) & {g for g in p.groups if p.groups[g].state == "dropped"}
    assert len(p.order) + p._in_update <= (s + 1) * plan["batch"]
    versions = [p.groups[g].version for g in sorted(p.groups)]
    assert versions == sorted(versions)  # admission oldest first


def test_bad_arguments():
    with pytest.raises(ValueError, match="Pacer.policy must be one of"):
        Pacer(batch_groups=1, policy="skip")
    with pytest.raises(ValueError, match="Pacer.max_staleness must be >= 0"):
        Pacer(batch_groups=1, max_staleness=-1)
    p = Pacer(batch_groups=1)
    with pytest.raises(PacingError, match="sample 0 is not running"):
        p.finish(0)
    with pytest.raises(PacingError, match="no batch was taken"):
        p.update_done()
