"""The tiny task of memjax/systems/memory_r1 (see the package docstring one folder up)."""
