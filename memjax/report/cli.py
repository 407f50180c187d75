"""`python -m memjax.report OUT_DIR [OUT_DIR ...]`: write OUT_DIR/report.html for each run directory and print
its path. Exit 0 when every report was written, 2 (with a one-line error per directory) when one was not a run
directory. The page and its loading live in memjax.report.page / .load; this module only parses arguments.
"""

from __future__ import annotations

import argparse
import sys

from .load import ReportError
from .page import write_report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.report", description=__doc__.splitlines()[0])
    ap.add_argument("out_dirs", nargs="+", metavar="OUT_DIR", help="a run's out_dir (train, evaluate, LoCoMo)")
    args = ap.parse_args(argv)
    rc = 0
    for d in args.out_dirs:
        try:
            print(f"report: {write_report(d)}")
        except ReportError as e:
            print(f"memjax.report: error: {e}", file=sys.stderr)
            rc = 2
    return rc
