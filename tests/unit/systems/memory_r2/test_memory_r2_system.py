"""MemoryR2System: LoGo-GRPO unit advantages by hand (global groups, local groups, constant group, group of
one, empty masks, role split), step-level vs token-level gradients on the same rows, the section's
validation and curriculum, the training stream and evaluation on real LoCoMo (skipped when absent), and one
workflow through the system on a scripted engine."""

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import memjax
from memjax.agents import run_workflow
from memjax.kernels.step_ratio_loss import step_ratio_loss
from memjax.rewards.locomo import RuleBasedJudge
from memjax.rl.batch import Conversation, build_batch
from memjax.rl.losses import policy_loss
from memjax.systems import MemoryR2Section, MemoryR2System, build
from memjax.systems.memory_r2.system import evaluation_metrics, logo_unit_advantages

LOCOMO = Path(__file__).resolve().parents[5] / "shared" / "data" / "locomo" / "locomo10.json"
EPS = 1e-6


def row(sample, unit, reward, *, group=0, role=0, local=-1, n_resp=2, mask=None):
    return Conversation([1, 2, 3], [4] * n_resp, [-0.5] * n_resp, sample=sample, group=group, turn=0, role=role,
                        response_mask=mask, extra={"unit": unit, "unit_reward": reward, "local_group": local})


def z(x):
    x = np.asarray(x, np.float64)
    return (x - x.mean()) / (x.std(ddof=1) + EPS)


def test_unit_advantages_hand_computed():
    convs = [
        # global group (conversation 0, session 0), extractor: 3 rollouts, rewards 1, 2, 4; rollout 0 has 2 calls
        row(0, 0, 1.0), row(0, 0, 1.0), row(1, 0, 2.0), row(2, 0, 4.0),
        # the same session's manager units: a separate group (role 1), constant rewards -> 0
        row(0, 1, 1.0, role=1), row(1, 1, 1.0, role=1), row(2, 1, 1.0, role=1),
        # session 1 reached by rollout 0 only: a group of one -> 0
        row(0, 2, 3.0, group=1),
        # local group 7 (anchor rollout 1, session 0): m = 2 branches, rewards 0.5 and 0.0; one call has an
        # empty mask (nothing generated is trained on)
        row(1, 5, 0.5, local=7), row(1, 6, 0.0, local=7), row(1, 6, 0.0, local=7, mask=[0, 0]),
    ]
    b = build_batch(convs, [0.0, 0.0, 0.0], [0, 0, 0])
    out = logo_unit_advantages(b, eps=EPS)
    g = z([1.0, 2.0, 4.0])  # units, not rows: rollout 0's two calls count once
    loc = z([0.5, 0.0])
    want = [g[0], g[0], g[1], g[2], 0, 0, 0, 0, loc[0], loc[1], loc[1]]
    np.testing.assert_allclose(out.row_advantage, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(g, z([1.0, 1.0, 2.0, 4.0])[[0, 2, 3]])  # per-row standardisation would differ
    np.testing.assert_allclose(out.advantages, np.asarray(want, np.float32)[:, None] * (b.loss_mask != 0), atol=1e-6)
    assert out.advantages[-1].sum() == 0 and np.isfinite(out.advantages).all()
    # local rewards never mix with global ones: changing the global rewards leaves local advantages alone
    convs2 = [dataclasses.replace(c, extra={**c.extra, "unit_reward": c.extra["unit_reward"] + 10 * (c.extra[
        "local_group"] < 0)}) for c in convs]
    out2 = logo_unit_advantages(build_batch(convs2, [0.0] * 3, [0] * 3), eps=EPS)
    np.testing.assert_allclose(out2.row_advantage, out.row_advantage, rtol=1e-5, atol=1e-5)
    # the official code's group of one (Memory-R2 @357b4ec core_algos.py: mean 0, std 1): A = r / (1 + eps)
    off = logo_unit_advantages(b, eps=EPS, singleton="reward")
    want_off = np.asarray(want, np.float64)
    want_off[7] = 3.0 / (1.0 + EPS)
    np.testing.assert_allclose(off.row_advantage, want_off, rtol=1e-5, atol=1e-6)
    # rows of one unit must agree
    bad = build_batch([row(0, 0, 1.0), row(0, 0, 2.0)], [0.0], [0])
    with pytest.raises(ValueError, match="disagree on unit_reward"):
        logo_unit_advantages(bad)


def test_step_level_weights_each_token_by_one_over_its_step_length():
    # two steps (rows) with 1 and 3 response tokens, advantages +1 and -1, ratios 1 (logp = old)
    convs = [row(0, 0, 1.0, n_resp=1), row(1, 0, 0.0, n_resp=3)]
    b = logo_unit_advantages(build_batch(convs, [0.0, 0.0], [0, 0]))
    a1, a2 = b.row_advantage
    mask = jnp.asarray(b.loss_mask)
    old = jnp.asarray(b.old_logp)
    adv = jnp.asarray(b.advantages)
    seg = jnp.where(mask != 0, jnp.arange(2)[:, None], -1)
    g_step = jax.grad(lambda lp: step_ratio_loss(lp, old, adv, mask, seg, num_segments=2, clip_low=0.2,
                                                 clip_high=0.2, dual_clip=3.0)[0])(old)
    g_tok = jax.grad(lambda lp: policy_loss(lp, old, adv, mask, clip_low=0.2, clip_high=0.2,
                                            agg="token-mean")[0])(old)
    # step level: d/d logp_t = -A_u / (n_u * steps); token level: -A / tokens
    want_step = np.zeros(b.loss_mask.shape)
    want_step[0, 3] = -a1 / (1 * 2)
    want_step[1, 3:6] = -a2 / (3 * 2)
    np.testing.assert_allclose(np.asarray(g_step), want_step, atol=1e-6)
    want_tok = -np.asarray(b.advantages) * np.asarray(b.loss_mask) / 4
    np.testing.assert_allclose(np.asarray(g_tok), want_tok, atol=1e-6)


def test_section_validation_and_curriculum():
    s = MemoryR2Section()
    assert (s.group_size, s.local_rollouts, s.local_prob, s.chunks_per_session, s.local_decoding) == (16, 4, 0.5, 6,
                                                                                                       "sample")
    steps = (0, 9, 10, 19, 20, 1000)
    assert [s.stage_sessions(k) for k in steps] == [8, 8, 16, 16, 32, 32]
    assert [s.stage_index(k) for k in steps] == [build(s).stage(k) for k in steps] == [0, 0, 1, 1, 2, 2]
    for bad in (dict(curriculum_steps=(1, 10, 20)), dict(curriculum_steps=(0, 10)), dict(local_prob=1.5),
                dict(local_decoding="beam"), dict(judge="openai"), dict(embedder="bert"), dict(group_size=0),
                dict(adv_singleton="one")):
        with pytest.raises(ValueError):
            MemoryR2Section(**bad)
    assert MemoryR2Section(logo=False).episode().local_rollouts == 4  # plain GRPO switches the samples, not m


needs_locomo = pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo not at {LOCOMO}")


@needs_locomo
def test_training_stream_curriculum_and_resume():
    sys_ = build(MemoryR2Section(locomo_path=str(LOCOMO), curriculum_steps=(0, 2), curriculum_sessions=(2, 5),
                                 embedder="hashed", answer_agent="overlap"))
    stream = sys_.train_data(2, seed=3)
    b0, b1, b2 = next(stream), next(stream), next(stream)
    assert [x.conversation.sample_id for x in b0] == ["conv-43", "conv-47"]
    assert [x.max_sessions for x in b0 + b1 + b2] == [2, 2, 2, 2, 5, 5]
    assert all(q.conversation == x.conversation.sample_id and q.category != 5 and q.evidence
               for x in b0 for q in x.questions)
    state = stream.get_state()
    again = sys_.train_data(2, seed=3)
    again.set_state(state)
    assert [x.seed for x in next(again)] == [x.seed for x in next(stream)]


@needs_locomo
def test_system_workflow_and_evaluation_on_scripted_engine():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from r2_fixtures import ScriptedEngine

    tok = memjax.Tokenizer.default()
    sys_ = MemoryR2System(MemoryR2Section(locomo_path=str(LOCOMO), embedder="hashed", answer_agent="overlap",
                                          eval_max_sessions=2, chunks_per_session=2, group_size=2,
                                          curriculum_sessions=(1, 2, 3)))
    wf = sys_.workflow(ScriptedEngine(tok), tok)
    sample = next(sys_.train_data(1, seed=0))[0]
    res = run_workflow(ScriptedEngine(tok), wf, [sample], group_size=2, seed=0)
    b = sys_.advantages(res.batch, None)
    assert b.row_advantage.shape == (b.num_rows,) and np.isfinite(b.advantages).all()
    m = sys_.evaluate(ScriptedEngine(tok), tok)
    assert m["m_fail"] >= 0 and m["memory_words"] > 0 and m["questions"] > 0
    assert {"f1/all", "bleu1/all", "j/all"} <= set(m)


def test_evaluation_metrics_hand_computed():
    traces = [{"questions": [
        {"category": 4, "question": "q", "gold": "red car", "answer": "red car", "f1": 1.0, "evidence": ["D1:1"]},
        {"category": 1, "question": "q", "gold": "blue", "answer": "green", "f1": 0.0, "evidence": ["D1:2", "D2:1"]}],
        "dia_ids": ["D1:1", "D2:1"], "memory_words": 10, "memory_tokens": 12}]
    m = evaluation_metrics(traces, RuleBasedJudge())
    assert m["f1/all"] == 0.5 and m["f1/single-hop"] == 1.0 and m["f1/multi-hop"] == 0.0
    assert m["j/all"] == 0.5 and m["m_fail"] == pytest.approx(1 / 3) and m["memory_tokens"] == 12


def test_ablations_act_on_unit_rewards():
    from memjax.rl.ablation import ablate as _ablate

    convs = [row(0, 0, 1.0), row(0, 0, 1.0), row(1, 0, 2.0), row(2, 0, 4.0), row(2, 1, 8.0, role=1)]
    b = build_batch(convs, [0.5, 1.0, 2.0], [0, 0, 0])
    rng = np.random.default_rng(0)
    for _ in range(5):
        out = _ablate(b, "shuffle_rewards", rng)
        assert out.unit_reward[0] == out.unit_reward[1]  # rows of a unit stay together
        assert sorted(out.unit_reward[[0, 2, 3, 4]].tolist()) == [1.0, 2.0, 4.0, 8.0]
        assert sorted(out.reward.tolist()) == [0.5, 1.0, 2.0]
    z0 = _ablate(b, "zero_advantages", rng)
    np.testing.assert_allclose(z0.unit_reward, 15.0 / 4)
    assert (logo_unit_advantages(z0).row_advantage == 0).all()
    assert _ablate(b, "none", rng) is b


def test_configs_load():
    from memjax.core.config import load_config_file

    root = Path(__file__).resolve().parents[4] / "configs"
    paper = load_config_file(root / "memory_r2" / "train.py")
    assert paper.agent.name == "memory_r2" and paper.loss.level == "step" and paper.loss.dual_clip == 3.0
    assert (paper.agent.group_size, paper.agent.local_rollouts, paper.agent.local_prob) == (16, 4, 0.5)
    assert (paper.optim.lr, paper.update.ppo_epochs, paper.loss.kl_coef, paper.loss.entropy_coef) == (2e-6, 2, 1e-3,
                                                                                                        1e-3)
    assert paper.engine.window > paper.agent.max_prompt_tokens + 1
    smoke = load_config_file(root / "memory_r2" / "smoke.py")
    assert smoke.agent.answer_agent == "overlap" and smoke.model.preset == "tiny-qwen-vocab"


@needs_locomo
def test_local_questions_on_real_locomo():
    """conv-43 session 1: 5 questions have their last evidence there (the public code's Q_1), 14 have some evidence
    there (memjax's earlier local Q_1); C_1 without the image captions."""
    from memjax.data.locomo import load_locomo
    from memjax.memory import HashedBowEmbedder
    from memjax.systems.memory_r2.reward import OverlapAnswerAgent, word_count
    from memjax.systems.memory_r2.workflow import MemoryR2, R2Sample

    conv = load_locomo(str(LOCOMO)).conversation("conv-43")
    emb = HashedBowEmbedder(64)
    sec = MemoryR2Section(locomo_path=str(LOCOMO), local_prob=1.0, questions_local=0)
    plans = {}
    for lq in ("last_evidence", "any_evidence"):
        wf = MemoryR2(memjax.Tokenizer.default(), sec.episode(local_questions=lq), emb, OverlapAnswerAgent(emb))
        prep = wf.prepare(R2Sample(conv, max_sessions=3))
        plans[lq] = [len(prep.local_plan[p][1]) for p in range(3)]
    assert plans == {"last_evidence": [5, 8, 18], "any_evidence": [14, 8, 22]}
    s1 = conv.sessions[0].turns
    assert prep.dialogue_words[0] == sum(word_count(t.text) for t in s1)
