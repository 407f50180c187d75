"""A new system is a Workflow class plus a System: a toy two-turn tool-using agent (a generated tool call, a
tool response spliced in and masked from the loss, a generated final answer), driven by run_workflow and
trained by the Trainer (masks, splice and engine/trainer log-prob agreement checked), then registered as the
system "toy_tool" and trained through `python -m memjax.train`'s loop with `--set agent.name=toy_tool`."""

import json
from dataclasses import dataclass

from conftest import golden_dir

from memjax import load_hf
from memjax.agents import Request, Workflow, run_workflow
from memjax.cli.train import TrainConfig, train
from memjax.core.config import apply_overrides
from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.rl import Conversation
from memjax.rl.advantages import AdvantageConfig, with_advantages
from memjax.rl.trainer import OptimConfig, Trainer, UpdateConfig
from memjax.systems import AgentSection, CountingStream, System, register

SP = SamplingParams(temperature=1.0, max_tokens=3)


class ToyTool(Workflow):
    """Turn 0 generates a call; the tool answers [100 + sum(call) % 50, 7]; turn 1 answers after it. One
    training row per trajectory: prompt | call | tool output (mask 0) | answer. Reward: answer starts even."""

    def start(self, traj, prompt):
        traj.state = {}
        return [Request(list(prompt), SP)]

    def react(self, traj, request, completion):
        if request.is_final:
            traj.state["answer"] = completion.token_ids
            return []
        traj.state["tool"] = [100 + sum(completion.token_ids) % 50, 7]
        return [Request(request.prompt + completion.token_ids + traj.state["tool"], SP, is_final=True)]

    def reward(self, traj):
        answer = traj.state["answer"]
        return float(bool(answer) and answer[0] % 2 == 0)

    def conversations(self, traj):
        (call_req, call), (_, answer) = traj.turns
        tool = traj.state["tool"]
        return [Conversation(call_req.prompt, call.token_ids + tool + answer.token_ids,
                             call.logprobs + [0.0] * len(tool) + answer.logprobs, sample=traj.index,
                             group=traj.sample, turn=0, is_final=True,
                             response_mask=[1] * len(call.token_ids) + [0] * len(tool) + [1] * len(answer.token_ids))]


def test_tool_workflow_masks_and_training():
    model = load_hf(golden_dir("untied_kv2"))
    engine = Engine(model, EngineConfig(max_slots=8, page_size=4, window=64, prefill_slots=4, prefill_chunk=16,
                                        progress=False))
    prompts = [list(range(3 + s, 9 + 2 * s)) for s in range(4)]
    trainer = Trainer(model, OptimConfig(lr=1e-2, warmup_steps=0), update=UpdateConfig(micro_rows=16, pad_tokens=16))
    for step in range(2):
        res = run_workflow(engine, ToyTool(), prompts, group_size=4, seed=step)
        b = res.batch
        assert b.num_rows == 16 and res.stats["conversations"] == 32
        for i in range(b.num_rows):
            p, n = int(b.prompt_len[i]), int(b.lengths[i])
            assert b.input_ids[i, :p].tolist() == prompts[b.group[i]] and (b.loss_mask[i, :p] == 0).all()
            call = [t for t in range(p, n) if b.loss_mask[i, t]][:3]
            tool = list(range(call[-1] + 1, call[-1] + 3))
            assert b.input_ids[i, tool].tolist() == [100 + int(b.input_ids[i, call].sum()) % 50, 7]
            assert (b.loss_mask[i, tool] == 0).all() and (b.old_logp[i, tool] == 0).all()
            assert b.loss_mask[i, p:n].sum() == n - p - 2 and (b.loss_mask[i, n:] == 0).all()
        stats = trainer.update(with_advantages(b, AdvantageConfig(norm="mean")), seed=step)
        assert stats["logp_mismatch_max"] < 1e-4  # the engine saw exactly the spliced context the trainer scores
        engine.update_weights(model)


@dataclass(frozen=True)
class ToySection(AgentSection):
    name: str = "toy_tool"
    group_size: int = 4
    temperature: float = 1.0


@register
class ToySystem(System):
    name, section = "toy_tool", ToySection

    def load_model(self, source):
        return load_hf(golden_dir("untied_kv2")), None

    def engine_config(self, default):
        return EngineConfig(max_slots=8, page_size=4, window=64, prefill_slots=4, prefill_chunk=16, progress=False)

    def train_data(self, batch_size, seed):
        return CountingStream(lambda i, n: [list(range(3 + s % 4, 9 + 2 * (s % 4))) for s in range(i, i + n)],
                              batch_size)

    def workflow(self, engine, tokenizer, *, train=True):
        return ToyTool()


def test_toy_tool_system_trains_through_memjax_train(tmp_path):
    cfg = apply_overrides(TrainConfig(), ["agent.name=toy_tool", f"out_dir={tmp_path}", "steps=2",
                                          "prompts_per_step=4", "update.micro_rows=16", "update.pad_tokens=16",
                                          "optim.lr=1e-2", "optim.warmup_steps=0", "advantage.norm=mean"])
    result = train(cfg)
    assert [h["step"] for h in result["history"]] == [1, 2] and result["system"] == "toy_tool"
    for h in result["history"]:
        assert h["conversations"] == 16 and h["rollout_conversations"] == 32  # 2 turns -> 1 trained row
        assert h["logp_mismatch_max"] < 1e-4 and h["optimizer_steps"] == 1
    assert json.loads((tmp_path / "result.json").read_text())["system"] == "toy_tool"
    assert (tmp_path / "checkpoints").is_dir() and (tmp_path / "hf" / "config.json").is_file()
