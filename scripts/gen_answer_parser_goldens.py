"""Generate golden reply -> answer fixtures for Memory-R2's official answer parser (issue 32 item 5).

Runs the OFFICIAL function, loaded from a path given on the command line (no official code lives in this
repository): ahmedehabb/Memory-R2 @357b4ec, src/verl/verl/rema_trainer/memory/utils/parse_response.py —
the top-level function `extract_answer_from_text` is taken from that file with `ast` and executed.
Usage:
  git --git-dir=<mirror> show 357b4ec:src/verl/verl/rema_trainer/memory/utils/parse_response.py > /tmp/pr.py
  python scripts/gen_answer_parser_goldens.py --official /tmp/pr.py \
      --out tests/fixtures/answer_parser_goldens_memory_r2.json
Replies: answers (LoCoMo-like: dates, names, numbers, phrases, unicode, empty) wrapped in the forms an answer
model writes — <answer> tags in any case, several tags, unclosed tags, `**Answer:**`, `**Answer: x**`,
`Answer:` lines in any case, reasoning before and after, newlines and spaces around — deterministic (seeded).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re

ANSWERS = ["7 May 2023", "Paris", "Caroline", "3 years", "She went hiking, then painted.", "", "  padded  ",
           "café au lait", "1,000", "no", "The week before 9 June 2023", "Melanie and Caroline", "42", "a\nb",
           "**bold**", "Answer: nested", "<answer>inner</answer>", "über-cool", "N/A", "2022-05-07"]
TAGS = [("<answer>", "</answer>"), ("<ANSWER>", "</ANSWER>"), ("<Answer>", "</answer>"), ("<answer>", "</Answer>"),
        ("<answer> ", " </answer>"), ("<answer>\n", "\n</answer>"), ("<answer>", ""), ("answer>", "</answer>")]
PREFIX = ["", "Let me think.\n", "Reasoning: the memories say so.\n\n", "Answer: first guess\n",
          "**Answer:** early\n", "<think>hmm</think>\n", "   "]
SUFFIX = ["", "\n", "\nThat is all.", "  ", "\n**Answer:** late", "\n<answer>second</answer>", "\r\n"]


def load_official(path: str):
    tree = ast.parse(open(path, encoding="utf-8").read())
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "extract_answer_from_text"]
    if not nodes:
        raise SystemExit(f"{path}: extract_answer_from_text not found")
    ns = {"re": re}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), ns)
    return ns["extract_answer_from_text"]


def replies(rng: random.Random) -> list[str]:
    out = []
    for a in ANSWERS:
        for o, c in TAGS:
            out.append(rng.choice(PREFIX) + o + a + c + rng.choice(SUFFIX))
        for form in ("**Answer:** {a}", "**Answer:**\n\n{a}", "**Answer: {a}**", "**Answer:{a}** more",
                     "Answer: {a}", "answer: {a}", "ANSWER: {a}", "Final Answer:\n  {a}  ", "Answer:{a}",
                     "The answer is {a}", "{a}", "Short answer: {a}\nAnswer: {a}", "**answer:** {a}"):
            out.append(rng.choice(PREFIX) + form.format(a=a) + rng.choice(SUFFIX))
    while len(out) < 1200:  # random concatenations of the pieces above
        a = rng.choice(ANSWERS)
        o, c = rng.choice(TAGS)
        parts = [rng.choice(PREFIX), o + a + c, rng.choice(SUFFIX),
                 rng.choice(["", "Answer: " + rng.choice(ANSWERS)]),
                 rng.choice(["", "**Answer: " + rng.choice(ANSWERS) + "**"])]
        rng.shuffle(parts)
        out.append("".join(parts))
    out += ["", " ", "\n", "Answer:", "**Answer:**", "<answer></answer>", "<answer>", "</answer>"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--official", required=True, help="parse_response.py of Memory-R2 @357b4ec")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    fn = load_official(args.official)
    cases = [[r, fn(r)] for r in replies(random.Random(args.seed))]
    doc = {"source": {"repo": "ahmedehabb/Memory-R2", "commit": "357b4ec",
                      "path": "src/verl/verl/rema_trainer/memory/utils/parse_response.py",
                      "function": "extract_answer_from_text", "script": "scripts/gen_answer_parser_goldens.py",
                      "seed": args.seed},
           "cases": cases}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
    print(f"{len(cases)} cases -> {args.out}; no answer found: {sum(1 for _, y in cases if y == '')}")


if __name__ == "__main__":
    main()
