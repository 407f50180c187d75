"""The tiny task of memjax/systems/memory_r2 (see the package docstring one folder up)."""
