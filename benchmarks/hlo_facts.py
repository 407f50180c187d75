"""Structural facts of one compiled XLA program, read from its optimised HLO text (`compiled.as_text()`).

Owns `program_facts(hlo, num_layers)`: what a GPU run of one engine round executes, counted without a GPU —
- kernels: thunks that launch work (fusions, cuBLAS / Triton custom calls, copies, scatters...; not parameters,
  tuples, bitcasts, control flow or fusion-done halves), counted per execution: a while body with a known trip
  count n counts n times, a loop without one counts once (one iteration), a conditional counts its largest
  branch. Fused computations are not walked (a fusion is one kernel).
- layer loop: the while loop whose known trip count equals num_layers (the model's `lax.scan` over layers), its
  kernels per iteration, its `dynamic_slice_fusion` GEMMs (cuBLAS reading a weight at a loop-dependent offset:
  the addresses a command buffer recorded for iteration i are wrong for i + 1, so XLA updates the recorded
  graph every iteration: analysis of the H200 traces of 2026-11-27) and its copies (loop-carry copies).
  With no such loop (unrolled layers) kernels per layer = kernels whose op_name carries `engine_layer<i>/`.
- host syncs: conditionals and while loops without a known trip count: each reads its predicate back to the
  host (device-to-host copy) before the GPU may go on (per execution; a loop's per iteration).
- bytes copied: output bytes of copy / copy-start instructions, times their execution count.
- large reads (with `read_bytes`): kernels that read an operand of at least read_bytes bytes, per execution — e.g.
  how many times a round reads the [b, V] logits. A fusion that takes it only into gathers or slices (through
  bitcasts) reads a part of it and is not counted.
`round_syncs(hlo)`: host syncs per iteration of the engine's generation loop (the entry computation's while
loop without a trip count): its predicate plus those in its body (a conditional by its largest branch).
Invariants: the HLO text is the one `jax.stages.Compiled.as_text()` prints (instructions `%name = type op(...)`);
counts are static (from the program), not a trace: a loop without a trip count is counted as one iteration.
"""

from __future__ import annotations

import math
import re
from collections import Counter

_HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (.*?) ([a-z][a-z0-9\-]*)\((.*)$")
_NOT_KERNELS = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant", "while", "conditional", "call",
                "after-all", "partition-id", "replica-id", "opt-barrier", "copy-done", "fusion-done", "async-done",
                "send-done", "recv-done", "all-reduce-done", "all-gather-done", "collective-permute-done",
                "add-dependency", "domain", "get-dimension-size"}
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8, "f8e4m3fn": 1, "f8e5m2": 1}


def parse(hlo: str) -> tuple[dict[str, list[tuple[str, str, str, str]]], str]:
    """({computation: [(name, type, opcode, rest of line)]}, entry computation name)."""
    comps, cur, entry = {}, None, None
    for line in hlo.splitlines():
        if cur is None:
            m = _HEADER.match(line)
            if m:
                cur = m.group(1)
                comps[cur] = []
                if line.startswith("ENTRY"):
                    entry = cur
            continue
        if line.startswith("}"):
            cur = None
            continue
        m = _INSTR.match(line)
        if m:
            comps[cur].append(m.groups())
    return comps, entry


def shape_bytes(type_str: str) -> int:
    """Bytes of every array in an HLO type (a tuple sums its elements)."""
    total = 0
    for dt, dims in re.findall(r"\b([a-z]+[0-9]*[a-z0-9]*)\[([0-9,]*)\]", type_str):
        if dt in _BYTES:
            total += _BYTES[dt] * math.prod(int(d) for d in dims.split(",") if d)
    return total


def _trip(rest: str) -> int | None:
    m = re.search(r'"known_trip_count":\{"n":"(\d+)"', rest)
    return int(m.group(1)) if m else None


def _called(rest: str, key: str) -> list[str]:
    m = re.search(key + r"=\{?([^}]*?)\}?(?:, [a-z_]+=|$)", rest)
    return [c.strip().lstrip("%") for c in m.group(1).split(",")] if m else []


def _operands(rest: str) -> list[str]:
    return re.findall(r"%([\w.\-]+)", rest.split(")", 1)[0])


_PARTIAL = {"gather", "dynamic-slice", "slice"}


def _reads_whole(comps, fused: str, index: int) -> bool:
    """Whether fused computation `fused` reads its parameter `index` beyond gathers and slices of it."""
    body = comps.get(fused, [])
    names = {n for n, _, op, rest in body if op == "parameter" and rest.startswith(f"{index})")}
    while names:
        users = [(n, op) for n, _, op, rest in body if names & set(_operands(rest))]
        if any(op not in _PARTIAL | {"bitcast"} for _, op in users):
            return True
        names = {n for n, op in users if op == "bitcast"}
    return False


def _walk(comps, name: str, mult: int, acc: Counter, sites: list, layer_l: int, in_layer: bool,
          read_bytes: int | None = None) -> None:
    types = {i[0]: i[1] for i in comps.get(name, [])} if read_bytes else {}
    for iname, typ, op, rest in comps.get(name, []):
        if op == "while":
            body, cond = _called(rest, "body")[0], _called(rest, "condition")[0]
            n = _trip(rest)
            is_layer = n == layer_l and not in_layer
            if n is None:
                sites.append(("while", iname))
            k = n if n is not None else 1
            _walk(comps, body, mult * k, acc, sites, layer_l, in_layer or is_layer, read_bytes)
            _walk(comps, cond, mult * (k + 1), acc, sites, layer_l, in_layer or is_layer, read_bytes)
            if is_layer:
                acc["layer_loops"] += 1
        elif op == "conditional":
            sites.append(("conditional", iname))
            branches = _called(rest, "branch_computations") or \
                _called(rest, "true_computation") + _called(rest, "false_computation")
            best = None
            for br in branches:  # the largest branch (a round takes one)
                a, s = Counter(), []
                _walk(comps, br, mult, a, s, layer_l, in_layer, read_bytes)
                if best is None or a["kernels"] > best[0]["kernels"]:
                    best = (a, s)
            if best:
                acc.update(best[0])
                sites.extend(best[1])
        elif op == "call":
            for c in _called(rest, "to_apply"):
                _walk(comps, c, mult, acc, sites, layer_l, in_layer, read_bytes)
        elif op not in _NOT_KERNELS:
            acc["kernels"] += mult
            if read_bytes:
                big = [i for i, o in enumerate(_operands(rest)) if shape_bytes(types.get(o, "")) >= read_bytes]
                fused = _called(rest, "calls")[:1] if op == "fusion" else []
                if big and op not in _PARTIAL and (not fused or any(_reads_whole(comps, fused[0], i) for i in big)):
                    acc["large_reads"] += mult
            dyn = op == "fusion" and "calls=%dynamic-slice-fusion" in rest
            gemm = op == "custom-call" and "__cublas" in rest or dyn
            acc["gemms"] += mult * gemm
            if op in ("copy", "copy-start"):
                acc["copies"] += mult
                acc["copy_bytes"] += mult * shape_bytes(typ.split(", u32[]")[0] if op == "copy-start" else typ)
            if in_layer:
                acc["layer_kernels"] += mult
                acc["layer_dynamic_slice_gemms"] += mult * dyn
                acc["layer_copies"] += mult * (op in ("copy", "copy-start"))
            m = re.search(r'op_name="[^"]*engine_layer(\d+)/', rest)
            if m:
                acc["scoped_layer_kernels"] += mult


def program_facts(hlo: str, num_layers: int, read_bytes: int | None = None) -> dict:
    """Counts of one execution of the compiled program (see the module docstring); `large_reads` only with
    read_bytes."""
    comps, entry = parse(hlo)
    acc, sites = Counter(), []
    _walk(comps, entry, 1, acc, sites, num_layers, False, read_bytes)
    layered = acc["layer_loops"] > 0
    per_layer = acc["layer_kernels"] / num_layers if layered else acc["scoped_layer_kernels"] / num_layers
    return dict(kernels=acc["kernels"], gemms=acc["gemms"], layer_loop="scan" if layered else "unrolled",
                kernels_per_layer=round(per_layer, 2),
                dynamic_slice_gemms_per_layer=round(acc["layer_dynamic_slice_gemms"] / num_layers, 2),
                loop_carry_copies_per_layer=round(acc["layer_copies"] / num_layers, 2),
                host_syncs=len(sites), host_sync_ops=sorted(Counter(k for k, _ in sites).items()),
                copies=acc["copies"], copy_bytes=acc["copy_bytes"],
                **({"large_reads": acc["large_reads"]} if read_bytes else {}))


def round_syncs(hlo: str) -> dict:
    """Host syncs per iteration of the entry computation's first while loop without a known trip count (the
    generation loop's rounds): {"per_round": predicate + body's syncs, "ops": their kinds}."""
    comps, entry = parse(hlo)
    for iname, typ, op, rest in comps[entry]:
        if op == "while" and _trip(rest) is None:
            acc, sites = Counter(), []
            _walk(comps, _called(rest, "body")[0], 1, acc, sites, -1, False)
            sites.append(("while", iname))
            return dict(per_round=len(sites), ops=sorted(Counter(k for k, _ in sites).items()))
    raise ValueError("round_syncs: the entry computation has no while loop without a trip count")
