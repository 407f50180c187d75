"""MemAgent's training recipe at the path the product card names; the recipe itself is configs/memagent/train.py.

  python -m memjax.train configs/memagent.py --set model.hf_path=... --set agent.data.path=hotpot_train.json
is the same run as with configs/memagent/train.py in its place (every other config lives in its paper's folder,
configs/<paper>/).
"""

from pathlib import Path

from memjax.core.config import load_config_file

config = load_config_file(Path(__file__).with_name("memagent") / "train.py")
