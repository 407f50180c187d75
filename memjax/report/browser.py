"""Headless Chromium for the report: the rendered DOM after the page's script ran, and a screenshot.

Owns: `find_chromium()` (the `chromium` / `chromium-browser` / `google-chrome` on PATH, or $MEMJAX_CHROMIUM), and
`dump_dom(html, query)` / `load(html, query)` (the DOM and the page's console messages) / `screenshot(html, png)`,
each one `chromium --headless` subprocess on a file:// URL (`?q=QUERY` makes the page's script apply that trace
search on load). Console messages are the `CONSOLE` lines Chromium logs with --enable-logging=stderr (console.log,
console.error and uncaught exceptions alike: its log does not tell their levels apart). Used by the tests and by
`python -m memjax.report OUT_DIR --screenshot PNG`. Invariants: nothing is fetched (the page is one local file,
--no-sandbox only because the tests run as root in containers); a missing browser raises BrowserMissing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserMissing(RuntimeError):
    pass


def find_chromium() -> str | None:
    env = os.environ.get("MEMJAX_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    return next((p for p in map(shutil.which, NAMES) if p), None)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    exe = find_chromium()
    if exe is None:
        raise BrowserMissing("no headless browser: install Debian's `chromium` (or set MEMJAX_CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="memjax-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               "--disable-extensions", f"--user-data-dir={profile}", "--virtual-time-budget=3000",
               "--enable-logging=stderr", "--v=0", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def url(html: str | Path, query: str | None = None) -> str:
    u = Path(html).resolve().as_uri()
    return u + (f"?q={quote(query)}" if query else "")


_CONSOLE = re.compile(r"^\[[^\]]*:CONSOLE[^\]]*\] (.*)$", re.MULTILINE)


def load(html: str | Path, query: str | None = None, timeout: float = 60) -> tuple[str, list[str]]:
    """The page's DOM serialised after load (its script has run), and every console message it logged."""
    r = _run(["--dump-dom", url(html, query)], timeout)
    if r.returncode != 0 or "<html" not in r.stdout:
        raise RuntimeError(f"chromium --dump-dom failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    return r.stdout, _CONSOLE.findall(r.stderr)


def dump_dom(html: str | Path, query: str | None = None, timeout: float = 60) -> str:
    """The page's DOM serialised after load (its script has run)."""
    return load(html, query, timeout)[0]


def screenshot(html: str | Path, png: str | Path, *, width: int = 1280, height: int = 1600, query: str | None = None,
               timeout: float = 60) -> Path:
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    r = _run([f"--screenshot={png}", f"--window-size={width},{height}", url(html, query)], timeout)
    if r.returncode != 0 or not png.is_file():
        raise RuntimeError(f"chromium --screenshot failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    return png
