"""A scripted stand-in for memjax.Engine in workflow tests: the reply is a function of the decoded prompt."""

from memjax.engine import Completion


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
