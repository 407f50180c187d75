"""What test children of multi-process runs put on PYTHONPATH: the repository and tests/child_site, whose
sitecustomize lets every process write the persistent compilation cache (its docstring says why). Also the XLA
flags of children that compile to read HLO or memory, or only check that a command runs: LLVM at -O0 without its
expensive passes (XLA's own passes, and so the HLO and buffer assignment, unchanged; less compile CPU)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "child_site")])
FAST_LLVM = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def with_fast_llvm(env: dict) -> dict:
    """`env` with FAST_LLVM appended to its XLA_FLAGS."""
    return dict(env, XLA_FLAGS=" ".join(filter(None, [env.get("XLA_FLAGS", ""), FAST_LLVM])))
