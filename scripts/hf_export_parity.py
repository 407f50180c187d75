"""Parity of memjax's servable export with real Hugging Face `transformers`.

Two halves, two environments:

  make DIR      (memjax's environment) writes two exported model dirs under DIR with memjax/checkpoint/export.py --
                `qwen_vocab` (the `tiny-qwen-vocab` preset with `spread_weights`, seed 0, with the shipped Qwen2.5 tokenizer) and
                `tiny` (the tiny MemAgent system's shipped warm-start policy with its word tokenizer) -- and
                DIR/prompts.json: per export, the chat messages and memjax's own prompt ids and greedy tokens
                (memjax.Engine, temperature 0, GREEDY_TOKENS new tokens, no stop token).
                `make DIR RUN_HF` also copies a trained run's exported hf/ (e.g. out/demo/tiny/hf) to DIR/run and
                records memjax's ids on it, loaded as a user loads it (memjax.load_hf and the directory's tokenizer).
  check DIR OUT (a Python 3.11 env with torch==2.13.0 + transformers) loads each dir with AutoTokenizer (the tiny
                word tokenizer with PreTrainedTokenizerFast: transformers 5 gives every qwen2 model Qwen2Tokenizer)
                and AutoModelForCausalLM, renders each prompt with the exported chat template, generates greedily
                (do_sample=False, same length, no eos), and writes OUT: per prompt the transformers prompt ids,
                greedy ids, the smallest top-1 minus top-2 logit margin, and whether each equals memjax's.
                Exit 1 if any differs.

The CPU test tests/unit/checkpoint/test_export.py rebuilds the exports with `make_exports` and compares memjax's engine
with the stored OUT (tests/fixtures/hf_export/parity.json). Regenerate:

    .venv/bin/python scripts/hf_export_parity.py make /tmp/hfx
    .venv311/bin/python scripts/hf_export_parity.py check /tmp/hfx tests/fixtures/hf_export/parity.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

GREEDY_TOKENS = 12
QWEN_PROMPTS = [
    [{"role": "user", "content": "What is the capital of France? Put the answer in \\boxed{}."}],
    [{"role": "system", "content": "You are a memory agent."},
     {"role": "user", "content": "Caroline went to the LGBTQ support group on 7 May 2023. When did she go?"}],
]


def _tiny_prompts(words: tuple[str, ...]) -> list[list[dict]]:
    plain = [w for w in words if not w.startswith("<")]
    return [[{"role": "user", "content": " ".join(plain[i:i + 9])}] for i in (0, 20)]


def spread_weights(model, seed: int = 0):
    """Random weights with spread logits (the golden fixtures' recipe: linear ~ N(0, (g/sqrt(fan_in))^2), g = 1.5 for
    q/k and 3 for the head; biases ~ N(0, 0.1^2); norms ~ 1 + N(0, 0.1^2); embeddings ~ N(0, 0.5^2)), so that greedy
    decoding has clear top-1 margins and is not a run of one token."""
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from memjax.model.qwen2 import param_shapes

    rng = np.random.default_rng(seed)
    for key, shape in param_shapes(model.cfg).items():
        leaf = key.split("/")[-1]
        per = shape[1:] if key.startswith("layers/") else shape
        if leaf.endswith("norm"):
            a = 1 + 0.1 * rng.standard_normal(shape)
        elif leaf.endswith("_b"):
            a = 0.1 * rng.standard_normal(shape)
        elif leaf == "embed":
            a = 0.5 * rng.standard_normal(shape)
        else:
            g = {"q_w": 1.5, "k_w": 1.5, "lm_head": 3.0}.get(leaf, 1.0)
            a = g / np.sqrt(per[0]) * rng.standard_normal(shape)
        owner = model.layers if key.startswith("layers/") else model
        setattr(owner, leaf, nnx.Param(jnp.asarray(a, dtype=jnp.float32)))
    return model


def make_exports(root: str | Path, run_hf: str | Path | None = None) -> dict:
    """The two exports (and a run's hf/, when given) and memjax's prompt / greedy ids (module docstring); returns
    prompts.json's dict."""
    import shutil

    from memjax import Engine, EngineConfig, SamplingParams, load_hf
    from memjax.checkpoint.export import export_hf
    from memjax.cli.model_dir import load_tokenizer
    from memjax.core.tokenizer import Tokenizer
    from memjax.model import init_model, presets
    from memjax.systems import get

    root = Path(root)
    cls = get("tiny")
    tiny_model, tiny_tok = cls(cls.section()).load_model(None)
    qwen_model = spread_weights(init_model(presets.get("tiny-qwen-vocab"), 0))
    cases = [("qwen_vocab", qwen_model, Tokenizer.default(), QWEN_PROMPTS),
             ("tiny", tiny_model, tiny_tok, _tiny_prompts(tiny_tok.words))]
    if run_hf:
        shutil.copytree(run_hf, root / "run", dirs_exist_ok=True)
        run_tok = load_tokenizer(root / "run")
        prompts = _tiny_prompts(run_tok.words) if hasattr(run_tok, "words") else QWEN_PROMPTS
        cases.append(("run", load_hf(root / "run"), run_tok, prompts))
    record = {}
    for name, model, tok, prompts in cases:
        if name != "run":
            export_hf(model, root / name, tokenizer=tok)
        ids = [tok.apply_chat_template(m, add_generation_prompt=True) for m in prompts]
        engine = Engine(model, EngineConfig(max_slots=2, prefill_slots=2, window=256, page_size=16, progress=False))
        outs = engine.generate(ids, SamplingParams(temperature=0.0, max_tokens=GREEDY_TOKENS, stop_token_ids=()))
        record[name] = [{"messages": m, "prompt_ids": p, "greedy_ids": [int(t) for t in o.token_ids]}
                        for m, p, o in zip(prompts, ids, outs)]
    (root / "prompts.json").write_text(json.dumps(record, indent=1))
    return record


def check(root: str | Path, out: str | Path) -> int:
    """transformers' side (module docstring)."""
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    import transformers
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        PreTrainedTokenizerFast,
    )

    root = Path(root)
    record = json.loads((root / "prompts.json").read_text())
    result = {"meta": {"transformers": transformers.__version__, "torch": torch.__version__,
                       "python": sys.version.split()[0], "greedy_tokens": GREEDY_TOKENS}}
    ok = True
    for name, cases in record.items():
        tiny = json.loads((root / name / "tokenizer_config.json").read_text()).get("memjax_tokenizer")
        # transformers 5 maps every qwen2 model to Qwen2Tokenizer (a byte-level BPE) whatever tokenizer_class says;
        # a tiny system's word-level tokenizer.json loads through the generic fast tokenizer
        tok = (PreTrainedTokenizerFast if tiny else AutoTokenizer).from_pretrained(root / name)
        model = AutoModelForCausalLM.from_pretrained(root / name, dtype=torch.float32)
        model.eval()
        model.generation_config.eos_token_id = None
        rows = []
        for case in cases:
            ids = tok.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=True)
            ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
            with torch.no_grad():
                gen = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=GREEDY_TOKENS,
                                     min_new_tokens=GREEDY_TOKENS, pad_token_id=0, output_scores=True,
                                     return_dict_in_generate=True)
            new = gen.sequences[0, len(ids):].tolist()
            top2 = [torch.topk(s[0], 2).values for s in gen.scores]
            margin = float(min(t[0] - t[1] for t in top2))
            row = {"tokenizer_class": type(tok).__name__, "prompt_ids": ids, "greedy_ids": new, "min_margin": margin,
                   "prompt_equal": ids == case["prompt_ids"], "greedy_equal": new == case["greedy_ids"],
                   "decoded": tok.decode(new)}
            ok &= row["prompt_equal"] and row["greedy_equal"]
            rows.append(row)
            print(f"{name}: prompt {len(ids)} ids equal={row['prompt_equal']}  greedy {new} "
                  f"equal={row['greedy_equal']}  min margin {margin:.3f}")
        result[name] = rows
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=1) + "\n")
    print("parity: all equal" if ok else "parity: MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "make":
        make_exports(sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
        print(f"exports and memjax's greedy ids in {sys.argv[2]}")
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
