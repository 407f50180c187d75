"""Render LongMemEval's official judge prompts into a golden JSON fixture (issue 51: no official code in this
repository, only the rendered prompts and the commit and file hash they came from).

Reads `src/evaluation/evaluate_qa.py` of xiaowu0162/LongMemEval at COMMIT from a clone or bare mirror, takes the
`get_anscheck_prompt` function out of the file's syntax tree with `ast` (the file's imports -- openai, backoff,
tqdm -- are not executed and need not be installed), executes that one function in a fresh namespace, and calls
it on CASES: every question type, the abstention prompt, and answers holding braces, quotes, newlines and
non-ASCII text. tests/unit/evaluation/test_longmemeval_judge.py checks memjax's prompts against the file written.
Usage:
  python scripts/gen_longmemeval_judge_fixture.py --git-dir <LongMemEval clone>/.git \
      --out tests/fixtures/longmemeval/judge_prompts.json
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess

REPO = "xiaowu0162/LongMemEval"
PATH = "src/evaluation/evaluate_qa.py"
COMMIT = "9e0b455f4ef0e2ab8f2e582289761153549043fc"
TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
         "temporal-reasoning", "knowledge-update")
CASES = [(t, f"Question about {t}?", "Gold answer 42", "The model says 42.", False) for t in TYPES] + [
    (t, "What breed is my cat?", "Not enough information: only a dog was mentioned.", "I don't know.", True)
    for t in TYPES] + [
    ("multi-session", "How many {items} do I own?", "3 {set}", "You own {3} items, \"quoted\"\nsecond line", False),
    ("temporal-reasoning", "Combien de jours ?", "12 days. 13 days (including the last day) is also acceptable.",
     "Environ 12 jours — ça fait presque deux semaines.", False),
    ("knowledge-update", "Where does my sister live now?", "Lisbon", "", False),
    ("single-session-preference", "Recommend a weekend activity.",
     "The user would prefer birdwatching; they would not prefer crowded venues.", "Go to a stadium concert.", False),
]


def prompt_function(source: str):
    """`get_anscheck_prompt` from the file's syntax tree, executed alone (no module-level code runs)."""
    tree = ast.parse(source)
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_anscheck_prompt"]
    if len(fn) != 1:
        raise SystemExit(f"{PATH}: expected one get_anscheck_prompt definition, found {len(fn)}")
    namespace: dict = {}
    exec(compile(ast.Module(body=fn, type_ignores=[]), PATH, "exec"), namespace)  # noqa: S102 (the official code)
    return namespace["get_anscheck_prompt"]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True, help="the .git folder (or bare mirror) of a LongMemEval clone")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    raw = subprocess.run(["git", "--git-dir", a.git_dir, "show", f"{COMMIT}:{PATH}"], check=True,
                         capture_output=True).stdout
    fn = prompt_function(raw.decode("utf-8"))
    res = {"repository": REPO, "commit": COMMIT, "path": PATH, "sha256": hashlib.sha256(raw).hexdigest(),
           "function": "get_anscheck_prompt", "script": "scripts/gen_longmemeval_judge_fixture.py",
           "cases": [{"task": t, "question": q, "answer": g, "response": r, "abstention": ab,
                      "prompt": fn(t, q, g, r, abstention=ab)} for t, q, g, r, ab in CASES]}
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    return res


if __name__ == "__main__":
    main()
