"""Agent systems on the one training loop: the System interface and registry (base.py) and one module per
system, each registering itself with `@register` on import (see base.py)."""

from .base import AgentSection, CountingStream, DataStream, System, build, get, names, register

__all__ = ["AgentSection", "CountingStream", "DataStream", "System", "build", "get", "names", "register"]

from . import memory_r1, memory_r1_tiny  # noqa: E402,F401  (register memory_r1_manager, memory_r1_answer, memory_r1_tiny)
