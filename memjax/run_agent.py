"""`python -m memjax.run_agent`: runs a memory agent on your own input (memjax/cli/run_agent.py)."""
from .cli.run_agent import main

if __name__ == "__main__":
    raise SystemExit(main())
