"""Per-process shards of a system's data stream (memjax/systems/base.py) and the checkpointed stream states
(memjax/rl/shares.py gather_states / own_state), in one process. The real 2-process resume is in
tests/e2e/parallel/test_multiprocess.py (the records consumed after a kill -9 and restart equal the uninterrupted run's)."""

import numpy as np
import pytest

from memjax.rl.shares import gather_states, own_state, share
from memjax.systems import CountingStream, SlicedStream, shard_stream


def _stream(calls):
    def make(start, n):
        calls.append((start, n))
        return [f"r{i}" for i in range(start, start + n)]

    return CountingStream(make, 5)


def test_shards_read_only_their_block_and_together_are_the_stream():
    whole = _stream([])
    calls = [[] for _ in range(3)]
    shards = [shard_stream(_stream(calls[p]), *share(5, p, 3)) for p in range(3)]
    for _ in range(3):
        want = next(whole)
        got = [next(s) for s in shards]
        assert [x for part in got for x in part] == want
        assert [r for s in shards for r in s.last_records] == [int(x[1:]) for x in want]
    # every process made only its own records: batch b, block [lo, hi) -> make(5 b + lo, hi - lo)
    for p in range(3):
        lo, hi = share(5, p, 3)
        assert calls[p] == [(5 * b + lo, hi - lo) for b in range(3)]
    states = [s.get_state() for s in shards]
    assert states == [whole.get_state()] * 3 == [{"pos": 15}] * 3
    with pytest.raises(ValueError, match="not inside a batch"):
        CountingStream(lambda s, n: [], 4, 2, 6)


def test_a_resumed_shard_continues_exactly():
    a = shard_stream(_stream([]), 2, 4)
    first = [next(a) for _ in range(4)]
    b = shard_stream(_stream([]), 2, 4)
    [next(b) for _ in range(2)]
    c = shard_stream(_stream([]), 2, 4)
    c.set_state(b.get_state())
    assert [next(c) for _ in range(2)] == first[2:]


def test_sliced_stream_keeps_its_block_and_the_wrapped_state():
    inner = iter([[1, 2, 3, 4], [5, 6, 7, 8]])

    class S:
        def __next__(self):
            return next(inner)

        def get_state(self):
            return {"x": 1}

        def set_state(self, st):
            self.st = st

    s = shard_stream(S(), 1, 3)
    assert isinstance(s, SlicedStream) and next(s) == [2, 3] and next(s) == [6, 7]
    assert s.get_state() == {"x": 1}


def test_checkpointed_states_per_process():
    assert gather_states({"pos": 8}) == [{"pos": 8}]  # one process
    assert own_state({"data": {"pos": 3}}) == {"pos": 3}  # a checkpoint from before per-process states
    assert own_state({"data": {"pos": 3}, "data_processes": [{"pos": 4}]}) == {"pos": 4}
    # written by 2 processes in the same state (a global position): any process count resumes it
    assert own_state({"data": {"pos": 4}, "data_processes": [{"pos": 4}, {"pos": 4}]}) == {"pos": 4}
    with pytest.raises(ValueError, match="resume it on 2 processes"):
        own_state({"data": {"pos": 4}, "data_processes": [{"pos": 4}, {"pos": 6}]})
    assert np.array_equal(np.asarray(share(4)), [0, 4])
