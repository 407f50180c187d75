"""Child of tests/e2e/test_plan_configs.py, run on 8 simulated CPU devices: the memory plan of every shipped training
config (configs/*.py whose `config` is a TrainConfig) with small shapes (a 2-layer untied model, 128-token rows
and engine window, 1 micro-batch slot; configs whose programs and held models
shrink to the same are planned once: `same_as`) and everything else as shipped (mesh, micro_rows, loss, critic, held
models); prints one JSON object {config name: plan or {"error": one line}}."""

import dataclasses
import json
import sys
from pathlib import Path

from memjax.cli.train import TrainConfig
from memjax.core.config import load_config_file
from memjax.model import presets
from memjax.run.plan import plan

SMALL = presets.get("tiny", num_layers=1, tie_word_embeddings=False, param_dtype="float32", dtype="bfloat16")


def shrink(cfg):
    u = cfg.update
    update = dataclasses.replace(u, row_buckets=(128,) if u.row_buckets else (), pad_tokens=min(u.pad_tokens, 128),
                                 min_micro_batches=1)
    engine = dataclasses.replace(cfg.engine, window=128, page_size=16, prefill_chunk=64)
    return dataclasses.replace(cfg, update=update, engine=engine)


def main(root: str) -> None:
    out, seen = {}, {}
    for path in sorted(Path(root, "configs").rglob("*.py")):
        name = path.relative_to(Path(root, "configs")).with_suffix("").as_posix()  # e.g. "memagent/train"
        cfg = load_config_file(path)
        if not isinstance(cfg, TrainConfig):
            continue
        small = shrink(cfg)
        lc = small.loss  # the compiled programs' structure (not their constants, nor the engine's KV numbers)
        key = repr((dataclasses.replace(small.update, pad_tokens=1), lc.level, lc.agg, bool(lc.kl_coef),
                    bool(lc.entropy_coef), bool(small.optim.grad_clip), small.mesh, small.advantage.estimator,
                    bool(small.critic.grad_clip), small.engine_sleep, small.agent.held_models()))
        if key in seen:
            out[name] = {**out[seen[key]], "same_as": seen[key]}
            continue
        seen[key] = name
        try:
            out[name] = plan(small, 8, 80.0, min_kv_gib=1.0, model_cfg=SMALL)
        except Exception as e:  # reported, and the test fails naming the config
            out[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
