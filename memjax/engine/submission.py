"""The engine's request book on the host: what `submit` accepts, request and group ids, prefix-sharing groups,
continuations of retained sequences, `abort` and `release` (a mixin of `memjax.engine.engine.Engine`).

Owns `Submissions`, whose methods read and write the Engine's host state: `_live` (request id -> Request, queued
or running), `_pending` (the queue, in order), `_groups` (prompt -> (group id, member ids, device group)),
`_live_gids`, `_aborted` (ids on the device whose completions `step` drops), `_load` (tokens of live requests per
device group), `_next_id`, `config`, `model_config`, and, to free retained pages, `_pool` / `_release_row`.
Invariants: prompts are non-empty lists of ints < vocab; a prompt of >= window tokens is refused or, with
overlong_prompt="truncate_left", keeps its last window - 1 tokens (Request.truncated); request and group ids
are in [0, 2**31 - 1) and unique among live ones (reused after wrapping); a retained sequence's pages are freed
once it is released and no queued continuation still holds them.
"""

from __future__ import annotations

import collections

import numpy as np

from .. import seeds
from .config import Completion, KVHandle, SamplingParams
from .requests import Request

__all__ = ["Submissions", "ID_LIMIT"]

ID_LIMIT = 2**31 - 1


class Submissions:
    """Engine methods of the request book (see the module docstring)."""

    def submit(self, prompt, params: SamplingParams | None = None, *, parent: Completion | None = None,
               retain: bool = False) -> int:
        """Queue a request; returns its id. retain=True keeps the finished sequence's KV pages
        (Completion.kv) until `release`; parent=a retained Completion continues that sequence: `prompt`
        holds only the new tokens, appended after the parent's prompt + generated tokens, and the
        parent's full pages are mapped (shared, never written) instead of prefilled again."""
        params = params or SamplingParams()
        if parent is not None:
            return self._submit_continuation(self._check_tokens(prompt, params), params, parent, retain)
        return self._enqueue(*self._check(prompt, params), retain=retain)

    def _check_tokens(self, prompt, params: SamplingParams) -> list[int]:
        ecfg, vocab = self.config, self.model_config.vocab_size
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

    def _check(self, prompt, params: SamplingParams) -> tuple[list[int], SamplingParams, int]:
        """Validate one request; returns (prompt as ints, params, tokens truncated). Enqueues nothing."""
        ecfg = self.config
        prompt = self._check_tokens(prompt, params)
        truncated = 0
        if len(prompt) >= ecfg.window:
            if ecfg.overlong_prompt == "error":
                raise ValueError(f"Engine.submit: prompt of {len(prompt)} tokens leaves no room in the "
                                 f"{ecfg.window}-token window (set overlong_prompt='truncate_left' to keep its end)")
            truncated = len(prompt) - (ecfg.window - 1)
            prompt = prompt[truncated:]
        return prompt, params, truncated

    def _enqueue(self, prompt: list[int], params: SamplingParams, truncated: int, retain: bool = False) -> int:
        ecfg = self.config
        rid = self._fresh_id("req", self._live.keys() | self._aborted)
        seed = params.seed if params.seed is not None else seeds.engine_request(ecfg.seed, rid)
        if tuple(prompt) not in self._groups:  # a prefix-sharing group stays in one device group
            self._groups[tuple(prompt)] = (self._fresh_id("group", self._live_gids), set(),
                                           int(np.argmin(self._load)))
            self._live_gids.add(self._groups[tuple(prompt)][0])
        gid, members, dev = self._groups[tuple(prompt)]
        members.add(rid)
        self._live[rid] = Request(rid, prompt, len(prompt), params, seed, group=gid, truncated=truncated,
                                   shared_pages=(len(prompt) - 1) // ecfg.page_size, retain=retain, device=dev)
        self._charge(self._live[rid])
        self._pending.append(self._live[rid])
        return rid

    def _charge(self, req: Request) -> None:
        req.load = len(req.prompt) + req.params.max_tokens
        self._load[req.device] += req.load

    def _discharge(self, req: Request) -> None:
        self._load[req.device] -= req.load
        req.load = 0

    def abort(self, rids=None) -> int:
        """Forget the given requests (every unfinished one when None); returns how many were live.

        Queued requests are removed now; a request already on the device finishes there (its slot and
        pages are released as usual, retained pages included) and its completion is dropped by `step`."""
        targets = set(self._live) if rids is None else {int(r) for r in rids} & set(self._live)
        queued = {r.rid for r in self._pending}
        self._pending = collections.deque(r for r in self._pending if r.rid not in targets)
        for rid in targets:
            req = self._live.pop(rid)
            self._discharge(req)
            self._forget(req)
            if req.parent is not None:  # a continuation never admitted: its parent's pages are not needed
                req.parent.holders -= 1
                self._maybe_free(req.parent)
                req.parent = None
        self._aborted |= targets - queued
        return len(targets)

    def _forget(self, req: Request) -> None:
        if req.group < 0:
            return
        key = tuple(req.prompt[: req.orig_len])
        if key in self._groups:
            self._groups[key][1].discard(req.rid)
            if not self._groups[key][1]:
                self._live_gids.discard(self._groups.pop(key)[0])

    def _submit_continuation(self, new: list[int], params: SamplingParams, parent: Completion, retain: bool) -> int:
        kv, ecfg = parent.kv, self.config
        if kv is None or kv.released:
            raise ValueError("Engine.submit: parent has no retained KV pages (submit it with retain=True "
                             "and do not release it before its continuations are submitted)")
        full = kv.tokens + new
        if len(full) >= ecfg.window:
            raise ValueError(f"Engine.submit: continuation of {len(full)} tokens leaves no room in the "
                             f"{ecfg.window}-token window")
        rid = self._fresh_id("req", self._live.keys() | self._aborted)
        seed = params.seed if params.seed is not None else seeds.engine_request(ecfg.seed, rid)
        kv.holders += 1
        n_prefix = min(kv.n_cached // ecfg.page_size, (len(full) - 1) // ecfg.page_size, len(kv.pages))
        self._live[rid] = Request(rid, full, len(full), params, seed, group=-1, truncated=kv.truncated,
                                   retain=retain, parent=kv, prefix_pages=n_prefix, device=kv.device)
        self._charge(self._live[rid])
        self._pending.append(self._live[rid])
        return rid

    def release(self, completion: Completion) -> None:
        """Give back a retained Completion's KV pages (after its continuations are submitted; pages a
        queued child still needs are dropped when it is admitted). Idempotent."""
        kv = completion.kv
        if kv is None or kv.released:
            return
        kv.released = True
        self._maybe_free(kv)

    def _maybe_free(self, kv: KVHandle) -> None:
        if kv.released and kv.holders == 0 and not kv.freed:
            kv.freed = True
            row = np.zeros(self.config.pages_per_seq, np.int32)
            row[: len(kv.pages)] = kv.pages
            self._pool = self._release_row(self._pool, kv.device, row, len(kv.pages))
            self.retained_pages -= len(kv.pages)

    def _fresh_id(self, kind: str, taken) -> int:
        """Next request / group id in [0, 2**31 - 1) not in `taken` (ids are int32 on the device and are
        reused after 2**31 - 1 submissions, so a week-long run never overflows; live ids stay unique)."""
        while True:
            i = self._next_id[kind]
            self._next_id[kind] = (i + 1) % ID_LIMIT
            if i not in taken:
                return i

    @property
    def num_unfinished(self) -> int:
        return len(self._live)
