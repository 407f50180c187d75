"""memjax.rl.batch: the one field table and the operations that walk it (select, concat, pad), with every
optional field set, against per-field expectations written out by hand."""

import numpy as np
import pytest

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
