"""LongMemEval scored as its authors score it by default: the shipped configs ask an LLM judge (here a real HTTP server
on 127.0.0.1 speaking the OpenAI chat API); an unreachable judge exits 1 with one line; the rule judge's numbers are
never titled LongMemEval accuracy; a run whose questions are all unreadable by the policy's vocabulary exits 1."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memjax.cli.evaluate import main

ROOT = Path(__file__).parents[3]
LME = ROOT / "tests/fixtures/data/longmemeval_fixture.json"
SHIPPED = ["configs/longmemeval_answers.py", "configs/memagent/longmemeval.py", "configs/memory_r1/longmemeval.py",
           "configs/memory_r2/longmemeval.py", "configs/sumer/longmemeval.py"]


@pytest.mark.parametrize("path", SHIPPED)
def test_shipped_configs_use_the_official_judge(path):
    from memjax.core.config import load_config_file

    cfg = load_config_file(ROOT / path)
    assert cfg.judge == "openai" and cfg.judge_model == "gpt-4o-2024-08-06"


@pytest.fixture
def judge_server():
    """An OpenAI-compatible judge: "yes" when the model response contains the gold answer's first word."""
    asked = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][0]["content"]
            asked.append(body["model"])
            gold = prompt.split("Answer: ")[1].split("\n")[0] if "Answer: " in prompt else ""
            resp = prompt.split("Model Response: ")[1].split("\n")[0]
            reply = "yes" if gold and gold.split()[0].lower() in resp.lower() else "no"
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", asked
    srv.shutdown()


def _answers(tmp_path) -> Path:
    from memjax.data.longmemeval import load_longmemeval

    qs = load_longmemeval(LME).questions
    p = tmp_path / "hyp.jsonl"
    p.write_text("".join(json.dumps({"question_id": q.question_id, "hypothesis": q.answer}) + "\n" for q in qs))
    return p


def test_official_judge_by_default_and_unreachable_judge_exits_1(judge_server, tmp_path, capsys):
    url, asked = judge_server
    argv = [str(ROOT / SHIPPED[0]), "--set", f"data_path={LME}", "--set", f"answers={_answers(tmp_path)}"]
    assert main([*argv, "--set", f"judge_url={url}", "--set", f"out_dir={tmp_path / 'ok'}"]) == 0
    res = json.loads((tmp_path / "ok" / "results.json").read_text())
    assert asked and set(asked) == {"gpt-4o-2024-08-06"} and res["table"]["overall"]["unscored"] == 0
    assert "LongMemEval accuracy: overall" in capsys.readouterr().out
    out = tmp_path / "down"
    assert main([*argv, "--set", "judge_url=http://127.0.0.1:9/v1", "--set", "judge_retries=0", "--set",
                 f"out_dir={out}"]) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err[-1].startswith("memjax.evaluate: stopped: 8 of 8 questions were not judged (judge "
                              "openai:gpt-4o-2024-08-06 at http://127.0.0.1:9/v1: ")
    assert json.loads((out / "results.json").read_text())["table"]["overall"]["accuracy"] is None
    # the judge back: the rerun asks only the unjudged questions and succeeds
    assert main([*argv, "--set", f"judge_url={url}", "--set", f"out_dir={out}"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["counts"]["rejudged"] == 8 and res["table"]["overall"]["unscored"] == 0
    assert main([*argv, "--set", "judge=rule", "--set", f"out_dir={out}"]) == 2  # another judge: refused


def test_rule_judge_is_never_titled_longmemeval_accuracy(tmp_path, capsys):
    out = tmp_path / "r"
    assert main([str(ROOT / SHIPPED[0]), "--set", f"data_path={LME}", "--set", f"answers={_answers(tmp_path)}",
                 "--set", "judge=rule", "--set", f"out_dir={out}"]) == 0
    said = capsys.readouterr().out
    assert "RULE JUDGE (not an LLM, tests only; not LongMemEval accuracy): overall" in said
    assert "LongMemEval accuracy" not in said.replace("not LongMemEval accuracy", "")
    assert (out / "results.md").read_text().startswith("## RULE JUDGE (not an LLM, tests only; not LongMemEval")


def test_all_questions_unreadable_by_the_vocabulary_exit_1(tmp_path, capsys):
    assert main([str(ROOT / "configs/sumer/longmemeval_tiny.py"), "--set", f"data_path={LME}", "--set",
                 f"out_dir={tmp_path / 'u'}"]) == 1
    assert "stopped: all 8 questions were unreadable by the policy's vocabulary" in capsys.readouterr().err
