"""memjax benchmarks, by purpose (docs/architecture.md, "Benchmarks"). At this level: the shared machinery's
throughput and memory measurements (engine, kernels, trainer, plan, multi-host, retrieval, the GPU pass and the
deviceless GPU compiles), each runnable as `python -m benchmarks.<name>`. `peers/`: memjax beside other frameworks.
`<paper>/` (memagent, sumer, memory_r1, memory_r2): that paper's studies, `python -m benchmarks.<paper>.<name>`.
Results (JSON / markdown / PNG) go to `benchmarks/results/`, each GPU figure named with the device it was measured
on. Benchmarks are measurements, not tests; a paper's folder imports the shared ones, never another paper's.
`guard_committed(paths, allow)`: a script refuses (one line, exit 2) to write over a result file that git tracks
(a committed benchmarks/results file) unless its user asks for it (`--update-committed`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def committed(path: Path) -> bool:
    """Whether git tracks `path` (False outside a git work tree or without git)."""
    path = Path(path).absolute()
    try:
        r = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=path.parent, capture_output=True,
                           timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def guard_committed(paths, allow: bool, prog: str) -> str | None:
    """The one-line refusal when a path is a committed result and `allow` is off, else None."""
    hit = [p for p in paths if Path(p).is_file() and committed(Path(p))]
    if hit and not allow:
        return (f"{prog}: error: {hit[0]} is a committed result; write elsewhere with --out DIR, or "
                "--update-committed to replace it")
    return None
