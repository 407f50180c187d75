"""`EngineJudge`: the LoCoMo LLM judge (Memory-R1 Fig. 12 prompt, memjax/rewards/locomo.py) served by a
memjax `Engine` at temperature 0.

Owns only the engine call: the prompt, the label parser and the verdict statistics are those of
memjax/rewards/locomo.py (rewards sit below the engine, so the engine-backed judge lives here).
Invariant: the chat template is applied at token-id level; one batched `generate` per `judge` call,
verdicts in input order; an unparseable reply is a counted WRONG, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..engine import SamplingParams
from ..rewards.locomo import Item, JudgeStats, Verdict, _profile, _verdict


class EngineJudge:
    """A judge profile's prompt (memjax.rewards.judge_profiles; default Memory-R1's Fig. 12) through a memjax Engine
    at temperature 0 (chat template applied at token-id level). Greedy decoding repeats a reply, so a profile's
    re-asks are not made; its handling of a reply without a label (WRONG or dropped from J) is kept."""

    def __init__(self, engine, tokenizer, *, max_tokens: int = 256, name: str = "engine", profile="memory_r1"):
        self._engine, self._tok, self.name, self.stats = engine, tokenizer, f"engine:{name}", JudgeStats()
        self.profile = _profile(profile)
        self._params = SamplingParams(temperature=0.0, max_tokens=max_tokens,
                                      stop_token_ids=(tokenizer.eos_id,))

    def judge(self, items: Iterable[Item]) -> list[Verdict]:
        items = list(items)
        prompts = [self._tok.apply_chat_template([{"role": "user", "content": self.profile.prompt(*map(str, it))}],
                                                 add_generation_prompt=True) for it in items]
        outs = self._engine.generate(prompts, self._params)
        return [self.stats.record(_verdict(self._tok.decode(o.token_ids, skip_special_tokens=True,
                                                              skip_unknown=True), self.profile)) for o in outs]
