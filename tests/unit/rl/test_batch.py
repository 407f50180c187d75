"""memjax.rl.batch: the one field table and the operations that walk it (select, concat, pad), with every
optional field set, against per-field expectations written out by hand."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.rl.batch import FIELDS, Conversation, RolloutBatch, build_batch, concat_batches, pad_rows_tokens


def _batch(lens, rewards, groups, *, optional=True, seed=0):
    """One conversation per sample; every optional field filled with distinct values when `optional`."""
    convs = [Conversation(list(range(1, 3)), list(range(10, 10 + k)), [-0.5] * k, sample=i, group=groups[i],
                          turn=0) for i, k in enumerate(lens)]
    b = build_batch(convs, rewards, groups, pad_id=7)
    if not optional:
        return b
    r = np.random.default_rng(seed)
    n, t = b.input_ids.shape
    return b.replace(**{k: (r.integers(0, 5, (n, t) if f.kind == "token" else n)).astype(f.dtype)
                        for k, f in FIELDS.items() if f.optional})


def test_table_covers_every_array_field():
    import dataclasses
    names = {f.name for f in dataclasses.fields(RolloutBatch)} - {"info"}
    assert names == set(FIELDS)
    with pytest.raises(ValueError, match="RolloutBatch.values has shape"):
        _batch([2, 3], [1.0, 0.0], [0, 0]).replace(values=np.zeros((2, 1), np.float32))


def test_select_keeps_every_field():
    b = _batch([2, 3, 1], [1.0, 0.0, 0.5], [0, 0, 1])
    s = b.select_samples(np.array([True, False, True]))
    for k, f in FIELDS.items():
        a, full = getattr(s, k), getattr(b, k)
        want = full[[0, 2]] if k != "sample" else np.array([0, 1])
        np.testing.assert_array_equal(a, want, err_msg=k)
        assert a.dtype == f.dtype, k


def test_concat_pads_offsets_and_renumbers_local_groups():
    a = _batch([2, 3], [1.0, 0.0], [5, 5], seed=1).replace(local_group=np.array([3, -1], np.int32))
    b = _batch([6], [0.5], [5], seed=2).replace(local_group=np.array([3], np.int32))
    c = concat_batches([a, b], pad_id=7)
    t = b.input_ids.shape[1]
    assert c.input_ids.shape == (3, t) and (c.input_ids[:2, a.input_ids.shape[1]:] == 7).all()
    assert c.sample.tolist() == [0, 1, 2] and c.group.tolist() == [0, 0, 1] and c.sample_group.tolist() == [0, 0, 1]
    assert c.local_group.tolist() == [2, -1, 3]  # after the 2 global groups, one per batch, -1 kept
    np.testing.assert_array_equal(c.values[:2, :a.input_ids.shape[1]], a.values)
    assert (c.values[:2, a.input_ids.shape[1]:] == 0).all()
    np.testing.assert_array_equal(c.temperature, np.concatenate([a.temperature, b.temperature]))
    with pytest.raises(ValueError, match=r"ref_logp is set in batches \[0\] but not"):
        concat_batches([a, _batch([1], [0.0], [0], optional=False)])


def test_pad_rows_tokens_uses_each_fields_pad_value():
    b = _batch([2, 3, 1], [1.0, 0.0, 0.5], [0, 0, 1])
    out = pad_rows_tokens(b, 4, 8, kinds=("token", "row"), pad_id=7)
    assert out["input_ids"].shape == (4, 8) and out["lengths"].shape == (4,)
    assert (out["input_ids"][3] == 7).all() and (out["loss_mask"][3] == 0).all()
    assert out["local_group"][3] == -1 and out["temperature"][3] == 1.0 and out["snapshot"][3] == -1
    np.testing.assert_array_equal(out["old_logp"][:3, :b.input_ids.shape[1]], b.old_logp)
    assert set(pad_rows_tokens(b, 1, 1)) == {k for k, f in FIELDS.items() if f.kind == "token"}


def test_conversation_extra_fills_optional_row_fields():
    convs = [Conversation([1, 2], [3], [-0.5], sample=0, group=0, turn=0, extra={"local_group": 7, "unit_reward": 0.25}),
             Conversation([1], [4, 5], [-0.1, -0.2], sample=1, group=0, turn=0, extra={"unit": 3})]
    b = build_batch(convs, [0.0, 1.0], [0, 0])
    assert b.local_group.tolist() == [7, -1] and b.unit.tolist() == [-1, 3]
    np.testing.assert_allclose(b.unit_reward, [0.25, 0.0])
    assert b.snapshot is None and b.policy is None
    with pytest.raises(ValueError, match="extra field 'reward' is not an optional row field"):
        Conversation([1], [2], [0.0], sample=0, group=0, turn=0, extra={"reward": 1.0})


# ---- policy versions and behaviour log-probs ----

def test_unversioned_batch_is_synchronous_and_unchanged():
    b = _batch([2, 3], [1.0, 0.0], [0, 0], optional=False)
    assert b.version is None and b.behaviour_logp is None
    v = b.token_versions(5)
    assert v.dtype == np.int32
    np.testing.assert_array_equal(v, np.where(b.loss_mask > 0, 5, -1))
    w = b.with_behaviour()
    np.testing.assert_array_equal(w.behaviour_logp, b.old_logp)
    assert w.with_behaviour() is w


def test_versions_per_token_with_step_default_and_masked_tool_tokens():
    convs = [Conversation([1, 2], [3, 4, 5], [-0.1, -0.2, -0.3], sample=0, group=0, turn=0,
                          response_versions=[2, 2, 3], response_mask=[1, 0, 1]),
             Conversation([1], [6, 7], [-0.4, -0.5], sample=1, group=0, turn=0)]
    b = build_batch(convs, [0.0, 1.0], [0, 0], version=4)
    assert b.version.tolist() == [[-1, -1, 2, -1, 3], [-1, 4, 4, -1, -1]]
    np.testing.assert_array_equal(b.behaviour_logp, b.old_logp)
    np.testing.assert_array_equal(b.behaviour_logp[0], np.float32([0, 0, -0.1, 0, -0.3]))
    np.testing.assert_array_equal(b.token_versions(99), b.version)
    with pytest.raises(ValueError, match="no response_versions and no step version"):
        build_batch(convs, [0.0, 1.0], [0, 0])
    with pytest.raises(ValueError, match="response_versions length 1 != 2"):
        Conversation([1], [6, 7], [-0.4, -0.5], sample=1, group=0, turn=0, response_versions=[1])


def test_versions_survive_select_concat_and_pad():
    mk = lambda lens, v: build_batch([Conversation([1], [5] * k, [-0.5] * k, sample=i, group=0, turn=0)
                                      for i, k in enumerate(lens)], [0.0] * len(lens), [0] * len(lens), version=v)
    a, b = mk([1, 2], 0), mk([4], 1)
    c = concat_batches([a, b])
    assert c.version.tolist() == [[-1, 0, -1, -1, -1], [-1, 0, 0, -1, -1], [-1, 1, 1, 1, 1]]
    np.testing.assert_array_equal(c.behaviour_logp, c.old_logp)
    s = c.select_samples(np.array([False, True, True]))
    assert s.version.tolist() == c.version[1:].tolist()
    out = pad_rows_tokens(c, 4, 8)
    assert out["version"].shape == (4, 8) and (out["version"][3] == -1).all() and (out["version"][:, 5:] == -1).all()
    with pytest.raises(ValueError, match="version is set in batches"):
        concat_batches([a, _batch([1], [0.0], [0], optional=False)])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5), st.integers(0, 6), st.booleans()), min_size=1,
                max_size=6))
def test_versions_roundtrip_property(rows):
    """Every trained response token keeps the version it was given; every other position is -1."""
    convs = []
    for i, (p, r, v0, tool) in enumerate(rows):
        vers = [v0 + (k * 2 >= r) for k in range(r)]  # a trajectory continued across one update halfway
        mask = [0 if (tool and k == 0) else 1 for k in range(r)]
        convs.append(Conversation([9] * p, list(range(10, 10 + r)), [-0.25 * (k + 1) for k in range(r)], sample=i,
                                  group=0, turn=0, response_versions=vers, response_mask=mask))
    b = build_batch(convs, [0.0] * len(rows), [0] * len(rows))
    for i, c in enumerate(convs):
        p, r = len(c.prompt_ids), len(c.response_ids)
        want = np.full(b.input_ids.shape[1], -1)
        want[p:p + r] = np.where(np.asarray(c.response_mask) > 0, c.response_versions, -1)
        np.testing.assert_array_equal(b.version[i], want)
    assert ((b.version >= 0) == (b.loss_mask > 0)).all()
    np.testing.assert_array_equal(b.behaviour_logp, b.old_logp)
