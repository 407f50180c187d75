"""The system registry and the tagged `agent` section: `--set agent.name=X` swaps in X's defaults, keeps
the settings when X is already chosen, and names the known systems when X is unknown."""

import pytest

from memjax.cli.train import TrainConfig
from memjax.core.config import ConfigError, apply_overrides, describe
from memjax.systems import MemAgentSection, TinySection, get, names


def test_switch_system_by_name():
    cfg = TrainConfig()
    assert isinstance(cfg.agent, MemAgentSection) and {"memagent", "tiny"} <= set(names())
    tiny = apply_overrides(cfg, ["agent.name=tiny", "agent.group_size=3"])
    assert isinstance(tiny.agent, TinySection) and tiny.agent.group_size == 3
    same = apply_overrides(tiny, ["agent.name=tiny"])  # already tiny: settings kept
    assert same.agent.group_size == 3
    with pytest.raises(ConfigError, match="known: .*memagent.*tiny"):
        apply_overrides(cfg, ["agent.name=nope"])
    with pytest.raises(ConfigError, match="group_size"):
        apply_overrides(tiny, ["agent.group_size=0"])
    assert any(line.startswith("agent.task.num_chunks") for line in describe(tiny))
    assert get("tiny").section is TinySection
