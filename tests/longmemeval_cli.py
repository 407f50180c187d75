"""Shared by the systems' LongMemEval tests: run `python -m memjax.evaluate configs/<paper>/longmemeval.py` on the
LongMemEval fixture with memjax.engine.Engine replaced by a scripted engine (a policy function of the prompt: nothing
to compile), and read back what it wrote."""

import json
from pathlib import Path

ROOT = Path(__file__).parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "data" / "longmemeval_fixture.json"


def run_longmemeval(paper: str, out: Path, make_engine, extra=()) -> tuple[dict, list[dict], list]:
    """(results.json, predictions.jsonl lines, the scripted engines made) of one CLI run; asserts exit status 0."""
    from scripted_engine import engine_replaced

    from memjax.cli.evaluate import main

    engines = []

    def engine(model, cfg, devices=None):  # devices: where a frozen engine runs (unused by the script)
        engines.append(make_engine(cfg))
        return engines[-1]

    sets = [f"data_path={FIXTURE}", f"out_dir={out}", "batch_size=4", "judge=rule", *extra]
    with engine_replaced(engine):
        assert main([str(ROOT / "configs" / paper / "longmemeval.py"), *[a for s in sets for a in ("--set", s)]]) == 0
    res = json.loads((out / "results.json").read_text())
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert (out / "results.md").is_file() and (out / "scores.png").is_file() and (out / "report.html").is_file()
    return res, lines, engines


def scripted_engine(tok, policy, window: int):
    """Memory-R2's test engine (continuation with parent= / retain=, tests/unit/systems/memory_r2/r2_fixtures.py) with a
    `generate` for the batch callers (answer agents); `policy(prompt_text)` -> reply text."""
    from tests.unit.systems.memory_r2.r2_fixtures import ScriptedEngine

    class Engine(ScriptedEngine):
        def generate(self, prompts, params):
            rids = [self.submit(p, params) for p in prompts]
            done = {c.request_id: c for c in self.step()}
            return [done[r] for r in rids]

    return Engine(tok, lambda text, params: policy(text), window=window)
