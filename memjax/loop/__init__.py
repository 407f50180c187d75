"""The one training loop, composed (memjax/loop/run.py's `Run` holds the parts; memjax/cli/train.py is the CLI):

- `start.py`: the checks before any model loads, and the `Parts` the loop steps (mesh, model, trainer, credit,
  engine, this process's data stream, the ablation generator);
- `run_state.py`: `RunState`, where the run stands (step, history, evaluations, recorded bests);
- `rollout.py`: a step's rollouts (generation batches, dynamic sampling, the reward ablation);
- `step.py`: one synchronous step (rollouts, credit, update, weight hand-off, metrics);
- `checkpointer.py`: train-state checkpoints and the resume from the latest good one;
- `run_log.py`: metrics / traces / evals JSONL, TensorBoard, console step lines;
- `result.py`: what a finished run leaves (hf/, result.json, reward curve, report.html);
- `run.py`: `Run`, composing them, and `train(cfg)`.
"""
