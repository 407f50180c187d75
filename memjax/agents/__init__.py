"""memjax.agents: agent workflows that turn samples into engine requests and outputs into RolloutBatches.

workflow.py holds the interface and the one driver (`run_workflow`); one module per workflow beside it."""

from .memagent import FINAL_TEMPLATE, MEMORY_TEMPLATE, MemAgent, MemAgentConfig, MemAgentResult, build_prompt
from .workflow import Request, Trajectory, Workflow, WorkflowResult, request_seed, run_workflow

__all__ = ["FINAL_TEMPLATE", "MEMORY_TEMPLATE", "MemAgent", "MemAgentConfig", "MemAgentResult", "Request",
           "Trajectory", "Workflow", "WorkflowResult", "build_prompt", "request_seed", "run_workflow"]
