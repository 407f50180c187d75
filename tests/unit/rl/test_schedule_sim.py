"""memjax.rl.schedule_sim: sync equals the analytic sum of its phases; with no update cost and capacity for one
batch the schedules agree; async is bounded below by its slowest phase; max_staleness 0 colocated is sync; the drop
policy loses long trajectories while pace trains them; bad schedules are refused."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.rl.schedule_sim import Rates, Schedule, Trajectory, Turn, simulate

FLAT = dict(decode_batch=(1,), decode_step_s=(0.01,), prefill_tok_s=1000.0)


def _fixed(prefill=100, decode=50, turns=1, flops=1e12):
    spec = Trajectory(tuple(Turn(prefill, decode) for _ in range(turns)), flops, flops / 3)
    return lambda rng: spec


def test_sync_is_the_analytic_sum():
    """One replica, one trajectory at a time: step = prefill / P + decode * tau + train + weight sync."""
    r = Rates(**FLAT, slots=1, train_flops_s=1e12, weight_sync_s=0.5, forward_passes=2)
    res = simulate(_fixed(turns=2), r, Schedule("sync", 1), batch_groups=1, group_size=1, steps=4)
    want = 2 * (100 / 1000 + 50 * 0.01) + (1e12 + 2 * 1e12 / 3) / 1e12 + 0.5
    np.testing.assert_allclose(res.step_s, want, rtol=1e-9)
    np.testing.assert_allclose(res.gpu_s_per_sample, want, rtol=1e-9)


def test_checkpoint_every_k_adds_its_share():
    r = Rates(**FLAT, slots=1, train_flops_s=1e12, checkpoint_s=3.0, checkpoint_every=2, forward_passes=0)
    res = simulate(_fixed(), r, Schedule("sync", 1), batch_groups=1, group_size=1, steps=5)
    np.testing.assert_allclose(res.step_s, 0.1 + 0.5 + 1.0 + 3.0 / 2, rtol=1e-9)


def test_schedules_agree_without_update_cost_and_one_batch_of_room():
    r = Rates(**FLAT, slots=4, train_flops_s=1e30, forward_passes=0)
    common = dict(batch_groups=2, group_size=2, steps=5)
    sync = simulate(_fixed(turns=3), r, Schedule("sync", 1), **common).step_s
    colo = simulate(_fixed(turns=3), r, Schedule("colocated_async", 1, max_staleness=2), **common).step_s
    split = simulate(_fixed(turns=3), r, Schedule("split_async", 2, max_staleness=2, rollout_devices=1),
                     **common).step_s
    np.testing.assert_allclose([colo, split], [sync, sync], rtol=1e-9)


def _tail(rng):
    """A chain of 1..8 conversations with a long tail (the MemAgent / SUMER shape)."""
    k = int(min(1 + rng.geometric(0.35), 8))
    turns = tuple(Turn(int(rng.integers(50, 400)), int(rng.integers(10, 80)), tool_s=0.05, continues=j > 0)
                  for j in range(k))
    return Trajectory(turns, 2e11 * k, 2e11 * k / 3, tag=k)


RATES = Rates(decode_batch=(1, 8, 16), decode_step_s=(0.01, 0.012, 0.02), prefill_tok_s=5000.0, slots=8,
              train_flops_s=1e12, weight_sync_s=0.2, push_bytes=1e9, push_bytes_s=10e9, forward_passes=1)


def test_staleness_zero_colocated_is_sync():
    a = simulate(_tail, RATES, Schedule("sync", 2), batch_groups=2, group_size=4, steps=6, seed=3)
    b = simulate(_tail, RATES, Schedule("colocated_async", 2), batch_groups=2, group_size=4, steps=6, seed=3)
    assert a.update_times == b.update_times and a.staleness_max == 0


def test_async_hides_the_tail_and_respects_its_bounds():
    kw = dict(batch_groups=2, group_size=4, steps=12, seed=1)
    sync = simulate(_tail, RATES, Schedule("sync", 2), **kw)
    colo = simulate(_tail, RATES, Schedule("colocated_async", 2, max_staleness=1), **kw)
    split = simulate(_tail, RATES, Schedule("split_async", 3, max_staleness=2, rollout_devices=2), **kw)
    assert colo.step_s < sync.step_s  # generation keeps going while the slowest trajectories finish
    assert colo.staleness_max <= 1 and split.staleness_max <= 2 and colo.dropped == split.dropped == 0
    gaps = np.diff(split.update_times)  # never faster than its slowest phase: each update's train + push
    assert (gaps >= np.asarray(split.train_times[1:len(split.update_times)]) + RATES.push_bytes / RATES.push_bytes_s - 1e-9).all()
    gaps = np.diff(colo.update_times)
    assert (gaps >= np.asarray(colo.train_times[1:len(colo.update_times)]) + RATES.weight_sync_s - 1e-9).all()


def test_drop_policy_trains_shorter_trajectories_than_pace():
    kw = dict(batch_groups=2, group_size=2, steps=15, seed=2)
    pace = simulate(_tail, RATES, Schedule("colocated_async", 2, max_staleness=1), **kw)
    drop = simulate(_tail, RATES, Schedule("colocated_async", 2, max_staleness=1, policy="drop"), **kw)
    assert pace.dropped == 0 and drop.dropped > 0
    assert drop.trained_tag_mean < drop.admitted_tag_mean  # long chains are the ones dropped


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 1000), st.integers(0, 2), st.sampled_from(["colocated_async", "split_async"]))
def test_bounds_property(seed, s, kind):
    sched = Schedule(kind, 3, max_staleness=s, rollout_devices=2 if kind == "split_async" else 0)
    res = simulate(_tail, RATES, sched, batch_groups=2, group_size=2, steps=6, seed=seed)
    assert res.staleness_max <= s and res.dropped == 0
    after = RATES.push_bytes / RATES.push_bytes_s if kind == "split_async" else RATES.weight_sync_s
    gaps = np.diff(res.update_times)  # the trainer is one: an update's gap is at least its own train + transfer time
    assert (gaps >= np.asarray(res.train_times[1:len(res.update_times)]) + after - 1e-9).all()
    assert res.update_times[0] >= res.train_times[0] + after - 1e-9


def test_bad_schedules():
    with pytest.raises(ValueError, match="split_async needs 0 < rollout_devices < devices"):
        Schedule("split_async", 4, rollout_devices=4)
    with pytest.raises(ValueError, match="Schedule.kind must be one of"):
        Schedule("async", 4)
    with pytest.raises(ValueError, match="sync has max_staleness 0"):
        Schedule("sync", 4, max_staleness=1)


@pytest.mark.parametrize("decode,flops", [(10, 3.0), (30, 1.0)])
def test_shared_compute_shares_the_pool_under_split(decode, flops):
    """Rollout R = decode * 0.1 s alone, update T = flops + 0.5 s alone (pool rate 1 FLOP/s on any device count):
    independent devices overlap them (step max(R, T)), as does the pool's rate without contention (overlap_speed 1);
    a shared pool (overlap_speed 0.5) runs each at half rate while both run, which conserves work: the step is R + T."""
    r = Rates(decode_batch=(1,), decode_step_s=(0.1,), prefill_tok_s=1.0, slots=4, train_flops_s=1.0,
              update_fixed_s=0.5, forward_passes=0, resume="keep")  # keep: the zero-length push costs nothing
    spec = Trajectory((Turn(0, decode),), flops, 0.0)
    kw = {"batch_groups": 1, "group_size": 1, "steps": 6, "warmup": 2}
    sch = Schedule("split_async", 3, max_staleness=1, rollout_devices=1)
    rr, tt = decode * 0.1, flops + 0.5
    apart = simulate(lambda rng: spec, Rates(**{**r.__dict__, "train_flops_s": 0.5}), sch, **kw)
    np.testing.assert_allclose(apart.step_s, max(rr, tt), rtol=1e-9)  # 2 train devices x 0.5 FLOP/s: the pool
    pool = Rates(**{**r.__dict__, "shared_compute": True})
    np.testing.assert_allclose(simulate(lambda rng: spec, pool, sch, **kw).step_s, max(rr, tt), rtol=1e-9)
    shared = simulate(lambda rng: spec, Rates(**{**pool.__dict__, "overlap_speed": 0.5}), sch, **kw)
    np.testing.assert_allclose(shared.step_s, rr + tt, rtol=1e-9)  # the pool never idles: its work per step
    with pytest.raises(ValueError, match="overlap_speed"):
        Rates(**{**r.__dict__, "overlap_speed": 0.0})
    with pytest.raises(ValueError, match="update_fixed_s"):
        Rates(**{**r.__dict__, "update_fixed_s": -1.0})
