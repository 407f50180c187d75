"""Agent systems on the one training loop: the System interface and registry (base.py) and one folder per paper
(memagent/, sumer/, memory_r1/, memory_r2/), each registering its Systems with `@register` when imported.

This module is the one place that imports every paper's folder (so `import memjax.systems` registers them all);
a paper's folder imports shared packages and base.py, never another paper's folder, and no shared package
imports a paper's folder (tests/unit/test_layering.py)."""

from .base import AgentSection, CountingStream, DataStream, SlicedStream, System, build, get, names, register, shard_stream
from .memagent.system import HotpotQAData, MemAgentSection, MemAgentSystem
from .memagent.tiny.system import TinySection, TinySystem
from .memory_r1.system import MemoryR1AnswerSection, MemoryR1AnswerSystem, MemoryR1ManagerSection, MemoryR1ManagerSystem
from .memory_r1.tiny.answer_system import MemoryR1AnswerTinySection, MemoryR1AnswerTinySystem
from .memory_r1.tiny.system import MemoryR1TinySection, MemoryR1TinySystem
from .memory_r2.system import MemoryR2Section, MemoryR2System
from .memory_r2.tiny.system import MemoryR2TinySection, MemoryR2TinySystem
from . import sumer  # noqa: F401  (registers "sumer", "tiny_sumer")

__all__ = ["AgentSection", "CountingStream", "DataStream", "SlicedStream", "shard_stream", "System", "build", "get", "names", "register",
           "HotpotQAData", "MemAgentSection", "MemAgentSystem", "MemoryR2Section", "MemoryR2System", "TinySection",
           "TinySystem", "MemoryR1ManagerSection", "MemoryR1ManagerSystem", "MemoryR1AnswerSection",
           "MemoryR1AnswerSystem", "MemoryR1AnswerTinySection", "MemoryR1AnswerTinySystem", "MemoryR1TinySection", "MemoryR1TinySystem", "MemoryR2TinySection", "MemoryR2TinySystem"]
