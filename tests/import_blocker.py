"""Source text that, run first in a child Python, makes importing the named top-level packages fail.

`blocker(packages, why)` returns code that puts a meta-path finder in front of the import system; any import of
`pkg` or `pkg.x` for a named package raises ImportError("blocked: <why>: <name>"). Used by tests that check what a
process imports: tests/e2e/test_imports.py (the CLIs' cheap paths) and tests/e2e/benchmarks/test_gpu_pass.py (what the
GPU image lacks).
"""


def blocker(packages: tuple[str, ...], why: str) -> str:
    return f"""
import importlib.abc, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {tuple(packages)!r}:
            raise ImportError("blocked: {why}: " + name)
sys.meta_path.insert(0, _Block())
"""
