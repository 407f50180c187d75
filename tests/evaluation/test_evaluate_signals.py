"""SIGTERM / SIGINT stop `python -m memjax.evaluate` at the next question batch: exit 143 / 130 with one line, the
finished batches kept (a rerun resumes after them), never an abort. A real process, a real judge server on 127.0.0.1
that answers slowly so that the signal lands mid-run."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LME = ROOT / "tests/fixtures/data/longmemeval_fixture.json"


@pytest.fixture
def slow_judge():
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(0.5)
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": "yes"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


@pytest.mark.parametrize("sig,code,name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_signal_stops_at_the_next_batch_and_keeps_finished_ones(slow_judge, sig, code, name, tmp_path):
    from memjax.data.longmemeval import load_longmemeval

    qs = load_longmemeval(LME).questions
    hyp = tmp_path / "hyp.jsonl"
    hyp.write_text("".join(json.dumps({"question_id": q.question_id, "hypothesis": q.answer}) + "\n" for q in qs))
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "memjax.evaluate", str(ROOT / "configs/longmemeval_answers.py"), "--set",
           f"data_path={LME}", "--set", f"answers={hyp}", "--set", f"judge_url={slow_judge}", "--set", "batch_size=1",
           "--set", f"out_dir={out}"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    pred = out / "predictions.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (pred.is_file() and pred.read_text().count("\n") >= 1):
        time.sleep(0.1)
    p.send_signal(sig)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == code, err
    lines = [ln for ln in err.splitlines() if ln.startswith("memjax.evaluate:")]
    assert lines[-1].startswith(f"memjax.evaluate: stopped by {name} before LongMemEval questions")
    assert "finished question batches are kept in" in lines[-1] and "terminate called" not in err
    kept = len(pred.read_text().splitlines())
    assert 1 <= kept < len(qs)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads((out / "results.json").read_text())
    assert res["counts"]["resumed"] == kept and res["counts"]["predicted"] == len(qs) - kept
