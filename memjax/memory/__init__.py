"""Memory for the memory agents: the bank (records, operations, snapshots) and retrieval over it.

Stage: below agents/rl; imports numpy, memjax.data (LoCoMo records) and, lazily, memjax.model (mean-pool embedder).
"""

from .bank import BankSnapshot, MemoryBank, MemoryRecord, is_hex_id
from .embedders import (DecoderMeanPoolEmbedder, Embedder, FileEmbedder, HashedBowEmbedder, WordLlamaEmbedder,
                        cached_encode, l2_normalize)
from .ops import OpStats, apply_mem0, apply_r2, mem0_view, parse_json_object, r2_view
from .retrieval import Hit, Retriever, conversation_records, rrf

__all__ = ["BankSnapshot", "MemoryBank", "MemoryRecord", "is_hex_id", "OpStats", "apply_mem0", "apply_r2",
           "parse_json_object", "mem0_view", "r2_view", "DecoderMeanPoolEmbedder", "Embedder", "FileEmbedder", "HashedBowEmbedder",
           "WordLlamaEmbedder", "cached_encode", "l2_normalize", "Hit", "Retriever", "conversation_records", "rrf"]
