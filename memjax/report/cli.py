"""`python -m memjax.report OUT_DIR [OUT_DIR ...]`: write OUT_DIR/report.html for each run directory and print
its path. Exit 0 when every report was written, 2 (with a one-line error per directory) when one was not a run
directory. `--screenshot PNG` also renders the (single) report with headless Chromium into PNG (memjax.report.browser).
The page and its loading live in memjax.report.page / .load; this module only parses arguments.
"""

from __future__ import annotations

import argparse
import sys

from .load import ReportError
from .page import write_report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.report", description=__doc__.splitlines()[0])
    ap.add_argument("out_dirs", nargs="+", metavar="OUT_DIR", help="a run's out_dir (train, evaluate, LoCoMo)")
    ap.add_argument("--screenshot", metavar="PNG", help="also save a headless-Chromium screenshot of the page")
    ap.add_argument("--size", default="1280x1600", help="screenshot window WIDTHxHEIGHT (default 1280x1600)")
    args = ap.parse_args(argv)
    if args.screenshot and len(args.out_dirs) != 1:
        ap.error("--screenshot takes one OUT_DIR")
    rc = 0
    for d in args.out_dirs:
        try:
            path = write_report(d)
            print(f"report: {path}")
            from .load import load_run
            from .page import unfinished

            step = unfinished(load_run(d))
            if step:
                print(f"memjax.report: warning: {d}: the training run has not finished (no result.json; last step "
                      f"logged: {max(step, 0)}): its page shows that step's numbers, not a result; run its command "
                      "again to resume it", file=sys.stderr)
        except ReportError as e:
            print(f"memjax.report: error: {e}", file=sys.stderr)
            rc = 2
            continue
        if args.screenshot:
            from .browser import BrowserMissing, screenshot

            try:
                w, h = (int(x) for x in args.size.lower().split("x"))
                print(f"screenshot: {screenshot(path, args.screenshot, width=w, height=h)}")
            except (BrowserMissing, RuntimeError, ValueError) as e:
                print(f"memjax.report: error: screenshot: {e}", file=sys.stderr)
                rc = 1
    return rc
