"""run_workflow with the engine's multi-turn continuation (Request.retain / Request.parent): a continued
turn generates exactly what the same turn submitted with its whole prompt generates, and every retained
page is given back (at the continuation, at the trajectory's end, or when the run fails)."""

import pytest

from memjax import load_hf
from memjax.agents import Request, Workflow, run_workflow
from memjax.engine import Engine, EngineConfig, SamplingParams

from conftest import golden_dir
from tests.engine_shapes import SMALL as CFG  # the loop other modules compile too

NEW = [7, 8, 9]


class TwoTurn(Workflow):
    """Turn 0 on the sample's ids, turn 1 on (turn 0's prompt + response + NEW); `continue_` picks how turn 1
    is submitted; `keep_extra` retains turn 1 too (never continued: released when the trajectory ends)."""

    def __init__(self, continue_, keep_extra=False, fail=False):
        self.continue_, self.keep_extra, self.fail = continue_, keep_extra, fail

    def start(self, traj, prepared):
        traj.state = {"prompt": list(prepared), "out": []}
        return [Request(list(prepared), SamplingParams(temperature=0.0, max_tokens=5), retain=self.continue_)]

    def react(self, traj, request, completion):
        st = traj.state
        st["out"].append(list(completion.token_ids))
        if len(st["out"]) == 2:
            if self.fail:
                raise RuntimeError("workflow bug")
            return []
        full = st["prompt"] + list(completion.token_ids) + NEW
        if self.continue_:
            return [Request(NEW, SamplingParams(temperature=0.0, max_tokens=5), parent=completion,
                            retain=self.keep_extra)]
        return [Request(full, SamplingParams(temperature=0.0, max_tokens=5))]

    def reward(self, traj):
        return 0.0

    def trace(self, traj):
        return {"out": traj.state["out"]}


@pytest.fixture(scope="module")
def engine():
    return Engine(load_hf(golden_dir("untied_kv2")), EngineConfig(**CFG))


SAMPLES = [list(range(3, 14)), list(range(20, 37))]


def test_continued_turns_match_full_prompts_and_free_pages(engine):
    plain = run_workflow(engine, TwoTurn(False), SAMPLES, group_size=2, record=False)
    before = engine.stats.get("continued_tokens", 0)
    cont = run_workflow(engine, TwoTurn(True, keep_extra=True), SAMPLES, group_size=2, record=False)
    assert engine.stats.get("continued_tokens", 0) > before
    assert engine.retained_pages == 0
    assert plain.traces == cont.traces and all(len(t["out"]) == 2 for t in cont.traces)


def test_failed_run_releases_retained_pages(engine):
    with pytest.raises(RuntimeError, match="workflow bug"):
        run_workflow(engine, TwoTurn(True, keep_extra=True, fail=True), SAMPLES, group_size=2, record=False)
    while engine.num_unfinished:  # aborted requests already on the device finish there
        engine.step()
    assert engine.retained_pages == 0
