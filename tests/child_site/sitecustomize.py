"""Test children only (the multi-process tests put this folder on their children's PYTHONPATH: tests/child_env.py):
every process of a multi-process run writes the persistent compilation cache, not only process 0.

jax writes cache entries from process 0 alone (jax._src.compiler._cache_write: to spare shared filesystems
contention), and on the CPU backend a program's cache key includes the process (the topology fingerprint of its
devices), so processes 1.. of every multi-process test run compiled every program cold, run after run: about 26
CPU-s per process of a tiny two-process `memjax.train` instead of 10. Here each process writes its own entries
to the session's local cache directory; a later run of the same process id finds them. A hit is the executable XLA
would have built (the cache's own guarantee), so what the tests check does not change. Nothing is imported until
jax._src.compiler is: processes that never import jax pay nothing. With MEMJAX_COMPILE_CENSUS set (`make census`),
the process also records its compiles (tests/compile_census.py).
"""

import importlib.abc
import importlib.machinery
import os
import sys
import warnings


def _patch(compiler) -> None:
    from jax._src import compilation_cache, config, distributed

    write = compiler._cache_write

    def cache_write_every_process(cache_key, compile_time_secs, module_name, backend, executable):
        if distributed.global_state.process_id == 0:
            return write(cache_key, compile_time_secs, module_name, backend, executable)
        if compile_time_secs < config.persistent_cache_min_compile_time_secs.value:
            return
        try:  # as jax's own write: a failed write is a warning, never a failed compile
            compilation_cache.put_executable_and_time(cache_key, module_name, executable, backend,
                                                      int(compile_time_secs))
        except Exception as e:
            warnings.warn(f"Error writing persistent compilation cache entry for '{module_name}': {e!r}")

    compiler._cache_write = cache_write_every_process
    if os.environ.get("MEMJAX_COMPILE_CENSUS"):  # `make census` (tests/compile_census.py)
        from tests.compile_census import install

        install(compiler)


class _AfterCompiler(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "jax._src.compiler":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        sys.meta_path.remove(self)
        return spec


sys.meta_path.insert(0, _AfterCompiler())
