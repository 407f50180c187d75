"""The workflow interface and `run_workflow`: the one rollout driver every agent workflow runs on.

Owns: the contract between an agent workflow (MemAgent, the tiny task, tool-use agents, ...) and the engine
(`Workflow`: a state machine per trajectory, its protocol in the class docstring), and everything generic about
driving it: submission, throttling (`max_active` trajectories in flight), sampling seeds, the progress bar,
statistics, exception safety, `RolloutBatch` building and `collect_traces()` (the traces of every run inside a block).
Invariants:
- ONE seed formula: request k of trajectory i (i = sample * G + rollout, offset by `first_trajectory`) is sampled
  with seed (seed * 1_000_003 + i * 10_007 + k) mod (2^31 - 1), so results depend only on (seed, sample order), not
  on scheduling, `max_active` or how samples are split over processes.
- Requests are submitted in trajectory order, and follow-ups the moment their predecessor finishes.
- On any exception the requests in flight are aborted (`Engine.abort`) before it propagates, and every retained
  continuation (`Request(retain=True)`, see `run_workflow`) is released, so the engine stays usable and no KV
  pages leak.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from ..core import seeds
from ..engine import Completion, SamplingParams
from ..parallel import is_primary
from ..rl.batch import Conversation, RolloutBatch, build_batch

SEED_MODULUS = seeds.MODULUS
request_seed = seeds.request  # the driver's one formula (memjax/core/seeds.py)
_TRACE_SINKS: list[list[dict[str, Any]]] = []  # collect_traces(): every run_workflow's traces, for a tool that runs a
# system's own evaluation code and shows what its agent did (memjax.run_agent)


class collect_traces:
    """`with collect_traces() as traces:` appends the traces of every run_workflow finished inside the block."""

    def __enter__(self) -> list[dict[str, Any]]:
        self.traces: list[dict[str, Any]] = []
        _TRACE_SINKS.append(self.traces)
        return self.traces

    def __exit__(self, *exc) -> None:
        _TRACE_SINKS.remove(self.traces)


@dataclass(frozen=True)
class Request:
    """One generation a workflow asks for. `params.seed` is ignored: the driver sets it."""

    prompt: list[int]
    params: SamplingParams
    role: int = 0
    is_final: bool = False
    tag: Any = None  # workflow data handed back with the completion
    retain: bool = False  # keep the completion's KV pages for a continuation (Engine.submit(retain=True))
    parent: Completion | None = None  # continue this retained completion; `prompt` = the new tokens only


@dataclass
class Trajectory:
    """One (sample, rollout) trajectory; `state` belongs to the workflow, the rest to the driver."""

    index: int  # sample-major: sample * group_size + rollout
    sample: int
    rollout: int
    state: Any = None
    turns: list[tuple[Request, Completion]] = field(default_factory=list)  # when recording
    n_requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    reward: float = 0.0


@dataclass
class WorkflowResult:
    batch: RolloutBatch | None  # None when record=False
    rewards: list[float]  # per trajectory, sample-major
    traces: list[dict[str, Any]]
    stats: dict[str, float]


class Workflow(abc.ABC):
    """A multi-turn agent workflow: a small state machine per trajectory.

    - `prepare(sample)` once per sample (e.g. tokenise the document; shared by the sample's G trajectories);
    - `start(traj, prepared)` fills `traj.state` and returns the trajectory's first `Request`s;
    - `react(traj, request, completion)` returns the next requests; a trajectory is finished when it has no
      request in flight and `react` returned none; then `reward(traj)` scores it (the reward inputs are the
      workflow's: e.g. the final answer text and the gold answers);
    - `conversations(traj)` turns the recorded (request, completion) turns into `Conversation` rows (default:
      one row per turn, the whole response trained on; tool workflows override it to mask tool output);
    - `trace(traj)` is the readable record; `stats(trajs)` adds workflow-specific counters."""

    pad_id: int = 0

    def prepare(self, sample: Any) -> Any:
        return sample

    @abc.abstractmethod
    def start(self, traj: Trajectory, prepared: Any) -> list[Request]: ...

    @abc.abstractmethod
    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]: ...

    @abc.abstractmethod
    def reward(self, traj: Trajectory) -> float: ...

    def conversations(self, traj: Trajectory) -> list[Conversation]:
        return [Conversation(req.prompt, comp.token_ids, comp.logprobs, sample=traj.index, group=traj.sample,
                             turn=k, role=req.role, is_final=req.is_final,
                             response_versions=comp.extra.get("versions")) for k, (req, comp) in enumerate(traj.turns)]

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        return {"sample": traj.sample, "rollout": traj.rollout, "reward": traj.reward}

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        return {}


def run_workflow(engine, workflow: Workflow, samples: Iterable[Any], *, group_size: int = 1, seed: int = 0,
                 max_active: int = 0, record: bool = True, progress: bool | None = None,
                 first_trajectory: int = 0, should_stop=None) -> WorkflowResult:
    """Run `group_size` trajectories of every sample to the end on `engine` (see the module docstring).

    Multi-turn continuation (the engine's submit(..., parent=, retain=)): a Request with retain=True keeps its
    completion's KV pages; a later Request with parent=<that completion> holds only the new tokens and continues
    the retained sequence; the driver releases the parent right after submitting its (single) continuation, and
    releases every retained completion still held when its trajectory finishes or the run fails.

    max_active: trajectories in flight at once (0 = all). record=False keeps only rewards, traces and stats
    (no conversations, no batch). progress: show a bar (default: the engine config's `progress`).
    should_stop: asked before every engine step; true ends the run with `HeldoutStopped` (in-flight requests
    aborted)."""
    trajs, run_stats = drive(engine, workflow, samples, group_size=group_size, seed=seed, max_active=max_active,
                             record=record, progress=progress, first_trajectory=first_trajectory,
                             should_stop=should_stop)
    result = summarize(workflow, trajs, run_stats, record=record)
    for sink in _TRACE_SINKS:
        sink.extend(result.traces)
    return result


def drive(engine, workflow: Workflow, samples: Iterable[Any], *, group_size: int = 1, seed: int = 0,
          max_active: int = 0, record: bool = True, progress: bool | None = None,
          first_trajectory: int = 0, should_stop=None) -> tuple[list[Trajectory], dict[str, float]]:
    """The finished trajectories (rewarded) and the run-level statistics (seconds, counts, engine_* deltas):
    run_workflow without the summary."""
    if group_size <= 0:
        raise ValueError(f"run_workflow: group_size must be > 0, got {group_size}")
    if max_active < 0:
        raise ValueError(f"run_workflow: max_active must be >= 0, got {max_active}")
    t0, before = time.perf_counter(), dict(engine.stats)
    trajs: list[Trajectory] = []
    prepared: list[Any] = []
    for s, sample in enumerate(samples):
        prepared.append(workflow.prepare(sample))
        trajs += [Trajectory(s * group_size + g, s, g) for g in range(group_size)]
    inflight: dict[int, tuple[Trajectory, Request]] = {}
    held: dict[int, dict[int, Completion]] = {}  # trajectory -> retained completions not yet continued
    open_requests = [0] * len(trajs)
    limit = max_active or len(trajs)
    next_traj, n_active, done = 0, 0, 0
    step_out: list[Completion] = []

    def submit(traj: Trajectory, reqs: list[Request]):
        for req in reqs:
            params = dataclasses.replace(req.params, seed=request_seed(seed, first_trajectory + traj.index,
                                                                       traj.n_requests))
            traj.n_requests += 1
            open_requests[traj.index] += 1
            if req.parent is None and not req.retain:
                inflight[engine.submit(req.prompt, params)] = (traj, req)
                continue
            inflight[engine.submit(req.prompt, params, parent=req.parent, retain=req.retain)] = (traj, req)
            if req.parent is not None:
                held.get(traj.index, {}).pop(id(req.parent), None)
                engine.release(req.parent)

    def release_all(index: int):
        for comp in held.pop(index, {}).values():
            engine.release(comp)

    show = (getattr(engine.config, "progress", False) if progress is None else progress) and len(trajs) >= 8 \
        and is_primary()  # several processes: process 0's bar only
    try:
        with Progress(TextColumn("rollout"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      disable=not show, transient=True) as bar:
            task = bar.add_task("rollout", total=len(trajs))
            while done < len(trajs):
                while n_active < limit and next_traj < len(trajs):
                    traj = trajs[next_traj]
                    reqs = workflow.start(traj, prepared[traj.sample])
                    if not reqs:
                        raise ValueError(f"{type(workflow).__name__}.start returned no request for sample "
                                         f"{traj.sample}")
                    submit(traj, reqs)
                    next_traj, n_active = next_traj + 1, n_active + 1
                if should_stop is not None and should_stop():
                    from ..parallel.lifecycle import HeldoutStopped

                    step_out = []  # the last step's completions reached the workflow (held ones are released below)
                    raise HeldoutStopped()
                step_out = engine.step()
                for comp in step_out:
                    traj, req = inflight.pop(comp.request_id)
                    open_requests[traj.index] -= 1
                    traj.prompt_tokens += len(req.prompt)
                    traj.generated_tokens += len(comp.token_ids)
                    if record:
                        traj.turns.append((req, comp))
                    if req.retain and comp.kv is not None:
                        held.setdefault(traj.index, {})[id(comp)] = comp
                    follow = workflow.react(traj, req, comp)
                    if follow:
                        submit(traj, follow)
                    elif not open_requests[traj.index]:
                        release_all(traj.index)
                        traj.reward = float(workflow.reward(traj))
                        done, n_active = done + 1, n_active - 1
                        bar.update(task, completed=done)
    except BaseException:
        if inflight:
            engine.abort(list(inflight))
        for index in list(held):
            release_all(index)
        for comp in step_out:  # completions of the failing step that never reached the workflow
            if comp.kv is not None:
                engine.release(comp)
        raise
    run_stats = {"seconds": time.perf_counter() - t0, "trajectories": len(trajs),
                 "conversations": sum(t.n_requests for t in trajs),
                 "prompt_tokens": sum(t.prompt_tokens for t in trajs),
                 "generated_tokens": sum(t.generated_tokens for t in trajs),
                 **{f"engine_{k}": engine.stats[k] - before.get(k, 0) for k in engine.stats}}
    return trajs, run_stats


def summarize(workflow: Workflow, trajs: Sequence[Trajectory], run_stats: dict[str, float], *,
              record: bool = True) -> WorkflowResult:
    """The WorkflowResult of finished trajectories: rewards, traces, the run's and the workflow's statistics
    and (record) the RolloutBatch."""
    rewards = [t.reward for t in trajs]
    batch = None
    if record and trajs:
        convs = [cv for t in trajs for cv in workflow.conversations(t)]
        batch = build_batch(convs, rewards, [t.sample for t in trajs], pad_id=workflow.pad_id)
    engine = {k: v for k, v in run_stats.items() if k.startswith("engine_")}
    stats = {**{k: v for k, v in run_stats.items() if k not in engine}, **workflow.stats(trajs),
             "mean_reward": sum(rewards) / max(len(rewards), 1), **engine}
    return WorkflowResult(batch, rewards, [workflow.trace(t) for t in trajs], stats)
