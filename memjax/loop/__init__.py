"""The parts of the one training loop, `Run` in run.py (which assembles them; memjax/train.py is the CLI), one idea
a module:

- `start.py`: the checks before any model loads, and the parts the loop steps (mesh, model, trainer, credit, engine,
  this process's data stream);
- `rollout.py`: a step's rollouts (generation batches, dynamic sampling, the reward ablation) and their seeds;
- `step.py`: a step after its rollouts (credit, update, weight hand-off, metrics, evaluation / stage restart /
  checkpoint when due);
- `state.py`: the train-state checkpoint, and the resume from the latest good one;
- `records.py`: metrics / traces / evals JSONL, TensorBoard, held-out evaluations, console step lines;
- `result.py`: what a finished run leaves (hf/, result.json, reward curve, report.html).
The `Run` parts (`Rollouts`, `Stepping`, `Checkpointed`, `Records`, `Results`) are classes without state of their
own: each module's docstring names the attributes of `Run` it reads and writes. Stage 7 (with memjax.train).
"""
