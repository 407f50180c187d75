"""Every ```python snippet of README.md runs as written, in order, in one namespace (a later snippet uses
the names an earlier one made), in a fresh process.

What the test changes, and nothing else: the paths the README leaves to the user (PATHS: a Hugging Face directory
-> a tiny random Qwen2.5-vocabulary model, an output folder -> a temporary one) and the inputs it leaves to the user
(INPUTS: `input_ids`, `prompts`, `samples`, bound before the snippets run; tiny, so that the snippet's own settings
run in seconds). A snippet line ending in `# <integer>` states a value: the test checks it
(`memjax.model.count_params(cfg)  # 7_615_616_512`). A new snippet that needs another input fails here until it is
given one.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PATHS = {"/path/to/Qwen2.5-7B-Instruct": "{hf}", '"out/dir"': '"{tmp}/saved"'}
INPUTS = '''
import numpy as np
input_ids = np.array([[1, 2, 3, 4]], np.int32)
prompts = [[1, 2, 3], [4, 5]]
samples = [{"context": "the key is in the box .", "query": "where is the key ?", "answers": ["box"]}]
'''


def snippets(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def stated_values(code: str) -> str:
    """`expr  # 7_615_616_512` lines become asserts (the README states the value)."""
    out = []
    for line in code.splitlines():
        m = re.match(r"^(\S[^#]*?)\s+#\s*([\d_]+)\b", line)
        if m and "=" not in m.group(1).replace("==", ""):
            out.append(f"assert ({m.group(1)}) == {m.group(2)}, ({m.group(1)!r}, {m.group(1)})")
        else:
            out.append(line)
    return "\n".join(out)


def test_the_readme_has_python_snippets_and_each_parses():
    blocks = snippets((REPO / "README.md").read_text())
    assert len(blocks) >= 3
    for b in blocks:
        ast.parse(b)


@pytest.mark.e2e
@pytest.mark.slow(seconds=260)  # measured with the load average near 40 (2 shared cores); a subprocess compiles the engine
def test_every_readme_python_snippet_runs_as_written(tmp_path):
    from memjax.checkpoint import save_hf
    from memjax.model import init_model, presets

    import shutil

    hf = tmp_path / "hf"  # a Hugging Face directory as the README's user has one: weights, config and tokenizer
    save_hf(init_model(presets.get("tiny-qwen-vocab"), seed=0), hf)
    for f in (REPO / "memjax/assets/qwen2.5-tokenizer").glob("*.json"):
        shutil.copy(f, hf / f.name)
    code = "\n".join(stated_values(b) for b in snippets((REPO / "README.md").read_text()))
    for k, v in PATHS.items():
        assert k in code, f"PATHS names {k!r}, which no README snippet has any more"
        code = code.replace(k, v.format(hf=hf, tmp=tmp_path))
    script = tmp_path / "readme.py"
    script.write_text(INPUTS + code + "\nprint('readme snippets ran')\n")
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "readme snippets ran" in p.stdout, (p.stdout + p.stderr)[-3000:]
