"""memjax.cli: the command-line entry points, one module each (train, evaluate, convert, plan, launch, demo,
run_agent, with `check`: what `--check` prints) and the helpers only they use. `python -m memjax.<name>` runs
them through five-line modules in the package root; importing this package imports nothing else (`python -m
memjax.launch` and bad command lines fail before jax loads)."""
