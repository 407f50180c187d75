"""memjax.parallel.lifecycle.peer_loss: which errors of a multi-process run are a lost peer (the runtime's one line
follows) and which are the run's own. The messages are the coordination service's and gloo's own words (strings of
jaxlib 0.11's libjax_common.so); the kill -9 case of the fault matrix (tests/e2e/parallel/test_fault_matrix.py) is the
real-process check, where a peer killed during orbax's save breaks the save's barrier."""

from __future__ import annotations

import pytest

from memjax.checkpoint.errors import CheckpointError
from memjax.core.cli import RunError
from memjax.parallel import lifecycle

LOST = [
    "Gloo AllReduce failed: Connection reset by peer",
    "DEADLINE_EXCEEDED: Barrier timed out. Id: async_write_complete. This usually happens because a task triggered "
    "the barrier too early or too slowly.",
    "UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n/job:jax_worker/task:1",
    "INTERNAL: Task /job:jax_worker/task:1 heartbeat timeout. This indicates that the remote task has failed, got "
    "preempted, or crashed unexpectedly.",
    "ABORTED: The tasks have crashed. Check the task logs for an earlier error",
]


def _checkpoint_error(msg: str) -> CheckpointError:
    """As RunCheckpoints.save raises it: a one-line error `from None` over the runtime's exception."""
    try:
        try:
            raise RuntimeError(msg)
        except RuntimeError as e:
            raise CheckpointError(f"/x/checkpoints: cannot save step 2 (JaxRuntimeError: {str(e)[:20]}...)") from None
    except CheckpointError as outer:
        return outer


@pytest.mark.parametrize("msg", LOST)
def test_lost_peer_seen_through_a_checkpoint_error(msg):
    assert lifecycle._lost_peer(RuntimeError(msg))
    assert lifecycle._lost_peer(_checkpoint_error(msg))


@pytest.mark.parametrize("msg", ["RESOURCE_EXHAUSTED: out of memory", "No space left on device",
                                 "orbax declined to save step 2"])
def test_own_errors_are_not_a_lost_peer(msg):
    assert not lifecycle._lost_peer(RuntimeError(msg))
    assert not lifecycle._lost_peer(_checkpoint_error(msg))


def test_peer_loss_waits_for_the_runtime_then_says_where_to_resume(monkeypatch, tmp_path):
    import jax

    slept = []
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(lifecycle.time, "sleep", slept.append)
    monkeypatch.setenv("MEMJAX_HEARTBEAT_S", "7")
    (tmp_path / "checkpoints" / "1").mkdir(parents=True)
    with pytest.raises(RunError, match=r"another process failed .*resume from .*checkpoints/1$"):
        with lifecycle.peer_loss(tmp_path / "checkpoints"):
            raise _checkpoint_error(LOST[1])
    assert slept == [12]  # the heartbeat and 5 s: the runtime ends the process first where the peer is gone
    with pytest.raises(CheckpointError, match="cannot save step 2"):  # its own error: at once, unchanged
        with lifecycle.peer_loss(tmp_path / "checkpoints"):
            raise _checkpoint_error("No space left on device")
    assert slept == [12]
