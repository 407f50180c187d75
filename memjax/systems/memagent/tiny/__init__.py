"""The tiny task of memjax/systems/memagent (see the package docstring one folder up)."""
