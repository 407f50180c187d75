"""The work of one training step of every shipped GPU recipe, for benchmarks/step_model.py.

Owns `Workload` (what one step trains, generates and prefills, per training sample) and one small function per
recipe that derives it from the recipe's own config (prompts per step, group size, mini-batches, PPO epochs, KL,
critic, model preset, chunk sizes, budgets, max new tokens, turns) and, where lengths depend on data, from the shipped
data's measured lengths (constants below, each with its source; tests/unit/benchmarks/test_recipe_workload.py
re-measures the prompt templates with the shipped tokenizer). A training sample is one trajectory that gets an
advantage: prompts_per_step x group_size of them per step (Memory-R2's local re-rollouts are work inside its samples).
Invariants: lengths are tokens; `rows` are (length, rows per sample) of every trained row; `prefill` the sequences the
engine processes once each per sample (chats continue on retained KV, so a chat counts once at its final length);
responses are at their caps unless a data-derived length is stated; each function's `how` states its optimism.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# LoCoMo, data/locomo/locomo10.json with the Qwen2.5 tokenizer, a turn as "speaker: text" (measured)
LOCOMO_TURN = 31  # 30.8 tokens, mean of 5,882 turns
LOCOMO_SESSION = 666  # 665.9 tokens, mean of 272 sessions (21.6 turns)
LOCOMO_SESSIONS = {"conv-43": 29, "conv-47": 31, "conv-48": 30}
LOCOMO_QUESTION = 12  # 12.2 tokens, mean of the 1,540 questions of categories 1-4
R1_QUESTIONS_PER_TUPLE = 202 / 133  # conv-26: 202 (question, evidence turn) links over 133 linked turns
MEMORY = 41  # one memory record as a prompt shows it: a turn's fact (31) + its id / date fields (10, assumed)
SUMER_TURNS = 10.22  # SUMER paper, section 5: tool-using turns per episode of the full configuration
# prompt templates with the chat template, no memories (Qwen2.5 tokenizer, measured; the test re-measures)
SUMER_PROMPT = 461  # system prompt + tool schemas + an empty question
R1_MANAGER_PROMPT = 1113  # memjax.systems.memory_r1.prompts.manager_prompt([], [])
R1_ANSWER_PROMPT = 355  # answer_prompt("", "A", [], "B", [])
R2_QA_PROMPT = 565  # memjax.systems.memory_r2.messages.qa_prompt("A", "B", [], [], "")
R2_EXTRACTOR_SYSTEM, R2_MANAGER_SYSTEM = 1164, 1447  # system message + an empty user turn + generation prompt
MESSAGE = 10  # chat-template tokens of one more message (assumed)
HOTPOT_DOC = 28_672 / 200  # MemAgent: 200 HotpotQA documents ~ the paper's 28K-token training contexts


@dataclass(frozen=True)
class Frozen:
    """A frozen model's generation per sample, on its own engine in each process: data-parallel over the policy
    engine's devices (`devices` "engine", the section's frozen_devices) or on one device ("one")."""
    calls: float
    prompt: int
    response: int
    slots: int  # decode batch per device of its engine: its max_slots bounded by its KV pool at full length
    devices: str = "engine"  # the config's frozen_devices


@dataclass(frozen=True)
class Workload:
    recipe: str
    preset: str
    samples: int  # training samples per step
    rows: tuple[tuple[int, float], ...]  # (trained row length, rows per sample)
    prefill: tuple[tuple[int, float], ...]  # (sequence the engine processes, per sample)
    decode_tokens: float  # policy tokens generated per sample
    decode_ctx: int  # mean KV length a decoding sequence reads
    mini_batches: int
    epochs: int = 1
    logprob_forwards: int = 2  # old (+ reference when kl_coef > 0)
    critic: bool = False
    frozen: Frozen | None = None
    how: str = ""

    @property
    def tokens(self) -> float:  # trained tokens per step
        return self.samples * sum(n * c for n, c in self.rows)


def _common(cfg: Any) -> dict:
    lc, up = cfg.loss, cfg.update
    return {"preset": cfg.model.preset, "mini_batches": up.mini_batches, "epochs": up.ppo_epochs,
            "logprob_forwards": 1 + (lc.kl_coef > 0), "critic": cfg.advantage.estimator == "gae"}


def _kv_slots(pool_bytes: int, max_slots: int, kv_token: int, length: int) -> int:
    return max(1, min(max_slots, pool_bytes // (kv_token * length)))


def memagent(cfg: Any) -> Workload:
    """Sequences of memjax.model.flops.memagent_seqlens over the recipe's documents (num_docs x 143.36 tokens: 200
    documents = the paper's 28,672); every budget filled: memory and final answer at their caps (upper bound)."""
    from memjax.model import flops

    m = cfg.agent.memagent
    doc = round(HOTPOT_DOC * cfg.agent.data.num_docs)
    seq = flops.memagent_seqlens(doc, q=m.max_query_tokens, o=m.max_memory_tokens, chunk=m.chunk_tokens)
    rows = tuple((n, float(seq.count(n))) for n in dict.fromkeys(seq))
    return Workload(recipe="memagent", samples=cfg.prompts_per_step * m.group_size, rows=rows, prefill=rows,
                    decode_tokens=m.max_memory_tokens * (len(seq) - 1) + m.max_final_tokens, decode_ctx=seq[1] // 2,
                    how=f"{doc}-token documents in {len(seq) - 2} chunks of {m.chunk_tokens}; memory and answer at "
                        f"their caps ({m.max_memory_tokens}, {m.max_final_tokens}); dynamic sampling's extra batches "
                        "and padding left out", **_common(cfg))


def sumer(cfg: Any) -> Workload:
    """One trained row per episode: the prompt, then SUMER_TURNS turns of max_turn_tokens generated (the cap:
    pessimistic) and one search call's response each (semantic_k hits with +-context_turns neighbours, MEMORY tokens a
    turn: optimistic, 5 calls a turn are allowed), capped at max_response_tokens; the judge is served off the node."""
    a, e = cfg.agent, cfg.agent.episode
    tool = e.tools.semantic_k * (2 * e.tools.context_turns + 1) * MEMORY
    turns = min(SUMER_TURNS, e.max_turns)
    response = min(e.max_response_tokens, round(turns * (e.max_turn_tokens + tool + 2 * MESSAGE)))
    row = min(cfg.engine.window, SUMER_PROMPT + LOCOMO_QUESTION + response)
    return Workload(recipe="sumer", samples=cfg.prompts_per_step * a.group_size, rows=((row, 1.0),),
                    prefill=((row, 1.0),), decode_tokens=turns * e.max_turn_tokens, decode_ctx=row // 2,
                    how=f"{turns} turns (the paper's mean) x ({e.max_turn_tokens} generated + {tool} tool tokens, one "
                        f"search a turn): {row}-token episodes", **_common(cfg))


def _r1_answer(a: Any) -> tuple[int, int]:
    """The answer agent's prompt (answer_top_k memories per speaker and a question) and its response: the memories
    it distils (5, assumed) and a 20-token answer, far below max_response_tokens (optimistic)."""
    prompt = min(a.max_prompt_tokens, R1_ANSWER_PROMPT + 2 * a.answer_top_k * MEMORY + LOCOMO_QUESTION)
    return prompt, 5 * MEMORY + 20


def memory_r1_manager(cfg: Any) -> Workload:
    """A tuple's prompt: the manager template, a turn's 2 facts (assumed) and related_k = 5 memories per fact; its
    response restates every memory shown with its event (Mem0's format: 12 x (MEMORY + 10)); the frozen answer agent
    answers the tuple's linked questions (R1_QUESTIONS_PER_TUPLE, conv-26) on its own engine (frozen_max_slots per
    device, bounded by its KV pool at full length; on the devices frozen_devices names)."""
    a = cfg.agent
    facts, shown = 2, 2 + 2 * 5
    prompt = min(a.max_prompt_tokens, R1_MANAGER_PROMPT + shown * MEMORY)
    response = min(a.max_response_tokens, shown * (MEMORY + 10))
    ap, ar = _r1_answer(a)
    kv_tok = kv_token(cfg.model.preset)
    frozen = Frozen(calls=R1_QUESTIONS_PER_TUPLE, prompt=ap, response=ar,
                    slots=_kv_slots(a.frozen_kv_cache_bytes, a.frozen_max_slots, kv_tok, ap + ar),
                    devices=a.frozen_devices)
    row = prompt + response
    return Workload(recipe="memory_r1_manager", samples=cfg.prompts_per_step * a.group_size, rows=((row, 1.0),),
                    prefill=((row, 1.0),), decode_tokens=response, decode_ctx=prompt + response // 2, frozen=frozen,
                    how=f"{row}-token tuples ({facts} facts, {shown} memories shown), frozen answers of {ap} + {ar} "
                        f"tokens x {R1_QUESTIONS_PER_TUPLE:.2f} per tuple", **_common(cfg))


def memory_r1_answer(cfg: Any) -> Workload:
    """One row per question: the answer agent's prompt and response (`_r1_answer`); the banks are built at set-up."""
    a = cfg.agent
    ap, ar = _r1_answer(a)
    return Workload(recipe="memory_r1_answer", samples=cfg.prompts_per_step * a.group_size, rows=((ap + ar, 1.0),),
                    prefill=((ap + ar, 1.0),), decode_tokens=ar, decode_ctx=ap + ar // 2,
                    how=f"{ap + ar}-token rows ({2 * a.answer_top_k} memories shown, {ar} generated)", **_common(cfg))


def _curriculum_sessions(a: Any, steps: int) -> float:
    """Sessions per conversation averaged over the run's steps: each stage's cap, at most the training
    conversations' mean session count."""
    have = sum(LOCOMO_SESSIONS[c] for c in a.train_conversations) / len(a.train_conversations)
    edges = [*a.curriculum_steps, max(steps, a.curriculum_steps[-1] + 1)]
    span = [edges[i + 1] - edges[i] for i in range(len(a.curriculum_sessions))]
    return sum(min(s, have) * n for s, n in zip(a.curriculum_sessions, span)) / sum(span)


def memory_r2(cfg: Any) -> Workload:
    """Per session, K chunks of a mean LoCoMo session; per chunk an extractor call (its chat continues over the
    session) whose facts restate the chunk (as many tokens: assumed) and a manager call shown those facts with 5
    candidates per fact (one fact per turn, at most max_candidates) whose operations restate the facts (+ 10 per
    fact). Every call is a trained row whose prompt is the chat so far. Sessions per trajectory: the curriculum's mean;
    local re-rollouts add local_prob x local_rollouts / group_size sessions per session; the frozen answer agent
    answers questions_global per trajectory and questions_local per re-rollout, at answer_max_tokens (the cap), on
    the devices frozen_devices names (per device the policy engine's max_slots bounded by answer_kv_cache_bytes)."""
    a = cfg.agent
    k = a.chunks_per_session
    chunk = LOCOMO_SESSION / k
    facts = chunk / LOCOMO_TURN
    ext_turn = round(chunk + 2 * MESSAGE + chunk)  # the chunk, then its facts
    cands = min(a.max_candidates, round(5 * facts))
    man_resp = round(chunk + 10 * facts)
    man_turn = round(chunk + cands * MEMORY + 2 * MESSAGE) + man_resp
    s = _curriculum_sessions(a, cfg.steps)
    local = a.local_prob * a.local_rollouts / a.group_size  # re-rolled sessions per global session, per sample
    per = s * (1 + local)
    rows = tuple((R2_EXTRACTOR_SYSTEM + i * ext_turn, per) for i in range(1, k + 1)) + \
        tuple((R2_MANAGER_SYSTEM + i * man_turn, per) for i in range(1, k + 1))
    prefill = ((R2_EXTRACTOR_SYSTEM + k * ext_turn, per), (R2_MANAGER_SYSTEM + k * man_turn, per))
    qa = R2_QA_PROMPT + 2 * a.answer_top_k * MEMORY + LOCOMO_QUESTION  # top k per speaker
    calls = a.questions_global + s * a.local_prob * a.local_rollouts / a.group_size * a.questions_local
    kv_tok = kv_token(cfg.model.preset)
    frozen = Frozen(calls=calls, prompt=qa, response=a.answer_max_tokens,
                    slots=_kv_slots(a.answer_kv_cache_bytes, cfg.engine.max_slots, kv_tok, qa + a.answer_max_tokens),
                    devices=a.frozen_devices)
    ctx = (prefill[0][0] + prefill[1][0]) // 4
    return Workload(recipe="memory_r2", samples=cfg.prompts_per_step * a.group_size, rows=rows, prefill=prefill,
                    decode_tokens=per * k * (round(chunk) + man_resp), decode_ctx=ctx, frozen=frozen,
                    how=f"{s:.1f} sessions (curriculum mean) x {1 + local:.3f} with re-rollouts, {k} chunks of "
                        f"{chunk:.0f} tokens, 2 calls each; {calls:.0f} frozen answers of {qa} + "
                        f"{a.answer_max_tokens} tokens per sample", **_common(cfg))


def kv_token(preset: str) -> int:
    """bf16 K and V bytes of one token over every layer."""
    from memjax.model import presets

    c = presets.get(preset)
    return 2 * c.num_layers * c.num_kv_heads * (c.head_dim or c.hidden_size // c.num_heads) * 2


WORKLOADS = {"memagent": memagent, "sumer": sumer, "memory_r1_manager": memory_r1_manager,
             "memory_r1_answer": memory_r1_answer, "memory_r2": memory_r2}


def of(name: str, cfg: Any) -> Workload:
    """The workload of a recipe by its system name (the config's agent section)."""
    return WORKLOADS[name](cfg)
