"""Experiment trackers beside metrics.jsonl and TensorBoard: Weights & Biases and MLflow (TrainConfig.loggers).

Owns `Trackers` (`log(metrics, step)`, `log_evaluation(row, step)`, `artifact(path)`, `close()`) and the metric name
scheme (docs/trackers.md): a step's metrics go under `train/<key>`, its phase times (keys ending in `_s`) under
`timing/<key>`, held-out evaluation scalars (the loop's `eval_<key>`) under `eval/<key>`; the run's config is the
tracked run's config / params (flattened with dots), the code digest its `memjax.code` tag / config entry, the
environment (memjax/core/environment.py, this start's or resume's) its `memjax.environment` config entry / tags, the
report page an artifact, each evaluation row also a table (wandb Table `eval/table`, MLflow `eval/table.json`).
The Run closes the trackers after the report is logged (memjax/loop/result.py `announce`); a run that stops before closes them at
exit. Invariants: only process 0 tracks (every method is a no-op elsewhere and with no tracker named); the tracked run's
id is stored in out_dir/trackers.json when it starts, so a resumed run continues the same tracked run (wandb
`resume="allow"` with that id; MLflow the same run id, set RUNNING again); MLflow's server is MLFLOW_TRACKING_URI
(default: out_dir/mlruns as a file store), its experiment MLFLOW_EXPERIMENT_NAME (default "memjax"); wandb reads its
own environment (WANDB_MODE=offline, WANDB_PROJECT, default project "memjax", files under out_dir/wandb).
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

LOGGERS = ("jsonl", "tensorboard", "wandb", "mlflow")


def metric_name(key: str) -> str:
    """The tracked name of a loop metric key (module docstring)."""
    if key.startswith("eval_"):
        return "eval/" + key[len("eval_"):]
    if key.endswith("_s"):
        return "timing/" + key
    return "train/" + key


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def _numbers(metrics: dict) -> dict[str, float]:
    return {metric_name(k): float(v) for k, v in metrics.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)}


class _Wandb:
    def __init__(self, out: Path, config: dict, code: str, run_id: str | None, environment: dict):
        import wandb

        self.wandb = wandb
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "memjax"), id=run_id, resume="allow",
                              dir=str(out), config={**config, "memjax.code": code}, name=out.name)
        self.run.config.update({"memjax.environment": environment}, allow_val_change=True)  # a resume's may differ
        self.id = self.run.id

    def log(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def table(self, row: dict, step: int) -> None:
        cols = list(row)
        self.run.log({"eval/table": self.wandb.Table(columns=cols, data=[[row[c] for c in cols]])}, step=step)

    def artifact(self, path: Path) -> None:
        art = self.wandb.Artifact(f"{path.stem}-{self.id}", type="report")
        art.add_file(str(path))
        self.run.log_artifact(art)

    def close(self) -> None:
        self.run.finish()


class _Mlflow:
    def __init__(self, out: Path, config: dict, code: str, run_id: str | None, environment: dict):
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param, RunTag

        self.Metric = Metric
        uri = os.environ.get("MLFLOW_TRACKING_URI") or (out / "mlruns").absolute().as_uri()
        self.client = MlflowClient(tracking_uri=uri)
        if run_id is None:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "memjax")
            exp = self.client.get_experiment_by_name(name)
            exp_id = exp.experiment_id if exp else self.client.create_experiment(name)
            run_id = self.client.create_run(exp_id, run_name=out.name, tags={"memjax.code": code}).info.run_id
            params = [Param(k, str(v)[:6000]) for k, v in _flat(config).items()]
            for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
                self.client.log_batch(run_id, params=params[i:i + 100])
        else:
            self.client.update_run(run_id, status="RUNNING")
        tags = [RunTag(k, str(v)[:5000]) for k, v in _flat(environment, "memjax.environment.").items()]
        self.client.log_batch(run_id, tags=tags)  # params are write-once; a resume's environment replaces these
        self.id = run_id

    def log(self, values: dict[str, float], step: int) -> None:
        import time

        now = int(time.time() * 1000)
        self.client.log_batch(self.id, metrics=[self.Metric(k, v, now, step) for k, v in values.items()])

    def table(self, row: dict, step: int) -> None:
        self.client.log_dict(self.id, {"step": [step], **{k: [v] for k, v in row.items()}},
                             f"eval/table_step{step}.json")

    def artifact(self, path: Path) -> None:
        self.client.log_artifact(self.id, str(path))

    def close(self) -> None:
        self.client.set_terminated(self.id)


class Trackers:
    """The run's wandb / MLflow runs (module docstring); `Trackers.open(cfg, out, primary, code, environment)`."""

    def __init__(self, backends: dict[str, Any]):
        self.backends = backends

    @classmethod
    def open(cls, cfg, out: Path, primary: bool, code: str = "", environment: dict | None = None) -> "Trackers":
        names = [n for n in getattr(cfg, "loggers", ()) if n in ("wandb", "mlflow")]
        if not primary or not names:
            return cls({})
        state_path = out / "trackers.json"
        state = json.loads(state_path.read_text()) if state_path.is_file() else {}
        config = dataclasses.asdict(cfg)
        backends = {}
        for n in names:
            backends[n] = (_Wandb if n == "wandb" else _Mlflow)(out, config, code, state.get(n), environment or {})
            state[n] = backends[n].id
            state_path.write_text(json.dumps(state, indent=1) + "\n")  # before the first value: a kill resumes it
        out_trackers = cls(backends)
        atexit.register(out_trackers.close)  # a run that stops early still ends its tracked runs
        return out_trackers

    def log(self, metrics: dict, step: int) -> None:
        values = _numbers(metrics)
        for b in self.backends.values():
            if values:
                b.log(values, step)

    def log_evaluation(self, row: dict, step: int) -> None:
        scalars = {k: v for k, v in row.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        for b in self.backends.values():
            b.table(scalars, step)

    def artifact(self, path: Path) -> Path:
        for b in self.backends.values():
            b.artifact(Path(path))
        return Path(path)

    def close(self) -> None:
        for b in self.backends.values():
            b.close()
        self.backends = {}
