"""`python -m memjax.plan`: the command's name; the command is memjax/cli/plan.py."""
from .cli.plan import main

if __name__ == "__main__":
    raise SystemExit(main())
