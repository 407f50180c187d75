"""Collective traffic of a compiled XLA program: which bytes each device sends, inside a host and between hosts.

Owns `collectives(hlo_text) -> list[Collective]` (every all-gather, reduce-scatter, all-reduce, all-to-all and
collective-permute of an optimised HLO module, with its device groups and how many times one run executes it) and
`traffic(colls, host_of) -> dict` (bytes sent per device, split into intra-host and inter-host, under NCCL's ring
model: a device's bytes are inter-host when its ring successor sits on another host).
Invariants: a collective in a while body runs the loop's `known_trip_count` times (nested loops multiply); a loop
without one counts once, or `outer_trip_count` times when called from ENTRY, and loops still counted once that hold
collectives are listed in `unknown_trip_counts` (the figure is then a lower bound); the replica-group forms
(explicit, iota, named mesh) map positions to device ids in `jax.devices()` order, so a caller compiles for a mesh
listing them in order (as memjax.plan does); a group of one sends nothing; `traffic` reports the program as
compiled (XLA:CPU lowers a reduce-scatter as all-reduce + slice). docs/multihost.md, "Collective traffic", has the
per-collective byte formulas.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

OPS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
                "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1}
_COMP_START = re.compile(r"^(?:ENTRY\s+)?%([\w.\-]+)\s*\(.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(.+?)\s+([a-z][a-z0-9\-]*)\((.*)$")
_SHAPE = re.compile(r"\b([a-z]+[0-9]*(?:e[0-9]m[0-9](?:fn)?)?)\[([0-9,]*)\]")


@dataclass(frozen=True)
class Collective:
    op: str  # one of OPS ("-start" async forms folded in)
    bytes: int  # bytes of the result (one device's buffer; an async start's from its -done)
    groups: tuple[tuple[int, ...], ...]  # device ids per group; for collective-permute: (source, target) pairs
    count: int  # executions per run of the program
    computation: str


def _shape_bytes(text: str) -> int:
    total = 0
    for dt, dims in _SHAPE.findall(text):
        if dt not in _DTYPE_BYTES:
            continue
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _DTYPE_BYTES[dt]
    return total


def _braced(s: str, start: int) -> str:
    """The text of the balanced {...} that opens at s[start]."""
    depth = 0
    for i in range(start, len(s)):
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth == 0:
            return s[start:i + 1]
    raise ValueError(f"unbalanced braces in {s[start:start + 80]!r}")


def parse_groups(attrs: str) -> tuple[tuple[int, ...], ...] | None:
    """Device groups of one instruction's attributes; None when it names none (all devices: the caller decides)."""
    m = re.search(r"replica_groups=", attrs)
    if m is None:
        return None
    rest = attrs[m.end():]
    if rest.startswith("{"):
        body = _braced(rest, 0)
        groups = re.findall(r"\{([0-9,\s]*)\}", body[1:-1]) if body != "{}" else []
        return tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in groups) or None
    im = re.match(r"\[([0-9,]+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", rest)
    if im:
        shape = [int(x) for x in im.group(1).split(",")]
        dims = [int(x) for x in im.group(2).split(",")]
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        if im.group(3):
            ids = ids.transpose([int(x) for x in im.group(3).split(",")])
        return tuple(tuple(int(v) for v in row) for row in ids.reshape(shape))
    mm = re.match(r"mesh\[([^\]]*)\]\s*\{([^}]*)\}", rest)
    if mm:
        axes = [(n, int(s)) for n, s in re.findall(r"'([^']+)'=(\d+)", mm.group(1))]
        names = [n for n, _ in axes]
        chosen = re.findall(r"'([^']+)'", mm.group(2))
        if any(c not in names for c in chosen) or re.search(r"[:()]", mm.group(2)):
            raise ValueError(f"unsupported mesh replica groups: {rest[:120]!r}")
        ids = np.arange(int(np.prod([s for _, s in axes]))).reshape([s for _, s in axes])
        keep = [i for i, n in enumerate(names) if n not in chosen]
        varying = [names.index(c) for c in chosen]
        ids = ids.transpose(keep + varying)
        size = int(np.prod([axes[i][1] for i in varying])) if varying else 1
        return tuple(tuple(int(v) for v in row) for row in ids.reshape(-1, size))
    raise ValueError(f"unsupported replica_groups syntax: {rest[:120]!r}")


def _computations(hlo: str) -> tuple[dict[str, list[str]], str]:
    comps: dict[str, list[str]] = {}
    entry, cur = "", None
    for line in hlo.splitlines():
        m = _COMP_START.match(line)
        if m:
            cur = m.group(1)
            comps[cur] = []
            if line.startswith("ENTRY"):
                entry = cur
        elif line.startswith("}"):
            cur = None
        elif cur is not None:
            comps[cur].append(line)
    if not entry:
        raise ValueError("no ENTRY computation in the HLO text")
    return comps, entry


def _multiplicity(comps: dict[str, list[str]], entry: str,
                  outer_trip_count: int | None = None) -> tuple[dict[str, int], list[str]]:
    """Executions per program run of every computation reachable from the entry, and the bodies of loops with an
    unknown trip count that are still counted once."""
    calls: dict[str, list[tuple[str, int]]] = {c: [] for c in comps}
    unknown = []
    for c, lines in comps.items():
        for line in lines:
            if " while(" in line:
                body = re.search(r"body=%([\w.\-]+)", line).group(1)
                cond = re.search(r"condition=%([\w.\-]+)", line).group(1)
                tm = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', line)
                if tm is not None:
                    n = int(tm.group(1))
                elif outer_trip_count is not None and c == entry:
                    n = outer_trip_count
                else:
                    n = 1
                    unknown.append(body)
                calls[c] += [(body, n), (cond, n + 1)]
                continue
            for name in re.findall(r"(?:calls|to_apply|true_computation|false_computation)=%([\w.\-]+)", line):
                calls[c].append((name, 1))
            bm = re.search(r"branch_computations=\{([^}]*)\}", line)
            if bm:
                calls[c] += [(n, 1) for n in re.findall(r"%([\w.\-]+)", bm.group(1))]
    mult: dict[str, int] = {}

    def visit(c: str, k: int, depth: int = 0):
        if depth > 64:
            raise ValueError("HLO call graph deeper than 64 levels")
        mult[c] = mult.get(c, 0) + k
        for callee, n in calls.get(c, []):
            visit(callee, k * n, depth + 1)

    visit(entry, 1)
    return mult, unknown


def collectives(hlo: str, num_devices: int | None = None,
                outer_trip_count: int | None = None) -> tuple[list[Collective], list[str]]:
    """(collectives, unknown_trip_counts) of an optimised HLO module's text; num_devices names the group of an
    instruction that lists none (all devices); outer_trip_count: the trip count of the entry's loops whose count
    XLA does not know (module docstring)."""
    comps, entry = _computations(hlo)
    mult, unknown = _multiplicity(comps, entry, outer_trip_count)
    out = []
    done_bytes = {}  # async start name -> bytes of its -done (the result; a start's shape also holds operands)
    for lines in comps.values():
        for line in lines:
            m = _INSTR.match(line)
            if m and m.group(3).endswith("-done") and m.group(3)[:-5] in OPS:
                done_bytes[re.match(r"\s*%([\w.\-]+)", m.group(4)).group(1)] = _shape_bytes(m.group(2))
    for c, lines in comps.items():
        for line in lines:
            m = _INSTR.match(line)
            if m is None:
                continue
            name, shape, op, rest = m.groups()
            base = op[:-6] if op.endswith("-start") else op
            if base not in OPS or op.endswith("-done"):
                continue
            if base == "collective-permute":
                pm = re.search(r"source_target_pairs=\{(.*?)\}\}", rest)
                pairs = re.findall(r"\{(\d+),(\d+)\}", (pm.group(0) if pm else ""))
                groups = tuple((int(a), int(b)) for a, b in pairs)
            else:
                groups = parse_groups(rest)
                if groups is None:
                    if num_devices is None:
                        raise ValueError(f"{base} without replica_groups and no num_devices: {line[:120]!r}")
                    groups = (tuple(range(num_devices)),)
            if op.endswith("-start"):
                if name not in done_bytes:
                    raise ValueError(f"{op} {name} without its -done")
                nbytes = done_bytes[name]
            else:
                nbytes = _shape_bytes(shape)
            out.append(Collective(base, nbytes, groups, mult.get(c, 0), c))
    return out, [b for b in unknown if _reaches(comps, b, {c.computation for c in out})]


def _reaches(comps: dict[str, list[str]], start: str, targets: set[str]) -> bool:
    """Whether computation `start` or one it calls (transitively) is in `targets`."""
    seen, todo = set(), [start]
    while todo:
        c = todo.pop()
        if c in targets:
            return True
        if c in seen:
            continue
        seen.add(c)
        for line in comps.get(c, []):
            todo += re.findall(r"(?:calls|to_apply|body|condition|true_computation|false_computation)=%([\w.\-]+)",
                               line)
            bm = re.search(r"branch_computations=\{([^}]*)\}", line)
            if bm:
                todo += re.findall(r"%([\w.\-]+)", bm.group(1))
    return False


def traffic(colls: list[Collective], host_of) -> dict:
    """Bytes each device sends per program run under the ring model (module docstring): {"per_device": {dev:
    {"intra": b, "inter": b}}, "by_op": {op: {"intra": b, "inter": b}} summed over devices, "max_inter",
    "max_intra", "mean_inter", "mean_intra"}."""
    per: dict[int, dict[str, float]] = {}
    by_op: dict[str, dict[str, float]] = {}

    def add(dev: int, succ: int, b: float, op: str):
        kind = "inter" if host_of(dev) != host_of(succ) else "intra"
        per.setdefault(dev, {"intra": 0.0, "inter": 0.0})[kind] += b
        by_op.setdefault(op, {"intra": 0.0, "inter": 0.0})[kind] += b

    for c in colls:
        if c.count == 0:
            continue
        if c.op == "collective-permute":
            for s, t in c.groups:
                if s != t:
                    add(s, t, c.bytes * c.count, c.op)
            continue
        for g in c.groups:
            n = len(g)
            if n < 2:
                continue
            sent = {"all-gather": (n - 1) / n * c.bytes, "reduce-scatter": (n - 1) * c.bytes,
                    "all-reduce": 2 * (n - 1) / n * c.bytes, "all-to-all": (n - 1) / n * c.bytes}[c.op]
            for i, dev in enumerate(g):
                add(dev, g[(i + 1) % n], sent * c.count, c.op)
    vals = list(per.values()) or [{"intra": 0.0, "inter": 0.0}]
    return {"per_device": {str(k): {kk: int(vv) for kk, vv in v.items()} for k, v in sorted(per.items())},
            "by_op": {k: {kk: int(vv) for kk, vv in v.items()} for k, v in sorted(by_op.items())},
            "max_inter": int(max(v["inter"] for v in vals)), "max_intra": int(max(v["intra"] for v in vals)),
            "mean_inter": float(np.mean([v["inter"] for v in vals])),
            "mean_intra": float(np.mean([v["intra"] for v in vals]))}


def summary(hlo: str, num_devices: int, devices_per_host: int, outer_trip_count: int | None = None) -> dict:
    """traffic() of an HLO module on num_devices devices, device i on host i // devices_per_host, plus the op
    counts and the loops with collectives whose trip count is unknown (outer_trip_count: see collectives())."""
    colls, unknown = collectives(hlo, num_devices, outer_trip_count)
    t = traffic(colls, lambda d: d // devices_per_host)
    t["ops"] = {op: sum(c.count for c in colls if c.op == op) for op in OPS}
    t["unknown_trip_counts"] = unknown
    return json.loads(json.dumps(t))
