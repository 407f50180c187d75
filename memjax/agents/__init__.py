"""memjax.agents: agent workflows that turn samples into engine requests and outputs into RolloutBatches.

workflow.py holds the interface and the one driver (`run_workflow`), toolcall.py the Qwen2.5 function-calling
format, heldout.py the held-out evaluation split over processes. Each paper's workflow lives in its own folder,
memjax/systems/<paper>/workflow.py."""

from .workflow import Request, Trajectory, Workflow, WorkflowResult, request_seed, run_workflow

__all__ = ["Request", "Trajectory", "Workflow", "WorkflowResult", "request_seed", "run_workflow"]
