"""`python -m memjax.run_agent`: the command's name; the command is memjax/cli/run_agent.py."""
from .cli.run_agent import main

if __name__ == "__main__":
    raise SystemExit(main())
