"""`RequestBook`: the engine's requests on the host, from `submit` until their completion leaves the engine.

Owns what `submit` accepts (token ids, window, stop ids), request and group ids, the queue (`pending`, in order),
the live requests (`live`: id -> LiveRequest, queued or running), prefix-sharing groups (identical prompts, with the
device group their pages live in), continuations of retained sequences, `abort`, `release`, the per-device-group
load (prompt + max_tokens of live requests: the balance key) and the count of retained page references.
Invariants: prompts are non-empty lists of ints < vocab; a prompt of >= window tokens is refused or, with
overlong_prompt="truncate_left", keeps its last window - 1 tokens (LiveRequest.truncated); request and group ids are in
[0, 2**31 - 1) and unique among live ones (reused after wrapping); a retained sequence's pages are freed (through
the engine's `free_pages(group, row, n)`, which owns the pool) once it is released and no queued continuation still
holds them; a request's device group is fixed when it is submitted: a prefix-sharing group's and a continuation's
are where their pages are, any other goes to the least-loaded group.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import numpy as np

from ..core import seeds
from .config import Completion, EngineConfig, KVHandle, SamplingParams
from .live_request import LiveRequest

__all__ = ["RequestBook", "ID_LIMIT"]

ID_LIMIT = 2**31 - 1


class RequestBook:
    def __init__(self, ecfg: EngineConfig, vocab_size: int, groups: int,
                 free_pages: Callable[[int, np.ndarray, int], None]):
        self.config, self.vocab_size, self._free_pages = ecfg, vocab_size, free_pages
        self.pending: collections.deque[LiveRequest] = collections.deque()
        self.live: dict[int, LiveRequest] = {}  # rid -> request, queued or running
        self.groups: dict[tuple[int, ...], tuple[int, set[int], int]] = {}  # prompt -> (group id, rids, device group)
        self.next_id = {"req": 0, "group": 0}  # wrap at 2**31 - 1 (device int32), skipping live ids
        self.live_gids: set[int] = set()
        self.aborted: set[int] = set()  # aborted while on the device: their completions are dropped
        self.load = [0] * groups  # per device group: prompt + max_tokens of its live requests
        self.retained_pages = 0  # page references held by unreleased KVHandles

    # -- submission -----------------------------------------------------------------------------------
    def submit(self, prompt, params: SamplingParams | None = None, *, parent: Completion | None = None,
               retain: bool = False) -> int:
        """Queue a request; returns its id (memjax.Engine.submit)."""
        params = params or SamplingParams()
        if parent is not None:
            return self._submit_continuation(self.check_tokens(prompt, params), params, parent, retain)
        return self.enqueue(*self.check(prompt, params), retain=retain)

    def check_tokens(self, prompt, params: SamplingParams) -> list[int]:
        ecfg, vocab = self.config, self.vocab_size
        bad = next((t for t in prompt if isinstance(t, bool) or not isinstance(t, (int, np.integer))), None)
        if bad is not None:
            raise ValueError(f"Engine.submit: prompt token ids must be integers, got {bad!r} ({type(bad).__name__})")
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError("Engine.submit: prompt is empty")
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"Engine.submit: prompt has token ids outside [0, {vocab})")
        if len(params.stop_token_ids) > ecfg.max_stop_ids:
            raise ValueError(f"Engine.submit: {len(params.stop_token_ids)} stop ids > EngineConfig.max_stop_ids="
                             f"{ecfg.max_stop_ids}")
        return prompt

    def check(self, prompt, params: SamplingParams) -> tuple[list[int], SamplingParams, int]:
        """Validate one request; returns (prompt as ints, params, tokens truncated). Enqueues nothing."""
        ecfg = self.config
        prompt = self.check_tokens(prompt, params)
        truncated = 0
        if len(prompt) >= ecfg.window:
            if ecfg.overlong_prompt == "error":
                raise ValueError(f"Engine.submit: prompt of {len(prompt)} tokens leaves no room in the "
                                 f"{ecfg.window}-token window (set overlong_prompt='truncate_left' to keep its end)")
            truncated = len(prompt) - (ecfg.window - 1)
            prompt = prompt[truncated:]
        return prompt, params, truncated

    def enqueue(self, prompt: list[int], params: SamplingParams, truncated: int, retain: bool = False) -> int:
        ecfg = self.config
        rid = self._fresh_id("req", self.live.keys() | self.aborted)
        seed = params.seed if params.seed is not None else seeds.engine_request(ecfg.seed, rid)
        key = tuple(prompt)
        if key not in self.groups:  # a prefix-sharing group stays in one device group
            self.groups[key] = (self._fresh_id("group", self.live_gids), set(), int(np.argmin(self.load)))
            self.live_gids.add(self.groups[key][0])
        gid, members, dev = self.groups[key]
        members.add(rid)
        self._add(LiveRequest(rid, prompt, len(prompt), params, seed, group=gid, truncated=truncated,
                          shared_pages=(len(prompt) - 1) // ecfg.page_size, retain=retain, device=dev))
        return rid

    def _submit_continuation(self, new: list[int], params: SamplingParams, parent: Completion, retain: bool) -> int:
        kv, ecfg = parent.kv, self.config
        if kv is None or kv.released:
            raise ValueError("Engine.submit: parent has no retained KV pages (submit it with retain=True "
                             "and do not release it before its continuations are submitted)")
        full = kv.tokens + new
        if len(full) >= ecfg.window:
            raise ValueError(f"Engine.submit: continuation of {len(full)} tokens leaves no room in the "
                             f"{ecfg.window}-token window")
        rid = self._fresh_id("req", self.live.keys() | self.aborted)
        seed = params.seed if params.seed is not None else seeds.engine_request(ecfg.seed, rid)
        kv.holders += 1
        n_prefix = min(kv.n_cached // ecfg.page_size, (len(full) - 1) // ecfg.page_size, len(kv.pages))
        self._add(LiveRequest(rid, full, len(full), params, seed, group=-1, truncated=kv.truncated,
                          retain=retain, parent=kv, prefix_pages=n_prefix, device=kv.device))
        return rid

    def _add(self, req: LiveRequest) -> None:
        self.live[req.rid] = req
        req.load = len(req.prompt) + req.params.max_tokens
        self.load[req.device] += req.load
        self.pending.append(req)

    # -- leaving --------------------------------------------------------------------------------------
    def finish(self, req: LiveRequest) -> None:
        """`req` completed: it leaves the book (its group, its load)."""
        del self.live[req.rid]
        self._discharge(req)
        self._forget(req)

    def admitted(self, req: LiveRequest) -> int:
        """`req` is on the device: a continuation's child now holds its own page references, so its parent's are
        dropped. Returns the prefill tokens the continuation saved (0 for other requests)."""
        if req.parent is None:
            return 0
        saved = req.prefix_pages * self.config.page_size
        req.parent.holders -= 1
        self.maybe_free(req.parent)
        req.parent = None
        return saved

    def abort(self, rids=None) -> int:
        """Forget the given requests (every unfinished one when None); returns how many were live. Queued ones leave
        the queue now; one already on the device finishes there and `step` drops its completion."""
        targets = set(self.live) if rids is None else {int(r) for r in rids} & set(self.live)
        queued = {r.rid for r in self.pending}
        self.pending = collections.deque(r for r in self.pending if r.rid not in targets)
        for rid in targets:
            req = self.live.pop(rid)
            self._discharge(req)
            self._forget(req)
            if req.parent is not None:  # a continuation never admitted: its parent's pages are not needed
                req.parent.holders -= 1
                self.maybe_free(req.parent)
                req.parent = None
        self.aborted |= targets - queued
        return len(targets)

    def release(self, completion: Completion) -> None:
        """Give back a retained Completion's KV pages (after its continuations are submitted). Idempotent."""
        kv = completion.kv
        if kv is None or kv.released:
            return
        kv.released = True
        self.maybe_free(kv)

    def retain(self, kv: KVHandle) -> KVHandle:
        """A finished sequence's pages are now held by `kv` until it is released."""
        self.retained_pages += len(kv.pages)
        return kv

    def maybe_free(self, kv: KVHandle) -> None:
        if kv.released and kv.holders == 0 and not kv.freed:
            kv.freed = True
            row = np.zeros(self.config.pages_per_seq, np.int32)
            row[: len(kv.pages)] = kv.pages
            self._free_pages(kv.device, row, len(kv.pages))
            self.retained_pages -= len(kv.pages)

    def reset_device_state(self) -> None:
        """The pool was dropped (Engine.sleep): requests aborted on the device and every group lose their pages."""
        self.aborted.clear()
        self.groups.clear()
        self.live_gids.clear()

    def _discharge(self, req: LiveRequest) -> None:
        self.load[req.device] -= req.load
        req.load = 0

    def _forget(self, req: LiveRequest) -> None:
        if req.group < 0:
            return
        key = tuple(req.prompt[: req.orig_len])
        if key in self.groups:
            self.groups[key][1].discard(req.rid)
            if not self.groups[key][1]:
                self.live_gids.discard(self.groups.pop(key)[0])

    def _fresh_id(self, kind: str, taken) -> int:
        """Next request / group id in [0, 2**31 - 1) not in `taken` (ids are int32 on the device and are reused
        after 2**31 - 1 submissions, so a week-long run never overflows; live ids stay unique)."""
        while True:
            i = self.next_id[kind]
            self.next_id[kind] = (i + 1) % ID_LIMIT
            if i not in taken:
                return i
