"""DAPO extras vs loop-based references: group filtering (dynamic sampling), the DynamicSampler accumulator
(fill, trim, bounded exhaustion, nothing kept), concat_batches (padding to the largest T, sample offsets,
dense group renumbering, ref_logp consistency) and the overlong penalty (DAPO paper's piecewise formula and
verl's DAPO reward manager inside the limit)."""

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.rl.batch import Conversation, build_batch
from memjax.rl.dapo import DynamicSampler, concat_batches, filter_groups, overlong_penalty
from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH


def _ref_keep(reward, group, keep_singletons=False):
    out = []
    for s in range(len(reward)):
        members = [reward[j] for j in range(len(reward)) if group[j] == group[s]]
        out.append(len(set(members)) >= 2 or (keep_singletons and len(members) == 1))
    return np.array(out, bool)


def test_filter_groups_matches_reference():
    reward = np.array([1, 1, 0, 1, 0.5, 0.5, 0.5, 2, 0, 0], np.float32)
    group = np.array([4, 4, 9, 9, 1, 1, 1, 30, -2, -2], np.int32)  # 30: singleton
    np.testing.assert_array_equal(filter_groups(reward, group), [0, 0, 1, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(filter_groups(reward, group, keep_singletons=True),
                                  _ref_keep(reward, group, True))
    assert filter_groups(np.zeros(0, np.float32), np.zeros(0, np.int32)).shape == (0,)
    with pytest.raises(ValueError, match="must both be"):
        filter_groups(reward, group[:3])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 4), st.sampled_from([0.0, 1.0, 0.25])), min_size=1, max_size=16),
       st.booleans())
def test_filter_groups_property(pairs, singles):
    group = np.array([p[0] for p in pairs], np.int32)
    reward = np.array([p[1] for p in pairs], np.float32)
    np.testing.assert_array_equal(filter_groups(reward, group, keep_singletons=singles),
                                  _ref_keep(list(reward), list(group), singles))


def test_overlong_penalty():
    max_len, buf, factor = 20, 8, 0.5
    lens = np.arange(0, 26)
    want = []
    for n in lens:  # DAPO paper, scaled by the penalty factor
        if n <= max_len - buf:
            want.append(0.0)
        elif n <= max_len:
            want.append(factor * ((max_len - buf) - n) / buf)
        else:
            want.append(-factor)
    got = overlong_penalty(lens, max_len, buf, factor)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert got.dtype == np.float32 and got[20] == -0.5 and got[12] == 0.0 and got[13] < 0
    verl = [min(-(n - (max_len - buf)) / buf * factor, 0) for n in lens[lens <= max_len]]
    np.testing.assert_allclose(got[lens <= max_len], verl, rtol=1e-6)
    assert overlong_penalty(3, 10, 4).shape == ()
    with pytest.raises(ValueError, match="buffer"):
        overlong_penalty(lens, 10, 0)
    with pytest.raises(ValueError, match="buffer"):
        overlong_penalty(lens, 4, 8)


def _batch(tag, rewards, groups, extra=0, ref=False):
    """Sample s has 1 + s % 2 conversations; prompt ids encode (tag, sample, turn); lengths vary with extra."""
    convs = []
    for s in range(len(rewards)):
        for turn in range(1 + s % 2):
            r = 1 + s + turn + extra
            convs.append(Conversation(prompt_ids=[tag, s, turn], response_ids=[7] * r,
                                      response_logprobs=[-0.1 * (tag + 1)] * r, sample=s, group=groups[s],
                                      turn=turn, is_final=turn == s % 2))
    b = build_batch(convs, rewards, groups, pad_id=99)
    return b.replace(ref_logp=b.old_logp * 2) if ref else b


def test_concat_batches_pads_offsets_and_renumbers():
    a = _batch(1, [0.0, 1.0, 1.0], [50, 50, 7])
    b = _batch(2, [1.0, 0.0, 0.0, 1.0], [50, 50, 3, 3], extra=4)
    assert a.input_ids.shape[1] < b.input_ids.shape[1]
    c = concat_batches([a, b], pad_id=99)
    t = b.input_ids.shape[1]
    assert c.input_ids.shape == (a.num_rows + b.num_rows, t) and c.num_samples == 7
    np.testing.assert_array_equal(c.reward, [0, 1, 1, 1, 0, 0, 1])
    # groups: batch a {7, 50} -> 0, 1; batch b {3, 50} -> 2, 3 (a reused id stays distinct)
    np.testing.assert_array_equal(c.sample_group, [1, 1, 0, 3, 3, 2, 2])
    np.testing.assert_array_equal(c.info["group_origin"], [[0, 7], [0, 50], [1, 3], [1, 50]])
    src = [(a, i, 0) for i in range(a.num_rows)] + [(b, i, a.num_samples) for i in range(b.num_rows)]
    for row, (bb, i, off) in enumerate(src):
        ti = bb.input_ids.shape[1]
        np.testing.assert_array_equal(c.input_ids[row, :ti], bb.input_ids[i])
        assert np.all(c.input_ids[row, ti:] == 99) and np.all(c.loss_mask[row, ti:] == 0)
        np.testing.assert_array_equal(c.loss_mask[row, :ti], bb.loss_mask[i])
        np.testing.assert_array_equal(c.old_logp[row, :ti], bb.old_logp[i])
        assert c.sample[row] == bb.sample[i] + off and c.group[row] == c.sample_group[c.sample[row]]
        for k in ("lengths", "prompt_len", "turn", "step", "role", "is_final"):
            assert getattr(c, k)[row] == getattr(bb, k)[i], k
    assert c.ref_logp is None and c.sample.dtype == np.int32


def test_concat_batches_ref_logp_and_errors():
    a, b = _batch(1, [0.0, 1.0], [0, 0], ref=True), _batch(2, [1.0, 0.0], [0, 0], extra=3, ref=True)
    c = concat_batches([a, b])
    np.testing.assert_array_equal(c.ref_logp[:a.num_rows, :a.input_ids.shape[1]], a.ref_logp)
    assert np.all(c.ref_logp[:a.num_rows, a.input_ids.shape[1]:] == 0)
    with pytest.raises(ValueError, match="ref_logp is set in batches"):
        concat_batches([a, _batch(3, [0.0], [0])])
    with pytest.raises(ValueError, match="no batch with samples"):
        concat_batches([])


def test_dynamic_sampler_fills_and_trims():
    a = _batch(1, [1.0, 1.0, 0.0, 1.0, 1.0, 0.0], [0, 0, 1, 1, 2, 2])  # groups 1, 2 informative
    b = _batch(2, [0.0, 1.0, 0.0, 0.0], [0, 0, 1, 1], extra=2)       # group 0 informative
    ds = DynamicSampler(target_groups=3, max_gen_batches=5)
    assert not ds.add(a) and ds.num_groups == 2
    assert ds.add(b) and ds.done
    with pytest.raises(RuntimeError, match="already done"):
        ds.add(a)
    batch, info = ds.take()
    assert info["filled"] and info["num_groups"] == 3 and info["num_gen_batches"] == 2
    assert info["groups_seen"] == 5 and info["groups_dropped"] == 2 and info["num_samples"] == 6
    np.testing.assert_array_equal(batch.reward, [0, 1, 1, 0, 0, 1])
    np.testing.assert_array_equal(batch.sample_group, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(batch.info["group_origin"], [[0, 1], [0, 2], [1, 0]])
    assert ds.num_gen_batches == 0 and ds.num_groups == 0  # reset by take()

    ds = DynamicSampler(target_groups=1, max_gen_batches=5)
    assert ds.add(a)
    batch, info = ds.take()  # 2 informative groups, trimmed to the first
    assert info["num_groups"] == 1 and info["groups_kept"] == 2 and batch.num_samples == 2
    np.testing.assert_array_equal(batch.sample_group, [0, 0])
    np.testing.assert_array_equal(batch.input_ids[:, 1], [2, 3, 3])  # original samples 2 (1 conv), 3 (2)
    assert np.all(batch.sample < 2) and batch.info["group_origin"].shape == (1, 2)


def test_dynamic_sampler_bounded_and_empty(caplog):
    a = _batch(1, [1.0, 0.0, 1.0, 1.0], [0, 0, 1, 1])
    flat = _batch(2, [1.0, 1.0], [4, 4])
    ds = DynamicSampler(target_groups=5, max_gen_batches=2)
    ds.add(a)
    with caplog.at_level(logging.WARNING, logger="memjax.rl.dapo"):
        assert ds.add(flat)
        batch, info = ds.take()
    assert not info["filled"] and info["num_groups"] == 1 and batch.num_samples == 2
    assert "1/5 informative groups after 2 generation batches" in caplog.text
    ds = DynamicSampler(target_groups=2, max_gen_batches=1)
    ds.add(flat)
    batch, info = ds.take()
    assert batch is None and info["num_groups"] == 0 and info["num_samples"] == 0
    for bad in ({"target_groups": 0, "max_gen_batches": 1}, {"target_groups": 1, "max_gen_batches": 0}):
        with pytest.raises(ValueError, match="must be an int >= 1"):
            DynamicSampler(**bad)


@pytest.mark.e2e
def test_dynamic_sampling_across_two_processes_keeps_what_one_process_keeps(tmp_path):
    """dapo_check.py on 2 real processes (each adding its block of every generation batch, counts all-gathered)
    against 1 process given every batch: per step the same kept samples (each process's part in the one-process
    order and numbered by its place there, one part empty at step 4) and the same info."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root, check = Path(__file__).resolve().parents[3], Path(__file__).with_name("dapo_check.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC",
                                                                      "JAX_PROCESS_ID", "SLURM_", "OMPI_"))}
    env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu")
    for cmd in ([sys.executable, str(check), str(tmp_path)],
                [sys.executable, "-m", "memjax.launch", "--nproc", "2", "--devices-per-proc", "1", "--",
                 "tests.unit.rl.dapo_check", str(tmp_path)]):
        r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    one, two = (json.loads((tmp_path / f"dapo_{n}.json").read_text()) for n in (1, 2))
    assert len(one) == len(two) == 4
    for a, b in zip(one, two):
        assert a["info"] == b["info"] and a["none"] == b["none"] is False
        whole = a["ids"][0]
        assert sorted(b["ids"][0] + b["ids"][1]) == sorted(whole)
        for part in b["ids"]:  # each process's part keeps the one-process order
            assert part == [i for i in whole if i in part]
        # and numbers its samples by their place in the one-process batch (the trainer's mini-batch draw)
        placed = {n: i for part, nums in zip(b["ids"], b["numbers"]) for i, n in zip(part, nums)}
        assert [placed[k] for k in range(len(whole))] == whole
    assert [] in two[3]["ids"]  # a process whose kept groups were all trimmed trains on an empty batch
