"""`python -m tests.unit.evaluation.memory_r1_scripted <memjax.evaluate args>`: memjax.evaluate with memjax.engine.Engine
replaced by the scripted Memory-R1 model of tests/unit/systems/memory_r1/test_memory_r1_eval.py (extraction, manager and
answer replies from the prompt text: nothing to compile), so a LoCoMo Memory-R1 evaluation runs as real processes
under memjax.launch (tests/e2e/evaluation/test_multiprocess_eval.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: scripted_engine

from memjax.parallel import initialize  # noqa: E402

initialize()  # before the test module's import starts the backend (jax.default_backend() in a skipif)

import memjax.engine  # noqa: E402
from memjax import Tokenizer  # noqa: E402
from memjax.cli.evaluate import main  # noqa: E402

from tests.unit.systems.memory_r1.test_memory_r1_eval import model  # noqa: E402
from scripted_engine import ScriptedEngine  # noqa: E402

if __name__ == "__main__":
    tok = Tokenizer.default()
    memjax.engine.Engine = lambda m, c: ScriptedEngine(tok, model)
    sys.exit(main(sys.argv[1:]))
