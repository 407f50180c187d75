"""Entry point of `python -m memjax.report`: only calls memjax.report.cli.main."""

import sys

from memjax.report.cli import main

sys.exit(main())
