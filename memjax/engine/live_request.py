"""Host-side request records and their packing into the device `Queue`, per device group.

Owns: `LiveRequest` (one submitted request while it is queued or running: its current prompt, sampling
parameters, seed, prefix-sharing group, the tokens generated before any preemption, its continuation
parent and its device group) and `pack_queue(rows, ecfg, q)`: the rows waiting for each of the D device
groups -> a `Queue` of numpy arrays with a leading [D] axis, q rows per group (memjax/engine/state.py);
unused rows are invalid. A preempted (requeued) request is packed ungrouped: it recomputes its prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import EngineConfig, KVHandle, SamplingParams
from .state import Queue


@dataclass
class LiveRequest:
    rid: int
    prompt: list[int]  # current prompt (original + generated before any preemption)
    orig_len: int
    params: SamplingParams
    seed: int
    group: int = -1
    shared_pages: int = 0
    truncated: int = 0
    gen: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)
    preemptions: int = 0
    retain: bool = False
    parent: KVHandle | None = None  # until admitted
    prefix_pages: int = 0  # full parent pages mapped instead of prefilled
    device: int = 0  # device group (data_parallel)
    load: int = 0  # tokens counted in the group's load while live


def pack_queue(rows: list[list[LiveRequest]], ecfg: EngineConfig, q: int) -> Queue:
    """rows[g]: at most q requests for device group g, in queue order -> Queue of [D, q, ...] numpy arrays."""
    d = len(rows)
    wc, ns = ecfg.window + ecfg.prefill_chunk, ecfg.max_stop_ids
    a = {k: np.zeros((d, q), np.int32) for k in ("req", "prompt_len", "group", "shared_pages", "top_k", "max_new",
                                                 "seed", "pos_offset", "n_prefix")}
    prefix, retain = np.zeros((d, q, ecfg.pages_per_seq), np.int32), np.zeros((d, q), bool)
    tokens, stop = np.zeros((d, q, wc), np.int32), np.full((d, q, ns), -1, np.int32)
    temp, top_p = np.ones((d, q), np.float32), np.ones((d, q), np.float32)
    valid, proc = np.zeros((d, q), bool), np.zeros((d, q), bool)
    for g, i, r in ((g, i, r) for g in range(d) for i, r in enumerate(rows[g])):
        p = r.params
        valid[g, i] = True
        tokens[g, i, : len(r.prompt)] = r.prompt
        stop[g, i, : len(p.stop_token_ids)] = p.stop_token_ids
        group = -1 if r.preemptions else r.group  # a requeued request recomputes its prompt
        a["req"][g, i], a["prompt_len"][g, i], a["group"][g, i] = r.rid, len(r.prompt), group
        a["shared_pages"][g, i] = r.shared_pages if group >= 0 else 0
        a["top_k"][g, i], a["max_new"][g, i], a["seed"][g, i] = p.top_k, p.max_tokens - len(r.gen), r.seed
        a["pos_offset"][g, i] = r.truncated
        retain[g, i] = r.retain
        if r.parent is not None:  # a requeued (preempted) continuation has dropped its parent: recompute
            a["n_prefix"][g, i] = r.prefix_pages
            prefix[g, i, : len(r.parent.pages)] = r.parent.pages
        temp[g, i], top_p[g, i], proc[g, i] = p.temperature, p.top_p, p.logprobs == "processed"
    queue = Queue(valid=valid, admitted=np.zeros((d, q), bool), tokens=tokens, stop=stop, temperature=temp,
                  top_p=top_p, processed=proc, retain=retain, prefix_table=prefix, **a)
    return queue
