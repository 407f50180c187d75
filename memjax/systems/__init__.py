"""Agent systems on the one training loop: the System interface and registry (base.py) and one module per
system, each registering itself with `@register` on import (see base.py)."""

from .base import AgentSection, CountingStream, DataStream, System, build, get, names, register
from .memagent import HotpotQAData, MemAgentSection, MemAgentSystem
from .tiny import TinySection, TinySystem

__all__ = ["AgentSection", "CountingStream", "DataStream", "System", "build", "get", "names", "register",
           "HotpotQAData", "MemAgentSection", "MemAgentSystem", "TinySection", "TinySystem"]
