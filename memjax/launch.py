"""`python -m memjax.launch`: the command's name; the command is memjax/cli/launch.py."""
from .cli.launch import main

if __name__ == "__main__":
    raise SystemExit(main())
