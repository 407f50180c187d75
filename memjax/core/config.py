"""Typed config files and `--set a.b=value` overrides for memjax's command-line programs.

Owns: loading a Python config file (it defines `config`, a frozen dataclass instance, or
`get_config()` returning one), applying dotted overrides with type checking against the dataclass
field types, switching a tagged section by its `name` (`--set agent.name=tiny` replaces the `agent` section
by the default of the AgentSection subclass named "tiny"), and listing every field for `--help`.
The command line (`parse_cli`, `run_cli`) is checked before any config is loaded: a CLI passes its default config
as a function and its launch-environment check as `precheck`, so bad arguments and a bad launch environment
(memjax.parallel.startup.check_env) end before the config's modules -- jax among them -- load; a run given both a
bad environment and a bad config reports the environment.
Invariants: this module imports only the standard library; configs stay frozen dataclasses (overrides go through
dataclasses.replace, so each dataclass's own validation runs again); an override naming an unknown field or a value that does not
parse as the field's type is a one-line ConfigError naming the key.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib.util
import json
import re
import types
import typing
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    pass


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


def load_config_file(path: str | Path) -> Any:
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a config file (give a file such as configs/tiny.py)")
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    if path.suffix != ".py":
        raise ConfigError(f"{path}: not a Python config file (.py); a config is a .py file defining `config`, "
                          "such as configs/tiny.py")
    spec = importlib.util.spec_from_file_location(f"memjax_config_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ConfigError as e:  # a config's own check (a field's type): its one line, with the file
        raise ConfigError(f"{path}: {e}") from None
    except Exception as e:  # the user's file: report where it failed
        raise ConfigError(f"{path}: failed to load ({type(e).__name__}: {e})") from e
    cfg = module.get_config() if hasattr(module, "get_config") else getattr(module, "config", None)
    if cfg is None or not dataclasses.is_dataclass(cfg):
        raise ConfigError(f"{path}: must define `config` (a dataclass instance) or `get_config()`")
    check_types(cfg, str(path))
    return cfg


# the largest integer a config field takes (sizes, steps, counts); seeds are exempt
INT_LIMIT = 2**31 - 1


def _fits(value: Any, tp: Any) -> bool:
    """Whether `value` has the declared field type (bool is not an int; an int is a float; unknown types pass)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is typing.Any or isinstance(tp, typing.TypeVar):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if tp is type(None):
        return value is None
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            return False
        inner = [a for a in args if a is not Ellipsis]
        return all(_fits(v, inner[0]) for v in value) if len(inner) == 1 or (args and args[-1] is Ellipsis) else (
            not inner or (len(inner) == len(value) and all(_fits(v, a) for v, a in zip(value, inner))))
    if origin is typing.Literal:
        return value in args
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return isinstance(value, tp)
    return True


def _too_big(key: str, value: Any) -> bool:
    name = key.rsplit(".", 1)[-1]
    limit = 2**50 if name.endswith("bytes") else INT_LIMIT  # byte counts: up to a PiB
    return isinstance(value, int) and not isinstance(value, bool) and "seed" not in name and abs(value) > limit


def check_types(cfg: Any, where: str, _path: str = "") -> None:
    """Every field of a config file's dataclass (and its sections) has its declared type and integers are at most
    INT_LIMIT, as `--set` values must: one ConfigError naming the file and the dotted field."""
    try:
        hints = typing.get_type_hints(type(cfg))
    except Exception:  # an annotation that does not resolve: nothing to check against
        return
    for f in dataclasses.fields(cfg):
        v, key = getattr(cfg, f.name), f"{_path}{f.name}"
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            check_types(v, where, key + ".")
            continue
        tp = hints.get(f.name)
        if tp is not None and not _fits(v, tp):
            want = getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
            raise ConfigError(f"{where}: {key}={v!r}: expected {want}, got {type(v).__name__}")
        vals = v if isinstance(v, (tuple, list)) else [v]
        if any(_too_big(key, x) for x in vals):
            raise ConfigError(f"{where}: {key}={v!r}: larger than {INT_LIMIT:,}, the largest size or count a config "
                              "takes")


def _parse(value: str, tp: Any, key: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value.lower() in ("none", "null") and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _parse(value, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"--set {key}: cannot parse {value!r}")
    if origin in (tuple, list):
        items = json.loads(value) if value.strip().startswith("[") else [v for v in value.split(",") if v != ""]
        inner = args[0] if args else str
        out = [_parse(str(v), inner, key) for v in items]
        return tuple(out) if origin is tuple else out
    if tp is bool:
        low = value.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"--set {key}: expected a boolean (true/false), got {value!r}")
    if tp in (int, float, str):
        try:
            out = tp(float(value)) if tp is int and value.lower().endswith(("e3", "e4", "e5", "e6")) else tp(value)
        except ValueError:
            raise ConfigError(f"--set {key}: expected {tp.__name__}, got {value!r}") from None
        if _too_big(key, out):
            raise ConfigError(f"--set {key}: {value} is larger than {INT_LIMIT:,}, the largest size or count a config "
                              "takes")
        return out
    raise ConfigError(f"--set {key}: fields of type {tp} cannot be set from the command line")


def _hints(obj: Any) -> dict[str, Any]:
    return typing.get_type_hints(type(obj))


def _variants(tp: Any) -> dict[str, type]:
    """A tagged section: a dataclass base type whose subclasses differ by the default of their `name` field
    (e.g. TrainConfig.agent: AgentSection -> MemAgentSection "memagent", TinySection "tiny", ...)."""
    if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or "name" not in {f.name for f in dataclasses.fields(tp)}:
        return {}
    out, todo = {}, [tp]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        try:
            name = cls().name
        except Exception:
            continue
        if name:
            out.setdefault(name, cls)
    return out


def _variant(tp: type, value: str, key: str) -> Any:
    variants = _variants(tp)
    if value not in variants:
        raise ConfigError(f"--set {key}: unknown {value!r}; known: {', '.join(sorted(variants))}")
    return variants[value]()


def _set_raw(obj: Any, **changes: Any) -> Any:
    """A copy of frozen dataclass `obj` with `changes`, not yet validated (apply_overrides validates once, after
    every override, so the order of the overrides does not matter)."""
    new = copy.copy(obj)
    for k, v in changes.items():
        object.__setattr__(new, k, v)
    return new


def apply_override(cfg: Any, key: str, value: str, *, _full: str | None = None, _validate: bool = True) -> Any:
    """`cfg` with one dotted override applied (validated, unless called from apply_overrides, which validates the
    result of all its overrides once). Errors name the whole key (`agent.data.path`), however deep."""
    full = key if _full is None else _full
    head, _, rest = key.partition(".")
    names = {f.name for f in dataclasses.fields(cfg)}
    if head not in names:
        raise ConfigError(f"--set {full}: {type(cfg).__name__} has no field {head!r} (fields: {', '.join(sorted(names))})")
    current = getattr(cfg, head)
    if rest == "name" and _variants(_hints(cfg)[head]):  # a tagged section: switch to the named variant
        if getattr(current, "name", None) == value:
            return cfg  # already that system: keep its settings
        new = _variant(_hints(cfg)[head], value, full)
    elif rest:
        if not dataclasses.is_dataclass(current):
            raise ConfigError(f"--set {full}: {head!r} is not a section")
        new = apply_override(current, rest, value, _full=full, _validate=False)
    else:
        if dataclasses.is_dataclass(current):
            raise ConfigError(f"--set {full}: {head!r} is a section; set one of its fields ({head}.FIELD=...)")
        new = _parse(value, _hints(cfg)[head], full)
    out = _set_raw(cfg, **{head: new})
    return validate(out, [f"{full}={value}"]) if _validate else out


def validate(cfg: Any, overrides: list[str] = (), _path: str = "") -> Any:
    """Re-run every dataclass's own validation on `cfg`, innermost sections first; a failure is one ConfigError
    naming the overrides that touched the failing section (`--set engine.max_slots=4: EngineConfig...`)."""
    changes = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if f.init and dataclasses.is_dataclass(v) and not isinstance(v, type):
            changes[f.name] = validate(v, overrides, f"{_path}{f.name}.")
    try:
        return dataclasses.replace(cfg, **changes)
    except (ValueError, TypeError) as e:
        mine = [o for o in overrides if o.startswith(_path)] if _path else list(overrides)
        last = {o.partition("=")[0]: o for o in mine}  # a key set twice: its effective value
        named = [o for k, o in last.items()  # the overrides of the fields the message names, when it names any
                 if re.search(rf"\b{re.escape(k[len(_path):].split('.')[0])}\b", str(e))]
        mine = named or mine
        where = ("--set " + " --set ".join(mine[:3]) + ": ") if mine else ""
        raise ConfigError(f"{where}{e}") from None


def apply_overrides(cfg: Any, overrides: list[str]) -> Any:
    """Every override applied, then the result validated once: `--set a=1 --set b=2` equals `--set b=2 --set a=1`
    even where a section's rule relates the two fields."""
    done = []
    for item in overrides:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        cfg = apply_override(cfg, key.strip(), value.strip(), _validate=False)
        done.append(f"{key.strip()}={value.strip()}")
    return validate(cfg, done) if done else cfg


def describe(cfg: Any, prefix: str = "") -> list[str]:
    """One line per leaf field: `a.b: type = value`."""
    lines = []
    hints = _hints(cfg)
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            lines += describe(v, f"{prefix}{f.name}.")
        else:
            tp = hints[f.name]
            name = getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
            lines.append(f"{prefix}{f.name}: {name} = {v!r}")
    return lines


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
