"""memjax/run/identity.py's resume check on a run directory written by older code: a field the recorded config lacks
(added to memjax since) counts as its default, so upgrading memjax does not strand a run unless the resume sets
such a field away from its default; the compile cache may change on a resume. (The whole CLI path, with a real
run: tests/e2e/test_bad_input_table.py rows 3 and 4.)"""

import dataclasses
import json

import pytest

from memjax.core.config import ConfigError, apply_overrides
from memjax.run.identity import check_resume
from memjax.run.train_config import TrainConfig


def _old_run(tmp_path, cfg, drop=("compile_cache",), drop_engine=("fuse_split_combine", "fuse_rope_kv")):
    out = tmp_path / "run"
    (out / "checkpoints" / "1").mkdir(parents=True)
    saved = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    for k in drop:
        del saved[k]
    for k in drop_engine:
        del saved["engine"]["kernels"][k]
    (out / "run.json").write_text(json.dumps({"config": saved, "system": "memagent", "resumed": []}))
    return out


def test_fields_newer_than_the_record_count_as_their_defaults(tmp_path):
    cfg = apply_overrides(TrainConfig(), [f"out_dir={tmp_path / 'run'}"])
    out = _old_run(tmp_path, cfg)
    assert check_resume(out, cfg) is not None                                   # same run: resumes
    assert check_resume(out, apply_overrides(cfg, ["compile_cache=none", "steps=20"])) is not None
    with pytest.raises(ConfigError, match=r"engine.kernels.fuse_rope_kv: false -> true"):
        check_resume(out, apply_overrides(cfg, ["engine.kernels.fuse_rope_kv=true"]))
    with pytest.raises(ConfigError, match=r"seed: 0 -> 1"):
        check_resume(out, apply_overrides(cfg, ["seed=1"]))


def _flat_engine_run(tmp_path, cfg):
    """A run.json written before EngineConfig grouped its KV-cache and kernel options: engine.kv_dtype, not
    engine.kv.kv_dtype."""
    out = tmp_path / "flat"
    (out / "checkpoints" / "1").mkdir(parents=True)
    saved = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    engine = saved["engine"]
    for group in ("kv", "kernels"):
        engine.update(engine.pop(group))
    assert "kv_dtype" in engine and "layers" in engine and "kv" not in engine
    (out / "run.json").write_text(json.dumps({"config": saved, "system": "memagent", "resumed": []}))
    return out


def test_a_run_recorded_before_the_engine_option_groups_resumes(tmp_path):
    cfg = apply_overrides(TrainConfig(), [f"out_dir={tmp_path / 'flat'}", "engine.kv.num_pages=200",
                                          "engine.kernels.layers=unrolled"])
    out = _flat_engine_run(tmp_path, cfg)
    assert check_resume(out, cfg) is not None                                   # same values, old layout: resumes
    with pytest.raises(ConfigError, match=r"engine.kv.num_pages: 200 -> 201"):   # a moved field that changed: refused
        check_resume(out, apply_overrides(cfg, ["engine.kv.num_pages=201"]))
    with pytest.raises(ConfigError, match=r"engine.kernels.layers: \"unrolled\" -> \"scan\""):
        check_resume(out, apply_overrides(cfg, ["engine.kernels.layers=scan"]))


def _record_and_resume(tmp_path, first_env, second_env):
    """run.json of a run started in `first_env` and resumed in `second_env`; the lines the resume said."""
    from memjax.run.identity import record

    cfg = apply_overrides(TrainConfig(), [f"out_dir={tmp_path / 'moved'}"])
    out = tmp_path / "moved"
    out.mkdir(parents=True)
    record(out, cfg, "memagent", "c0de", "model", None, environment=first_env)
    (out / "checkpoints" / "1").mkdir(parents=True)
    said: list[str] = []
    record(out, cfg, "memagent", "c0de", "model", check_resume(out, cfg), say=said.append, environment=second_env)
    return json.loads((out / "run.json").read_text()), said


def test_a_resume_in_another_environment_is_said_and_recorded_never_refused(tmp_path):
    here = {"python": "3.12.1", "packages": {"jax": "0.11.2", "flax": "0.12.12"}, "backend": "cpu",
            "device_kind": "cpu", "devices": 1, "processes": 1, "cpu": "AMD EPYC 9B45"}
    there = {**here, "packages": {"jax": "0.11.2", "flax": "0.12.13"}, "cpu": "Intel Xeon Platinum 8480+"}
    run, said = _record_and_resume(tmp_path, here, there)
    assert run["environment"] == here and run["resumed"][-1]["environment"] == there
    assert len(said) == 1 and "in another environment (flax 0.12.12 -> 0.12.13; cpu: AMD EPYC 9B45 -> Intel Xeon " \
        "Platinum 8480+)" in said[0], said
    run, said = _record_and_resume(tmp_path / "same", here, dict(here))   # same machine and versions: silent
    assert said == [] and run["resumed"][-1]["environment"] == here
