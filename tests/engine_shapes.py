"""The engine shape that unit tests share when what they check does not depend on it.

The generation loop's program depends on the model's architecture and on the EngineConfig fields that set array
shapes (max_slots, page_size, window, prefill_slots, prefill_chunk, the pool's page count) or the schedule, not on
the weights' values: tests that build an Engine of one architecture at SMALL compile the loop once per session
(tests/conftest.py's persistent compilation cache) however many engines and seeds they use. A test that needs
another shape (a short pool that forces preemption, page_size 16 for the Pallas kernels) sets its own. SMALL is
read-only: one module cannot change another's engines.
"""

from types import MappingProxyType

# 4 slots, 16 pages of 4 tokens per sequence, 2 prompts of up to 8 tokens prefilled per round
SMALL = MappingProxyType({"max_slots": 4, "page_size": 4, "window": 64, "prefill_slots": 2, "prefill_chunk": 8,
                          "progress": False})
