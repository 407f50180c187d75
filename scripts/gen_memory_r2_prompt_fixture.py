"""Extract Memory-R2's system prompts from its official source into a JSON fixture (issue 32: no official code in
this repository, only the prompt texts it needs and the file hashes they came from).

Reads `prompt/math/multi_turn_mamrp.py` of ahmedehabb/Memory-R2 at two commits (f6d3e04, the older prompts, and
85aeeb1, the revision with the LoGo local branch; the two prompts are unchanged at 357b4ec) from a clone or
mirror, takes the module-level `NAME = (triple-quoted).strip()` / `NAME = "..."` assignments with `ast` (nothing is
executed), and writes per commit the file's SHA-256 and character count and the two prompts
(MEMORY_REASONER_PROMPT = memjax's extractor system prompt, MEMORY_EXECUTOR_PROMPT = its manager system prompt).
Usage:
  python scripts/gen_memory_r2_prompt_fixture.py --git-dir <Memory-R2 clone>/.git \
      --out tests/fixtures/memory_r2/system_prompts.json
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess

REPO = "ahmedehabb/Memory-R2"
PATH = "prompt/math/multi_turn_mamrp.py"
COMMITS = {"f6d3e04": "f6d3e049a0f14f9e04809bfd1cfe48777590c0a7", "85aeeb1": "85aeeb1cc7175870856d967c18e0f2d3f4e80244"}
NAMES = ("MEMORY_REASONER_PROMPT", "MEMORY_EXECUTOR_PROMPT")


def module_strings(text: str) -> dict[str, str]:
    """Module-level NAME = \"\"\"...\"\"\".strip() / NAME = "..." assignments, read from the syntax tree."""
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "strip" \
                    and isinstance(v.func.value, ast.Constant):
                out[node.targets[0].id] = v.func.value.value.strip()
            elif isinstance(v, ast.Constant) and isinstance(v.value, str):
                out[node.targets[0].id] = v.value
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True, help="the .git folder (or bare mirror) of a Memory-R2 clone")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    res = {"repository": REPO, "path": PATH, "script": "scripts/gen_memory_r2_prompt_fixture.py", "revisions": {}}
    for short, full in COMMITS.items():
        raw = subprocess.run(["git", "--git-dir", a.git_dir, "show", f"{full}:{PATH}"], check=True,
                             capture_output=True).stdout
        text = raw.decode("utf-8")
        s = module_strings(text)
        res["revisions"][short] = {"commit": full, "sha256": hashlib.sha256(raw).hexdigest(), "chars": len(text),
                                   **{n: s[n] for n in NAMES}}
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    return res


if __name__ == "__main__":
    main()
