"""The tiny task of memjax/systems/sumer (see the package docstring one folder up)."""
