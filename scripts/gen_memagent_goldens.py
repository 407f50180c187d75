"""Generate golden fixtures for the `memagent` profile by running MemAgent's official scoring code.

Official code (BytedTsinghua-SIA/MemAgent @76b7a65), loaded from a checkout/export directory given on the command
line (no official code lives in this repository):
  verl/utils/reward_score/hotpotqa.py     `compute_score` (the training reward), imported as is;
  taskutils/memory_eval/utils/__init__.py `extract_solution`, `extract_boxed_answer`, `update_answer`, imported as is;
  taskutils/memory_eval/ruler_hqa.py      `calc_metrics`, taken with `ast` (the module imports torch/datasets); the
                                          per-item steps of its `get_pred` (strip, extract_solution, answers[0],
                                          extract_boxed_answer, calc_metrics per metric) are called in its order.
Export:  for f in verl/utils/reward_score/hotpotqa.py taskutils/memory_eval/utils/__init__.py \
           taskutils/memory_eval/ruler_hqa.py; do mkdir -p /work/golden/memagent/$(dirname $f); \
           git --git-dir=<mirror> show 76b7a65:$f > /work/golden/memagent/$f; done
Run:     python scripts/gen_memagent_goldens.py --root /work/golden/memagent --hotpot .../hotpot_dev_distractor_first100.json \
           --locomo .../locomo10.json --out tests/fixtures/metric_goldens_memagent.json
A case whose official evaluation raises records the exception's type under "eval_error".
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import json
import os
import random


def _module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _calc_metrics(path: str, update_answer):
    tree = ast.parse(open(path, encoding="utf-8").read())
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "calc_metrics"]
    ns = {"update_answer": update_answer}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), ns)
    return ns["calc_metrics"]


def responses(gold: str, rng: random.Random) -> list[str]:
    other = rng.choice(["Paris", "1990", "yes", "no", "the", "Barack Obama"])
    g2 = gold.replace(" ", "-")
    return [f"\\boxed{{{gold}}}", f"The answer is \\boxed{{{gold}}}.", f"\\boxed {gold}", f"\\boxed {gold}$ done",
            f"\\boxed {{{gold}}}", f"\\boxed\n{{{gold}}}", f"\\fbox{{{gold}}}", f"\\boxed{{{gold.upper()}}}",
            f"\\boxed {other} then \\boxed{{{gold}}}", f"\\boxed{{{other}}} then \\boxed{{{gold}}}",
            f"\\boxed{{{gold}}} then \\boxed{{{other}}}", f"<think>\\boxed{{{other}}}</think> \\boxed{{{gold}}}",
            f"<think>\\boxed{{{gold}}}</think> \\boxed{{{other}}}", f"<think>\\boxed{{{gold}}}</think>   ",
            f"\\boxed{{the {gold}}}", f"\\boxed{{{gold}.}}", f"\\boxed{{{g2}}}", f"\\boxed{{{gold} {gold}}}",
            f"\\boxed{{ {gold} }}", f"\\boxed{{{{{gold}}}}}", f"\\boxed{{{gold}", "", "   ", gold,
            f"\\boxed{{}}", "\\boxed{the}", f"{'x' * 400}\\boxed{{{gold}}}", f"\\boxed{{{gold}}}{'y' * 400}",
            f"\\boxed{{\\text{{{gold}}}}}", f"\\boxed{{{gold}\\%}}", f"\\boxed{{caf\u00e9 {gold}}}",
            f"\\boxedx{{{gold}}}", f"\\boxed{{{gold}}}\n\nFinal: \\boxed {other}", f"}}{{\\boxed{{{gold}}}"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="directory holding the exported official files (paths as in the repo)")
    ap.add_argument("--hotpot", required=True)
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--golds", type=int, default=40)
    args = ap.parse_args()
    os.environ.pop("FORCE_THINK", None)
    reward = _module(os.path.join(args.root, "verl/utils/reward_score/hotpotqa.py"), "mem_hotpotqa").compute_score
    utils = _module(os.path.join(args.root, "taskutils/memory_eval/utils/__init__.py"), "mem_utils")
    calc_metrics = _calc_metrics(os.path.join(args.root, "taskutils/memory_eval/ruler_hqa.py"), utils.update_answer)
    rng = random.Random(76)
    hp = sorted({r["answer"] for r in json.load(open(args.hotpot))})
    loc = sorted({str(q["answer"]) for s in json.load(open(args.locomo)) for q in s["qa"] if "answer" in q})
    golds = rng.sample(hp, min(args.golds, len(hp))) + rng.sample(loc, min(args.golds, len(loc)))
    cases = []
    for g in golds:
        answers = [g, g.lower() + " x"] if rng.random() < 0.5 else [g]
        for out in responses(g, rng):
            with contextlib.redirect_stdout(io.StringIO()):
                r = float(reward(out, answers))
            case = {"output": out, "answers": answers, "reward": r}
            try:
                if out == "":
                    case["eval_skipped"] = True
                else:
                    response = out.strip()
                    pred, _ = utils.extract_solution(response)
                    p = utils.extract_boxed_answer(pred) if pred else utils.extract_boxed_answer(response)
                    case["pred"] = p
                    for k in ("f1", "em", "sub_em"):
                        case[k] = float(calc_metrics([p], [answers[0]])[k] if p else 0)
            except Exception as e:  # the official script would stop here
                case["eval_error"] = type(e).__name__
            cases.append(case)
    meta = {"repo": "BytedTsinghua-SIA/MemAgent", "commit": "76b7a65",
            "paths": ["verl/utils/reward_score/hotpotqa.py", "taskutils/memory_eval/utils/__init__.py",
                      "taskutils/memory_eval/ruler_hqa.py"], "generator": "scripts/gen_memagent_goldens.py"}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "cases": cases}, f, ensure_ascii=False, indent=0)
    print(f"{len(cases)} cases ({sum('eval_error' in c for c in cases)} official eval errors) -> {args.out}")


if __name__ == "__main__":
    main()
