"""A scripted stand-in for memjax.Engine in workflow tests: the reply is a function of the decoded prompt.

`engine_replaced(factory)` puts a factory in memjax.engine.Engine for a block (a CLI run that builds its engines there).
A module first imported inside the block binds the factory under its own `Engine` name; on exit the real class is
put back there too, so that later tests of the process build real engines.
"""

import contextlib
import sys

from memjax.engine import Completion


@contextlib.contextmanager
def engine_replaced(factory):
    import memjax.engine

    real = memjax.engine.Engine
    memjax.engine.Engine = factory
    try:
        yield
    finally:
        memjax.engine.Engine = real
        for module in list(sys.modules.values()):
            if getattr(module, "__dict__", {}).get("Engine") is factory:
                module.Engine = real


class ScriptedEngine:
    """submit/step/abort/generate like memjax.Engine; the reply is `reply(prompt_text)` + <|im_end|>."""

    def __init__(self, tok, reply):
        self.tok, self.reply = tok, reply
        self.config = type("C", (), {"progress": False})()
        self.stats, self.queue, self.prompts, self.next_id = {}, [], [], 0

    def submit(self, prompt, params):
        self.next_id += 1
        self.queue.append((self.next_id, prompt, params))
        return self.next_id

    def step(self):
        out = []
        for rid, prompt, params in self.queue[:3]:          # a few per step: follow-ups interleave
            text = self.tok.decode(prompt)
            self.prompts.append(text)
            ids = self.tok.encode(self.reply(text))[: params.max_tokens - 1] + [self.tok.eos_id]
            out.append(Completion(ids, [-0.5] * len(ids), "stop", len(prompt), rid))
        self.queue = self.queue[3:]
        return out

    def abort(self, rids):
        self.queue = [q for q in self.queue if q[0] not in rids]

    def generate(self, prompts, params):
        rids = [self.submit(p, params) for p in prompts]
        done = {}
        while len(done) < len(rids):
            done.update({c.request_id: c for c in self.step()})
        return [done[r] for r in rids]


def user_part(text):
    return text.rsplit("<|im_start|>user\n", 1)[1]
