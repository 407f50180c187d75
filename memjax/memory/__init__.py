"""Memory for the memory agents: the bank (records, operations, snapshots) and retrieval over it.

Stage: below agents/rl; imports only numpy and memjax.data-level code (never agents or rl).
"""

from .bank import BankSnapshot, MemoryBank, MemoryRecord, is_hex_id
from .ops import OpStats, apply_mem0, apply_r2, parse_json_object

__all__ = ["BankSnapshot", "MemoryBank", "MemoryRecord", "is_hex_id", "OpStats", "apply_mem0", "apply_r2",
           "parse_json_object"]
