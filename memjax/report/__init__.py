"""Run reports: `python -m memjax.report OUT_DIR` writes OUT_DIR/report.html, one self-contained page for any run
directory (training, held-out / length evaluation, LoCoMo evaluation): config, curves, evaluation tables with
before/after deltas, and the memory traces per conversation with a search box.

Modules: load (which run, its files parsed), plots (inline SVG curves), traces (per-system trace views), page
(the HTML and `write_report`), cli (`main`), run_summary (the end-of-run terminal summary and reward-curve PNG). Reads run files only; imports nothing above memjax.core.outdir, so
memjax.train, memjax.evaluate and memjax.demo can write the report at the end of a run.
"""

from .load import ReportError, RunData, load_run
from .page import render, write_report

__all__ = ["ReportError", "RunData", "load_run", "render", "write_report"]
