"""MemAgent training recipe for Qwen2.5-14B-Instruct: the 7B recipe (configs/memagent.py) with the 14B
model, smaller micro-batches and its own output folder.

  python -m memjax.train configs/memagent_14b.py --set model.hf_path=/path/to/Qwen2.5-14B-Instruct \
      --set agent.data.path=/path/to/hotpot_train_v1.1.json
"""

import dataclasses
from pathlib import Path

from memjax.config import load_config_file

_base = load_config_file(Path(__file__).with_name("memagent.py"))
config = dataclasses.replace(
    _base,
    model=dataclasses.replace(_base.model, preset="qwen2.5-14b"),
    update=dataclasses.replace(_base.update, micro_rows=4),
    out_dir="out/memagent_14b",
)
