"""Typed config files and `--set a.b=value` overrides: what every memjax program's configuration goes through.

Owns: loading a Python config file (it defines `config`, a frozen dataclass instance, or `get_config()` returning
one), applying dotted overrides with type checking against the dataclass field types, switching a tagged section by
its `name` (`--set agent.name=tiny` replaces the `agent` section by the default of the AgentSection subclass named
"tiny"), validating after all overrides, and listing every field for `--help` (`describe`). The command line that
uses them (`parse_cli`, `run_cli`, exit codes) is memjax.core.cli.
Invariants: this module imports only the standard library; configs stay frozen dataclasses (overrides go through
dataclasses.replace, so each dataclass's own validation runs again); an override naming an unknown field or a value
that does not parse as the field's type is a one-line ConfigError naming the key.
"""

from __future__ import annotations

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
