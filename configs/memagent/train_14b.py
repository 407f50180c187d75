"""MemAgent training recipe for Qwen2.5-14B-Instruct: the 7B recipe (configs/memagent/train.py, dual clip 3, packed
rows, ZeRO-3 over every device) with the 14B model and its own output folder. micro_rows stays 8: one packed
row per device per micro-batch on 8 devices (micro_rows must be a multiple of data x fsdp).
Memory plan: python -m memjax.plan configs/memagent/train_14b.py --devices 8 --hbm-gib 141 (BUILD.md).

  python -m memjax.train configs/memagent/train_14b.py --set model.hf_path=/path/to/Qwen2.5-14B-Instruct \
      --set agent.data.path=/path/to/hotpot_train_v1.1.json
"""

import dataclasses
from pathlib import Path

from memjax.core.config import load_config_file

_base = load_config_file(Path(__file__).with_name("train.py"))
config = dataclasses.replace(
    _base,
    model=dataclasses.replace(_base.model, preset="qwen2.5-14b"),
    # 48 slots per H200 on 8 groups: 14B's KV is 192 KiB per token, so 48 full 8,192-token windows (72 GiB) fit the
    # 75 GiB of KV the plan leaves per device
    engine=dataclasses.replace(_base.engine, max_slots=384),
    out_dir="out/memagent_14b",
)
