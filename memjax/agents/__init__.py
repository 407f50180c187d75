"""memjax.agents: agent workflows that turn samples into engine requests and outputs into RolloutBatches.

workflow.py holds the interface and the one driver (`run_workflow`), toolcall.py the Qwen2.5 function-calling
format, heldout.py the held-out evaluation split over processes. Each paper's workflow lives in its own folder,
memjax/systems/<paper>/workflow.py.
Invariant: importing the package imports none of its modules (workflow.py pulls in the engine); the names below
resolve on first use (memjax/core/lazy.py)."""

from ..core.lazy import exports, names

__all__ = ["Request", "Trajectory", "Workflow", "WorkflowResult", "request_seed", "run_workflow"]
__getattr__, __dir__ = exports(globals(), names(".workflow", *__all__))
