"""What test children of multi-process runs put on PYTHONPATH: the repository and tests/child_site, whose
sitecustomize lets every process write the persistent compilation cache (its docstring says why)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "child_site")])
