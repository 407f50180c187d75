"""TrainConfig.loggers: a tiny training run logged to a real MLflow server (started here on 127.0.0.1 with a SQLite
backend, read back through MlflowClient) and to wandb offline (its run files decoded with wandb's own protobuf
records) shows the same per-step metrics and held-out evaluations as metrics.jsonl and evals.jsonl, and the
environment the run ran in; a resumed run continues the same tracked runs."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow")
wandb = pytest.importorskip("wandb")

from memjax.cli import train  # noqa: E402
from memjax.core.config import apply_overrides  # noqa: E402
from memjax.core.environment import describe  # noqa: E402
from memjax.loop.trackers import metric_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e
DATA = ROOT / "tests" / "fixtures" / "data" / "hotpotqa_dev_excerpt.json"
SETS = [f"agent.data.path={DATA}", "agent.data.num_docs=10", "prompts_per_step=1", "agent.memagent.group_size=2",
        "agent.memagent.chunk_tokens=720", "agent.memagent.max_query_tokens=48", "agent.memagent.max_memory_tokens=8",
        "agent.memagent.max_final_tokens=4", "engine.window=1024", "optim.warmup_steps=0", "update.micro_rows=4",
        "update.pad_tokens=128", "checkpoint_every=1", "agent.eval_questions=2", "loggers=jsonl,tensorboard,mlflow,wandb"]


@pytest.fixture
def mlflow_server(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                             "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                             "--default-artifact-root", (tmp_path / "artifacts").as_uri(), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("mlflow server did not answer within 120 s")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def _records(path: Path):
    """The records of a wandb transaction log (.wandb): a 7-byte header, then LevelDB-log blocks of 32 KiB whose
    records are [crc32 4][length 2][type 1][data], a message cut over blocks as FIRST / MIDDLE / LAST parts. wandb 0.31
    ships no Python reader (its core writes the file); the messages are decoded with wandb's own protobuf classes."""
    data, pos, part = path.read_bytes(), 7, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        room = 32768 - (pos % 32768)
        if room < 7:  # block trailer
            pos += room
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 0 and length == 0:
            continue
        part = chunk if kind in (1, 2) else part + chunk
        if kind in (1, 4):
            yield part
            part = b""


def _wandb_records(out: Path, kind: str) -> list[dict]:
    """The `kind` records ("history", "config") of the run's .wandb files, each as {key: value}."""
    from wandb.proto import wandb_internal_pb2

    rows = []
    for f in sorted(out.glob("wandb/offline-run-*/run-*.wandb")):
        for data in _records(f):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(data)
            if rec.WhichOneof("record_type") == kind:
                items = rec.history.item if kind == "history" else rec.config.update
                rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in items})
    return rows


def test_mlflow_and_wandb_match_metrics_jsonl_and_resume(tmp_path, mlflow_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    train.train(apply_overrides(train.TrainConfig(), SETS + [f"out_dir={out}", "steps=1"]))
    ids = json.loads((out / "trackers.json").read_text())
    train.train(apply_overrides(train.TrainConfig(), SETS + [f"out_dir={out}", "steps=2"]))  # extends: resumes
    assert json.loads((out / "trackers.json").read_text()) == ids  # the same tracked runs continued

    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    client = mlflow.MlflowClient(tracking_uri=mlflow_server)
    run = client.get_run(ids["mlflow"])
    assert run.info.status == "FINISHED" and run.data.tags["memjax.code"]
    assert run.data.params["prompts_per_step"] == "1"
    for key in ("reward", "grad_norm", "rollout_s"):
        hist = {m.step: m.value for m in client.get_metric_history(ids["mlflow"], metric_name(key))}
        assert hist == {m["step"]: pytest.approx(float(m[key])) for m in lines}, key
    assert any(a.path == "report.html" for a in client.list_artifacts(ids["mlflow"]))
    evals = [json.loads(x) for x in (out / "evals.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [0, 1, 2]  # before training, and at the end of each of the two commands
    hist = {m.step: m.value for m in client.get_metric_history(ids["mlflow"], "eval/accuracy")}
    assert hist == {e["step"]: pytest.approx(e["accuracy"]) for e in evals}
    assert sorted(a.path for a in client.list_artifacts(ids["mlflow"], "eval")) == [
        f"eval/table_step{e['step']}.json" for e in evals]
    env = describe()  # both runs ran in this process: the environment the tracked run ends with
    assert {k: v for k, v in run.data.tags.items() if k.startswith("memjax.environment.")} == {
        f"memjax.environment.{k}": str(v) for k, v in {**{f"packages.{n}": v for n, v in env["packages"].items()},
                                                      **{k: v for k, v in env.items() if k != "packages"}}.items()}

    rows = [r for r in _wandb_records(out, "history") if "train/reward" in r]
    assert [r["_step"] for r in rows] == [1, 2]
    for r, m in zip(rows, lines):
        assert r["train/reward"] == pytest.approx(m["reward"]) and r["timing/rollout_s"] == pytest.approx(m["rollout_s"])
    assert {d.name.rsplit("-", 1)[-1] for d in out.glob("wandb/offline-run-*")} == {ids["wandb"]}
    assert [(r["_step"], r["eval/accuracy"]) for r in _wandb_records(out, "history") if "eval/accuracy" in r] == [
        (e["step"], pytest.approx(e["accuracy"])) for e in evals]
    configs = [c["memjax.environment"] for c in _wandb_records(out, "config") if "memjax.environment" in c]
    assert configs and configs[-1] == env
