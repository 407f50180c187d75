"""Generate golden fixtures for the judge profiles (memjax/rewards/judge_profiles.py) from the OFFICIAL code.

No official code lives in this repository: the files are read from paths given on the command line and only the
named top-level definitions are executed (taken with `ast`):
  memory_r2: ahmedehabb/Memory-R2 @357b4ec, testing/pipeline_test_locomo_qa_dump/score_locomo_qa_dumps.py —
             `ACCURACY_PROMPT` and `extract_label` (the module itself builds an OpenAI client at import).
  mem0:      mem0ai/mem0 @373709f, evaluation/metrics/llm_judge.py — `ACCURACY_PROMPT` and the label line of
             `evaluate_llm_judge`: `json.loads(extract_json(content))["label"]`, 1 iff == "CORRECT", with
             `extract_json` from mem0/memory/utils.py (same commit). A reply on which that line raises is
             recorded as "raise:<ExceptionName>".
Usage (plain python, no extra packages):
  git --git-dir=<Memory-R2 mirror> show 357b4ec:testing/pipeline_test_locomo_qa_dump/score_locomo_qa_dumps.py > /tmp/g/r2_score.py
  git --git-dir=<mem0 mirror> show 373709f:evaluation/metrics/llm_judge.py > /tmp/g/mem0_llm_judge.py
  git --git-dir=<mem0 mirror> show 373709f:mem0/memory/utils.py > /tmp/g/mem0_memory_utils.py
  python scripts/gen_judge_label_goldens.py --r2 /tmp/g/r2_score.py --mem0-judge /tmp/g/mem0_llm_judge.py \
      --mem0-utils /tmp/g/mem0_memory_utils.py --out tests/fixtures/judge_label_goldens.json
Replies: generated judge outputs (reasoning + label as JSON with double or single quotes, fenced, nested, several
objects, bare words in any case, both words, "incorrect", non-string labels, unicode, empty), deterministic (seeded).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import random
import re


def load(path: str, names: tuple[str, ...]) -> dict:
    tree = ast.parse(open(path, encoding="utf-8").read())
    keep = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name in names)
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", None) in names for t in n.targets))]
    ns = {"json": json, "re": re}
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), ns)
    missing = [n for n in names if n not in ns]
    if missing:
        raise SystemExit(f"{path}: not found: {missing}")
    return ns


REASONS = ["The generated answer matches the gold.", "It refers to a different date.", "", "Reasoning: same topic.",
           "The answer is not correct, it is wrong.", "Both say May 7.", "café — naïve ✓", "Label follows:\n"]
LABELS = ["CORRECT", "WRONG", "correct", "wrong", "Correct", "Wrong", " CORRECT ", "INCORRECT", "maybe", "",
          "CORRECT.", "correct\n"]
FORMS = [
    '{{"label": "{l}"}}', "{{'label': '{l}'}}", '```json\n{{"label": "{l}"}}\n```', '```\n{{"label":"{l}"}}\n```',
    '{{"label": "{l}", "reason": "x"}}', '{{"result": {{"label": "{l}"}}}}', '{{"label": "WRONG"}} {{"label": "{l}"}}',
    '{{"label": "{l}"}} then {{"label": "CORRECT"}}', "{l}", "Final answer: {l}", '"label": "{l}"', "label: {l}",
    '{{"label": true}} {l}', '{{"label": ["{l}"]}}', '{{"label": "{l}"', '{{ "label" : "{l}" }}', '[{{"label": "{l}"}}]',
    '{{"Label": "{l}"}}', '{{"label": "{l}"}} WRONG', 'CORRECT or WRONG? {l}', '{{"label": null}}', '{{label: "{l}"}}',
]


def replies(rng: random.Random) -> list[str]:
    out = [r + ("\n" if r else "") + f.format(l=lab) for r, f, lab in itertools.product(REASONS[:3], FORMS, LABELS)]
    for _ in range(400):
        out.append(rng.choice(REASONS) + rng.choice([" ", "\n", "\n\n", ""]) + rng.choice(FORMS).format(
            l=rng.choice(LABELS)) + rng.choice(["", " ", "\n", " I hope this helps.", " {x}", "}"]))
    out += ["", " ", "{}", "{", "}", "```json\n```", "null", '"CORRECT"', "correctly wrongly", "CORRECTWRONG",
            "ＣＯＲＲＥＣＴ", "straße correct", "{\"label\": \"\u0441orrect\"}", "<think>WRONG?</think> CORRECT"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--r2", required=True)
    ap.add_argument("--mem0-judge", required=True)
    ap.add_argument("--mem0-utils", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    r2 = load(args.r2, ("ACCURACY_PROMPT", "extract_label"))
    m0 = load(args.mem0_judge, ("ACCURACY_PROMPT",))
    m0u = load(args.mem0_utils, ("extract_json",))

    def mem0_label(content: str):
        try:
            label = json.loads(m0u["extract_json"](content))["label"]
        except Exception as e:      # the official script has no handler here: the run stops
            return f"raise:{type(e).__name__}"
        return 1 if label == "CORRECT" else 0

    rng = random.Random(32)
    cases = [{"reply": r, "memory_r2": r2["extract_label"](r), "mem0": mem0_label(r)} for r in replies(rng)]
    items = [("When did Caroline go to the LGBTQ support group?", "7 May 2023", "She went on {May 7}, 2023."),
             ("What is Melanie's hobby?", "pottery, painting", "painting 'and' \"pottery\"")]
    prompts = {"memory_r2": [r2["ACCURACY_PROMPT"].format(question=q, gold_answer=g, generated_answer=a)
                             for q, g, a in items],
               "mem0": [m0["ACCURACY_PROMPT"].format(question=q, gold_answer=g, generated_answer=a)
                        for q, g, a in items]}
    meta = {"memory_r2": {"repo": "ahmedehabb/Memory-R2", "commit": "357b4ec",
                          "path": "testing/pipeline_test_locomo_qa_dump/score_locomo_qa_dumps.py",
                          "functions": ["ACCURACY_PROMPT", "extract_label"]},
            "mem0": {"repo": "mem0ai/mem0", "commit": "373709f",
                     "path": "evaluation/metrics/llm_judge.py + mem0/memory/utils.py",
                     "functions": ["ACCURACY_PROMPT", "json.loads(extract_json(content))['label'] == 'CORRECT'"]},
            "generator": "scripts/gen_judge_label_goldens.py"}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "items": items, "prompts": prompts, "cases": cases}, f, ensure_ascii=False, indent=0)
    print(f"{len(cases)} replies -> {args.out}")


if __name__ == "__main__":
    main()
