"""memjax.core.config: config files, typed --set overrides, --help listing."""

import dataclasses
import re
from pathlib import Path

import pytest

from memjax.cli.evaluate import EvalConfig
from memjax.core.cli import parse_cli
from memjax.core.config import ConfigError, apply_overrides, describe, load_config_file

ROOT_CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def test_overrides_parse_types_and_revalidate():
    cfg = apply_overrides(EvalConfig(), ["engine.max_slots=32", "memagent.temperature=0.5", "baseline=false",
                                         "num_docs=5,10", "data_path=/x.json", "engine.kv.num_pages=none"])
    assert cfg.engine.max_slots == 32 and cfg.memagent.temperature == 0.5 and cfg.baseline is False
    assert cfg.num_docs == (5, 10) and cfg.data_path == "/x.json" and cfg.engine.kv.num_pages is None
    assert dataclasses.is_dataclass(cfg) and EvalConfig().engine.max_slots == 16  # original untouched
    with pytest.raises(ConfigError, match="must be a positive int"):
        apply_overrides(EvalConfig(), ["engine.max_slots=0"])  # EngineConfig's own validation


@pytest.mark.parametrize("item,msg", [
    ("nope=1", "has no field 'nope'"), ("engine=3", "is a section"), ("engine.max_slots=abc", "expected int"),
    ("baseline=maybe", "expected a boolean"), ("engine.max_slots", "key=value"),
])
def test_override_errors_name_the_key(item, msg):
    with pytest.raises(ConfigError, match=msg):
        apply_overrides(EvalConfig(), [item])


def test_config_file_and_help(tmp_path, capsys):
    f = tmp_path / "c.py"
    f.write_text("from memjax.evaluate import EvalConfig\nconfig = EvalConfig(num_samples=3)\n")
    assert load_config_file(f).num_samples == 3
    cfg, _ = parse_cli("prog", "d", [str(f), "--set", "seed=7"])
    assert cfg.seed == 7 and cfg.num_samples == 3
    with pytest.raises(SystemExit):
        parse_cli("prog", "d", [str(f), "--help"])
    out = capsys.readouterr().out
    assert "engine.max_slots: int = 16" in out and "num_samples: int = 3" in out
    assert len(describe(cfg)) > 20
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    with pytest.raises(ConfigError, match="must define `config`"):
        load_config_file(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_config_file(tmp_path / "missing.py")


def test_shipped_configs_load():
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parents[3] / "configs").rglob("*.py")):
        assert dataclasses.is_dataclass(load_config_file(path)), path


@pytest.mark.parametrize("change,message", [
    ("agent=dataclasses.replace(config.agent, group_size=2.5)", ": agent.group_size=2.5: expected int, got float"),
    ("eval_every=True", ": eval_every=True: expected int, got bool"),
    ('steps="3"', "TrainConfig: steps='3': expected int, got str"),
    ("steps=10**20", ": steps=100000000000000000000: larger than 2,147,483,647"),
])
def test_config_file_values_are_typed_like_set_values(change, message, tmp_path):
    import dataclasses  # noqa: F401

    from memjax.core.config import ConfigError, load_config_file

    f = tmp_path / "c.py"
    f.write_text(f"import dataclasses\nexec(open({str(ROOT_CONFIGS / 'tiny.py')!r}).read())\n"
                 f"config = dataclasses.replace(config, {change})\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config_file(f)


def test_set_sizes_have_an_upper_bound():
    from memjax.core.config import ConfigError, apply_overrides, load_config_file

    cfg = load_config_file(ROOT_CONFIGS / "tiny.py")
    with pytest.raises(ConfigError, match=r"^--set steps: 100000000000000000000 is larger than 2,147,483,647"):
        apply_overrides(cfg, ["steps=100000000000000000000"])
    assert apply_overrides(cfg, ["seed=99999999999"]).seed == 99999999999  # seeds are not sizes
