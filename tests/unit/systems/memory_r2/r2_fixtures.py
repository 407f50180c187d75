"""Shared Memory-R2 test fixtures: a three-session conversation, a scripted engine (a policy function of the
decoded prompt, no model) and a copying policy (extractor: one fact per turn, its text; manager: INSERT each
fact)."""

import ast
import json
import re
from types import SimpleNamespace

from memjax.data.locomo import Conversation, Question, Session, Turn
from memjax.engine import Completion


def turns(s, texts, speakers=("Ann", "Bob")):
    return tuple(Turn(speakers[i % 2], f"D{s}:{i + 1}", t, s) for i, t in enumerate(texts))


S1 = ["I adopted a puppy named Rex", "Rex is a lovely name", "We walk by the river every morning",
      "I started painting landscapes", "My sister lives in Lisbon", "Lisbon has great tiles", "I bake sourdough"]
S2 = ["I switched jobs to nursing", "Nursing suits your patience"]
S3 = ["I visited Kyoto in spring", "Kyoto temples are calm", "I collect vinyl records", "Jazz vinyl mostly"]

CONV = Conversation(
    "conv-x", "Ann", "Bob",
    (Session(1, "1:00 pm on 1 May, 2023", turns(1, S1)), Session(2, "2:00 pm on 9 May, 2023", turns(2, S2)),
     Session(3, "3:00 pm on 20 May, 2023", turns(3, S3))),
    (Question("conv-x", 0, "What is the name of the puppy Ann adopted?", 4, "I adopted a puppy named Rex", None,
              ("D1:1",)),
     Question("conv-x", 1, "Where does the sister live, and which job?", 1, "I switched jobs to nursing", None,
              ("D1:5", "D2:1")),
     Question("conv-x", 2, "adversarial", 5, None, "x", ("D1:2",)),
     Question("conv-x", 3, "no evidence", 2, "y", None, ())))


def last_user(text):
    i = text.rfind("<|im_start|>user\n")
    return text[i + len("<|im_start|>user\n"): text.index("<|im_end|>", i)]


def copy_policy(text, params, drop=lambda seed, i: False):
    """Extractor: each turn -> fact (its text); manager: INSERT every fact. `drop(seed, i)` removes facts."""
    msg = last_user(text)
    if "New turns:\n```\n" in msg:
        listed = ast.literal_eval(msg.split("New turns:\n```\n", 1)[1].rsplit("\n```", 1)[0])
        facts = [{"speaker": t["speaker"], "dia_id": t["dia_id"], "fact": t["text"]} for t in listed]
        return json.dumps({"facts": facts})
    payload = json.loads(re.search(r"```\n(.*)\n```", msg, re.DOTALL).group(1))
    ops = [{"operation": "INSERT", "speaker": f["speaker"], "content": f["fact"], "dia_id": f["dia_id"]}
           for i, f in enumerate(payload["facts"]) if not drop(params.seed, i)]
    return json.dumps({"operations": ops})


class ScriptedEngine:
    """The engine surface run_workflow uses; completion = policy(decoded prompt, params) + <|im_end|>."""

    def __init__(self, tok, policy=copy_policy, window=1 << 20):
        self.tok, self.policy = tok, policy
        self.config = SimpleNamespace(progress=False, window=window)
        self.stats, self.pending, self.log, self.next_id = {}, [], [], 0
        self.continued = self.retained = self.released = 0

    def submit(self, prompt, params, *, parent=None, retain=False):
        """parent: continue its retained sequence (prompt = the new tokens); the log holds full prompts."""
        rid, self.next_id = self.next_id, self.next_id + 1
        if parent is not None:
            assert not parent.kv.released, "continued a released completion"
            prompt = parent.kv.tokens + list(prompt)
            self.continued += 1
        self.pending.append((rid, list(prompt), params, retain))
        self.log.append((rid, list(prompt), params))
        return rid

    def step(self):
        out = []
        for rid, prompt, params, retain in self.pending:
            ids = self.tok.encode(self.policy(self.tok.decode(prompt), params)) + [self.tok.eos_id]
            kv = SimpleNamespace(tokens=prompt + ids, released=False) if retain else None
            self.retained += retain
            out.append(Completion(ids, [-0.25] * len(ids), "stop", prompt_len=len(prompt), request_id=rid, kv=kv))
        self.pending = []
        return out

    def release(self, comp):
        if comp.kv is not None and not comp.kv.released:
            comp.kv.released = True
            self.released += 1

    def abort(self, rids):
        self.pending = [p for p in self.pending if p[0] not in rids]
