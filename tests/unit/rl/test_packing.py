"""memjax.rl.packing: layout invariants, and packed rows train exactly like one conversation per row."""

from dataclasses import replace

import jax
import numpy as np
import pytest
from flax import nnx

from memjax.model import presets
from memjax.model.qwen2 import init_model
from memjax.rl import Conversation, build_batch
from memjax.rl.advantages import with_advantages
from memjax.rl.packing import pack, row_length
from memjax.rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig

CFG = presets.get("tiny").replace(num_layers=2)
# The unpacked updates (one conversation per row, dense attention) of both tests: rows of the one 48-token bucket, and
# one optimizer (its eps and clip are constants of the compiled update, the learning rate an argument), so they run
# one update program; eps=1e-3 keeps Adam's first step smooth in the gradient, so parameters compare gradients.
OPT = OptimConfig(lr=1e-3, warmup_steps=4, grad_clip=0.0, eps=1e-3)


def test_layout_segments_positions_and_round_trip():
    lengths = np.array([5, 3, 7, 2, 8, 1])
    p = pack(lengths, 8, max_segments=3)
    x = np.arange(6 * 8).reshape(6, 8) + 1
    rows = p.tokens(x)
    seg, pos = p.segment_ids(), p.positions()
    assert p.num_rows == 4 and abs(p.pad_fraction - (1 - 26 / 32)) < 1e-12
    for i, n in enumerate(lengths):  # each conversation contiguous, its own segment, positions from 0
        r, o = p.row[i], p.offset[i]
        np.testing.assert_array_equal(rows[r, o:o + n], x[i, :n])
        np.testing.assert_array_equal(pos[r, o:o + n], np.arange(n))
        assert len(set(seg[r, o:o + n])) == 1 and seg[r, o] > 0
    assert ((seg > 0).sum(1) == np.bincount(p.row, lengths, 4)).all()  # padding is segment 0
    assert np.bincount(p.row).max() <= 3
    np.testing.assert_array_equal(p.unpack(rows, 8), np.where(np.arange(8) < lengths[:, None], x, 0))
    assert row_length(300, (256, 512, 1024), 64) == 512 and row_length(300, (), 64) == 320
    with pytest.raises(ValueError, match="largest row bucket"):
        row_length(2000, (256, 512, 1024), 64)


def _batch(seed=0, n=12):
    r = np.random.default_rng(seed)
    convs = []
    for i in range(n):
        p, k = int(r.integers(3, 20)), int(r.integers(2, 20))
        convs.append(Conversation(r.integers(1, CFG.vocab_size, p).tolist(), r.integers(1, CFG.vocab_size, k).tolist(),
                                  (-r.random(k)).tolist(), sample=i // 2, group=i // 4, turn=i % 2))
    b = build_batch(convs, r.random(n // 2).round(1).tolist(), [s // 2 for s in range(n // 2)])
    return b.replace(row_weight=r.uniform(0.5, 1.5, n).astype(np.float32))


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_packed_equals_unpacked(agg):
    """One update: loss, gradient norm and new parameters of packed rows (blockwise attention, segment ids)
    equal those of one conversation per row (dense attention) to fp32 rounding."""
    jax.config.update("jax_default_matmul_precision", "highest")
    batch = _batch()
    out = []
    for upd in (UpdateConfig(micro_rows=4, pad_tokens=8, row_buckets=(48,), attention="dense"),
                UpdateConfig(micro_rows=2, pack=True, row_buckets=(48,), max_segments=4, attention="blockwise")):
        m = init_model(CFG, seed=0)
        tr = Trainer(m, replace(OPT, lr=1e-2, warmup_steps=0), LossConfig(agg=agg), upd)
        st = tr.update(with_advantages(batch))
        out.append((st, [np.asarray(x) for x in jax.tree.leaves(nnx.state(m, nnx.Param))]))
    (a, pa), (b, pb) = out
    assert b["pad_fraction"] < a["pad_fraction"]
    assert abs(a["loss"] - b["loss"]) < 1e-6 and abs(a["grad_norm"] - b["grad_norm"]) < 1e-5 * a["grad_norm"]
    assert a["logp_mismatch_mean"] == pytest.approx(b["logp_mismatch_mean"], abs=1e-5)
    assert max(float(np.abs(x - y).max()) for x, y in zip(pa, pb)) < 1e-6


def test_schedule_counts_training_steps_and_dr_grpo_constant_is_configured():
    """Warm-up over training steps (update calls / the `step` given), not over the 3 optimizer steps of each
    call; the Dr.GRPO constant must come from the config."""
    batch = _batch()
    tr = Trainer(init_model(CFG, seed=0), OPT,
                 update=UpdateConfig(micro_rows=4, mini_batches=3, pad_tokens=8, row_buckets=(48,), attention="dense"))
    stats = [tr.update(with_advantages(batch)) for _ in range(3)]
    assert [s["lr"] for s in stats] == pytest.approx([0.0, 2.5e-4, 5e-4])
    assert all(s["optimizer_steps"] == 3 for s in stats)
    assert tr.update(with_advantages(batch), step=10)["lr"] == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="loss_scale_tokens"):
        LossConfig(agg="seq-mean-token-sum-norm")
    assert LossConfig(agg="seq-mean-token-sum-norm", loss_scale_tokens=1024).loss_scale_tokens == 1024
