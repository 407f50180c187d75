"""`python -m memjax.convert`: the command's name; the command is memjax/cli/convert.py."""
from .cli.convert import main

if __name__ == "__main__":
    raise SystemExit(main())
