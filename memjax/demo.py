"""`python -m memjax.demo`: the command's name; the command is memjax/cli/demo.py."""
from .cli.demo import main

if __name__ == "__main__":
    raise SystemExit(main())
