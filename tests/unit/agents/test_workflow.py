"""memjax.agents.workflow.run_workflow: the seed formula, scheduling independence, batch building and
exception safety (in-flight requests aborted, the engine usable and unchanged afterwards), on a toy
three-turn workflow over the golden untied_kv2 checkpoint (vocabulary 512)."""

import numpy as np
import pytest

from memjax import load_hf
from memjax.agents import Request, Workflow, request_seed, run_workflow
from memjax.engine import Engine, EngineConfig, SamplingParams

from conftest import golden_dir

CFG = dict(max_slots=4, page_size=4, window=64, prefill_slots=2, prefill_chunk=8, progress=False)
TURNS = 3


class Echo(Workflow):
    """Turn k's prompt is the sample's ids followed by every earlier response; reward = tokens generated."""

    def __init__(self, fail_after: int | None = None):
        self.fail_after, self.seen = fail_after, 0

    def start(self, traj, prepared):
        traj.state = {"prompt": list(prepared), "turn": 0, "n": 0}
        return [self._req(traj.state)]

    def _req(self, st):
        return Request(st["prompt"], SamplingParams(temperature=1.0, max_tokens=4, seed=123),
                       role=st["turn"], is_final=st["turn"] == TURNS - 1)

    def react(self, traj, request, completion):
        self.seen += 1
        if self.fail_after is not None and self.seen > self.fail_after:
            raise RuntimeError("workflow bug")
        st = traj.state
        st["n"] += len(completion.token_ids)
        st["prompt"] = st["prompt"] + completion.token_ids
        st["turn"] += 1
        return [] if request.is_final else [self._req(st)]

    def reward(self, traj):
        return float(traj.state["n"])


class Recorder:
    """Wraps an engine and records every submitted SamplingParams."""

    def __init__(self, engine):
        self.e, self.params = engine, []
        self.config, self.stats = engine.config, engine.stats

    def submit(self, prompt, params):
        self.params.append(params)
        return self.e.submit(prompt, params)

    def step(self):
        return self.e.step()

    def abort(self, rids):
        self.e.abort(rids)


@pytest.fixture(scope="module")
def engine():
    return Engine(load_hf(golden_dir("untied_kv2")), EngineConfig(**CFG))


SAMPLES = [list(range(1 + 7 * s, 9 + 9 * s)) for s in range(3)]


def test_seeds_batch_and_scheduling(engine):
    eng = Recorder(engine)
    res = run_workflow(eng, Echo(), SAMPLES, group_size=2, seed=5)
    assert [p.seed for p in eng.params] != [123] * len(eng.params)  # the driver owns the seed
    want = sorted(request_seed(5, i, k) for i in range(6) for k in range(TURNS))
    assert sorted(p.seed for p in eng.params) == want
    assert request_seed(5, 4, 2) == (5 * 1_000_003 + 4 * 10_007 + 2) % (2**31 - 1)
    b = res.batch
    assert b.num_rows == 6 * TURNS and b.sample_group.tolist() == [0, 0, 1, 1, 2, 2]
    assert b.turn.tolist() == [0, 1, 2] * 6 and b.is_final.tolist() == [False, False, True] * 6
    assert res.rewards == [float(b.loss_mask[b.sample == i].sum()) for i in range(6)]
    assert res.stats["conversations"] == 6 * TURNS and res.stats["generated_tokens"] == b.loss_mask.sum()
    one = run_workflow(engine, Echo(), SAMPLES, group_size=2, seed=5, max_active=1)
    np.testing.assert_array_equal(one.batch.input_ids, b.input_ids)
    np.testing.assert_array_equal(one.batch.old_logp, b.old_logp)
    other = run_workflow(eng, Echo(), SAMPLES, group_size=2, seed=6)
    assert not np.array_equal(other.batch.input_ids, b.input_ids)
    assert run_workflow(eng, Echo(), SAMPLES, group_size=2, seed=5, record=False).batch is None


def test_exception_aborts_in_flight_requests(engine):
    eng = engine
    before = run_workflow(eng, Echo(), SAMPLES, group_size=2, seed=1)
    with pytest.raises(RuntimeError, match="workflow bug"):
        run_workflow(eng, Echo(fail_after=2), SAMPLES, group_size=2, seed=1)
    assert eng.num_unfinished == 0  # nothing left that a later run could receive
    again = run_workflow(eng, Echo(), SAMPLES, group_size=2, seed=1)
    np.testing.assert_array_equal(again.batch.input_ids, before.batch.input_ids)
    np.testing.assert_array_equal(again.batch.old_logp, before.batch.old_logp)
    with pytest.raises(ValueError, match="group_size"):
        run_workflow(eng, Echo(), SAMPLES, group_size=0)


def test_default_conversations_carry_engine_versions():
    """A completion whose engine recorded per-token policy versions (Completion.extra["versions"]) gives its
    conversation those versions; one without gives none (a synchronous batch)."""
    from memjax.agents.workflow import Trajectory
    from memjax.engine import Completion
    from memjax.rl.batch import build_batch

    req = Request([1, 2], SamplingParams(max_tokens=3))
    traj = Trajectory(0, 0, 0, turns=[(req, Completion([5, 6, 7], [-0.1, -0.2, -0.3], "stop", extra={"versions": [3, 3, 4]})),
                                      (req, Completion([8], [-0.4], "stop"))])
    convs = Echo().conversations(traj)
    assert list(convs[0].response_versions) == [3, 3, 4] and convs[1].response_versions is None
    b = build_batch(convs, [1.0], [0], version=4)
    assert b.version.tolist() == [[-1, -1, 3, 3, 4], [-1, -1, 4, -1, -1]]
