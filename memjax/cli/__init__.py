"""memjax.cli: the command-line entry points that use a trained policy (run_agent) and their shared model-directory helpers."""
