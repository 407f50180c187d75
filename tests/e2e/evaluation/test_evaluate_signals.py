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

ROOT = Path(__file__).parents[3]
pytestmark = pytest.mark.e2e
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


def test_sigterm_to_the_launcher_stops_a_two_process_locomo_evaluation(tmp_path):
    """Two processes through memjax.launch: both stop before the same LoCoMo round (jax's preemption sync point), exit
    143 each, and the launcher reports their status; the finished rounds are kept."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(1.0)
            data = json.dumps({"choices": [{"message": {"role": "assistant",
                                                         "content": '{"label": "CORRECT"}'}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    from memjax.data.locomo import load_locomo

    data = ROOT / "tests/fixtures/data/locomo_fixture.json"
    ans = tmp_path / "a.jsonl"
    ans.write_text("".join(json.dumps({"qid": q.qid, "answer": q.answer}) + "\n"
                           for c in load_locomo(data).conversations for q in c.questions))
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "memjax.launch", "--nproc", "2", "--", "memjax.evaluate", "configs/locomo_answers.py",
           "--set", f"data_path={data}", "--set", f"answers={ans}", "--set", "split=sumer", "--set", "part=validation",
           "--set", "judge=openai", "--set", f"judge_url=http://127.0.0.1:{srv.server_address[1]}/v1", "--set",
           "batch_size=1", "--set", f"out_dir={out}"]
    try:
        p = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        pred, deadline = out / "predictions.jsonl", time.time() + 240
        while time.time() < deadline and not (pred.is_file() and pred.read_text().count("\n") >= 1):
            assert p.poll() is None
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        text = p.communicate(timeout=120)[0]
    finally:
        srv.shutdown()
    assert p.returncode == 143, text
    stops = [ln for ln in text.splitlines() if "memjax.evaluate: stopped by SIGTERM before LoCoMo round" in ln]
    assert len(stops) == 2 and stops[0].split("] ", 1)[1] == stops[1].split("] ", 1)[1]  # the same round on both
    assert text.strip().splitlines()[-1] == ("memjax.launch: the launcher was terminated (SIGTERM); its processes "
                                             "0 exited with status 143, 1 exited with status 143")
    assert "terminate called" not in text and 1 <= pred.read_text().count("\n") < 8
