"""memjax.agents: agent workflows that turn samples into engine requests and outputs into RolloutBatches."""

from .memagent import FINAL_TEMPLATE, MEMORY_TEMPLATE, MemAgent, MemAgentConfig, MemAgentResult, build_prompt

__all__ = ["FINAL_TEMPLATE", "MEMORY_TEMPLATE", "MemAgent", "MemAgentConfig", "MemAgentResult", "build_prompt"]
