"""Agent systems on the one training loop: the System interface and registry (base.py) and one module per
system, each registering itself with `@register` on import (see base.py)."""

from . import sumer, tiny_sumer  # noqa: F401  (register)
from .base import AgentSection, CountingStream, DataStream, SlicedStream, System, build, get, names, register, shard_stream
from .memagent import HotpotQAData, MemAgentSection, MemAgentSystem
from .memory_r1 import MemoryR1AnswerSection, MemoryR1AnswerSystem, MemoryR1ManagerSection, MemoryR1ManagerSystem
from .memory_r1_answer_tiny import MemoryR1AnswerTinySection, MemoryR1AnswerTinySystem
from .memory_r1_tiny import MemoryR1TinySection, MemoryR1TinySystem
from .memory_r2 import MemoryR2Section, MemoryR2System
from .memory_r2_tiny import MemoryR2TinySection, MemoryR2TinySystem
from .tiny import TinySection, TinySystem

__all__ = ["AgentSection", "CountingStream", "DataStream", "SlicedStream", "shard_stream", "System", "build", "get", "names", "register",
           "HotpotQAData", "MemAgentSection", "MemAgentSystem", "MemoryR2Section", "MemoryR2System", "TinySection",
           "TinySystem", "MemoryR1ManagerSection", "MemoryR1ManagerSystem", "MemoryR1AnswerSection",
           "MemoryR1AnswerSystem", "MemoryR1AnswerTinySection", "MemoryR1AnswerTinySystem", "MemoryR1TinySection", "MemoryR1TinySystem", "MemoryR2TinySection", "MemoryR2TinySystem"]
