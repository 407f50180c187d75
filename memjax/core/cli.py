"""The command line of memjax's programs and how they end: `parse_cli` (`PROG [CONFIG.py] [--set k=v ...] [--check]`,
`--help` listing every config field), `run_cli` (bad input -> one line and exit 2; a library's ValueError -> its
traceback and exit 1; SIGTERM / Ctrl-C -> `finally` blocks run, exit 143 / 130; a stop at a step boundary ->
`Stopped.code`), the exceptions a run ends with (`RunError`, `Terminated`, `Stopped`) and argparse number types
that reject a bad value before anything starts.
Invariants: this module imports only the standard library and memjax.core.config, so a bad argument or a bad launch
environment (the `precheck`, memjax.parallel.startup.check_env) is reported before jax loads; run_cli installs its
SIGTERM handler only over the default one and restores it, with the garbage collector's thresholds, on return.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .config import ConfigError, apply_overrides, describe, load_config_file

__all__ = ["RunError", "Stopped", "Terminated", "nonnegative_float", "nonnegative_int", "parse_cli",
           "positive_float", "positive_int", "run_cli"]


class RunError(RuntimeError):
    """A run stopped for a reason stated in one line (e.g. a non-finite loss); the CLI exits 1."""


def _number(kind: type, low: float, inclusive: bool, what: str):
    """An argparse `type=` that rejects, before anything starts, a value outside [low, inf) / (low, inf)."""
    import math

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(v) or v < low or (v == low and not inclusive):
            raise argparse.ArgumentTypeError(f"must be {'>=' if inclusive else '>'} {low:g}, got {text}")
        return v
    return parse


positive_int = _number(int, 1, True, "a whole number")          # >= 1
nonnegative_int = _number(int, 0, True, "a whole number")       # >= 0
positive_float = _number(float, 0.0, False, "a number")         # finite, > 0
nonnegative_float = _number(float, 0.0, True, "a number")      # finite, >= 0


def parse_cli(prog: str, description: str, argv: list[str] | None = None,
              default_config: Any = None, *, check: bool = False, precheck=None) -> tuple[Any, argparse.Namespace]:
    """`PROG [CONFIG.py] [--set k=v ...] [--check]`; `--help` (with a config) lists every field.
    `default_config`: the config without a file, or a function making it (called only then). `precheck()`: runs
    once the arguments parse and before any config is loaded, unless --help or --check (a run's own checks that
    need no config: the launch environment)."""
    ap = argparse.ArgumentParser(prog=prog, description=description, add_help=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", help="Python config file defining `config` (default: embedded)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a field (repeatable)")
    ap.add_argument("-h", "--help", action="store_true", help="show this help and every config field")
    if check:
        ap.add_argument("--check", action="store_true",
                        help="validate the config, build the system, resolve data paths and mesh, print what would "
                             "run, and exit 0 (nothing is loaded, trained or written)")
    args = ap.parse_args(argv)
    if precheck is not None and not args.help and not getattr(args, "check", False):
        precheck()
    if args.config:
        cfg = load_config_file(args.config)
    else:
        cfg = default_config() if callable(default_config) else default_config
    if args.help:
        ap.print_help()
        if cfg is not None:
            print("\nconfig fields (override with --set KEY=VALUE):")
            print("\n".join("  " + line for line in describe(cfg)))
        raise SystemExit(0)
    if cfg is None:
        ap.error("a config file is required")
    return apply_overrides(cfg, args.set), args


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like KeyboardInterrupt so `finally` blocks finish what is in flight."""


class Stopped(Terminated):
    """A run stopped on request at a step boundary with its checkpoint committed; `code` is the exit status
    (143 SIGTERM, 130 SIGINT) and the message the one line the CLI prints."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _on_sigterm(signum, frame):
    raise Terminated()


def _stdout_gone() -> bool:
    """Whether stdout's reader has closed the pipe (poll reports an error on the write end of a pipe without
    readers); if so, stdout now points at /dev/null so that the interpreter's final flush does not raise again (the
    recipe of Python's signal module documentation)."""
    import os
    import select
    import sys

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if not any(ev & select.POLLERR for _, ev in poller.poll(0)):
            return False
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture, a closed stream)
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    return True


def _raised_in_a_library(e: BaseException) -> bool:
    """Whether `e` was raised inside an installed package (jax, numpy, flax, ...) rather than by memjax (installed or
    not), the config file or the standard library (json's error on a malformed file is bad input): its innermost
    Python frame is in site-packages and not memjax's, or jax removed its own frames from the traceback (it says so
    in a note). An error raised by C code that memjax called directly has no frame of its own and reads as memjax's."""
    if any("JAX has removed its internal frames" in note for note in getattr(e, "__notes__", ())):
        return True
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else "memjax"
    if name == "memjax" or name.startswith(("memjax.", "memjax_config_")):
        return False
    parts = Path(tb.tb_frame.f_code.co_filename).parts
    return "site-packages" in parts or "dist-packages" in parts


def run_cli(prog: str, description: str, argv: list[str] | None, default_config: Any, body, check=None,
            precheck=None) -> int:
    """Parse a CLI (see parse_cli: `default_config` may be a function, `precheck` runs before a config loads) and
    call body(cfg) -- or check(cfg) with `--check` when the program gives a check; bad config/input (ConfigError,
    FileNotFoundError, a ValueError raised by memjax or the config file, a precheck's included) -> one line on
    stderr, exit code 2. A ValueError raised inside a library (jax, numpy, ...) is a bug, not bad input: its
    traceback and one line, exit code 1.

    SIGTERM and Ctrl-C unwind the program (its `finally` blocks close checkpoints, results and locks) and
    exit 143 / 130 with one line, instead of dying mid-write or printing a traceback.

    While the program runs, Python's cyclic garbage collector looks at its youngest objects every 10,000 net
    allocations (Python's default: 700) and at each older generation every 50 / 100 passes over the one below
    (default: 10, 10); the thresholds are restored on return. Importing jax and tracing its programs allocate
    millions of objects, and with the defaults the collector took ~10% of a warm tiny training run's CPU, walking
    the imported modules again and again."""
    import gc
    import signal
    import sys
    import threading

    name = prog.split()[-1]
    previous = None
    thresholds = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(thresholds, (10_000, 50, 100))))
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cfg, args = parse_cli(prog, description, argv, default_config=default_config, check=check is not None,
                              precheck=precheck)
        (check if getattr(args, "check", False) else body)(cfg)
    except Stopped as e:
        print(f"{name}: {e}", file=sys.stderr, flush=True)
        return e.code
    except Terminated:
        print(f"{name}: terminated (SIGTERM); finished results and checkpoints are kept", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"{name}: interrupted; finished results and checkpoints are kept", file=sys.stderr)
        return 130
    except (ConfigError, ValueError, FileNotFoundError) as e:
        if not isinstance(e, (ConfigError, FileNotFoundError)) and _raised_in_a_library(e):
            import traceback

            traceback.print_exception(e)  # a library's own check failed under memjax: a bug to report, not bad input
            print(f"{name}: internal error: {type(e).__name__} raised inside a library (traceback above)",
                  file=sys.stderr)
            return 1
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # disk full, permission denied, ...: the path and the reason, one line
        if isinstance(e, BrokenPipeError) and _stdout_gone():
            return 141  # the reader of stdout left (`... --help | head`): quiet, as a Unix tool killed by SIGPIPE
        print(f"{name}: error: {e}", file=sys.stderr)
        return 1
    except RunError as e:
        print(f"{name}: stopped: {e}", file=sys.stderr)
        return 1
    finally:
        gc.set_threshold(*thresholds)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0
