"""`python -m memjax.demo` (what `make demo` runs): the embedded default, end to end on any machine.

Part 1 (seconds, no download): a Qwen2.5-architecture model (tiny depth / width, real 151,936-token vocabulary,
random weights) is written as a sharded Hugging Face checkpoint, converted HF -> orbax -> HF, loaded back (logits
checked bit-exact), asked a question through the real Qwen2.5 tokenizer and chat template, and decoded greedily.
Random weights produce noise text: the point is that every stage runs and agrees.
Part 2 (a few minutes on CPU): the embedded RL default `configs/tiny.py` trains a tiny memory agent by Multi-Conv
GRPO from the shipped warm start; prints the reward sparkline, held-out accuracy before / after and example memory
traces, and writes <out>/tiny/reward_curve.png and <out>/tiny/report.html. `--rl-steps 0` skips it.
Output goes to ./out/demo (--out): a directory the demo created (it holds .memjax-demo) is emptied and rewritten;
any other non-empty directory is refused.
Invariant: the command line and --out are checked before jax, flax or orbax are imported.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console

from ..core.cli import nonnegative_int, positive_int
from ..core.config import ConfigError
from ..core.outdir import claim_marked_dir

MARKER = ".memjax-demo"

QUESTION = ("Document 1:\nThe Eiffel Tower was completed in 1889 for the Exposition Universelle in Paris.\n\n"
            "Question: In which year was the Eiffel Tower completed? Put the answer in \\boxed{}.")


DEFAULT_OUT = "out/demo"  # the demo's working directory: its tiny run, and so its policy, lands in DEFAULT_OUT/tiny

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help="working directory (re-created if the demo made it)")
    ap.add_argument("--preset", default="tiny-qwen-vocab", help="model preset (random weights)")
    ap.add_argument("--max-new-tokens", type=positive_int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rl-steps", type=nonnegative_int, default=None, help="RL steps of part 2 (default: configs/tiny.py's; 0 = skip)")
    ap.add_argument("--rl-heldout", type=positive_int, default=None, help="held-out questions for part 2 (default: config's)")
    args = ap.parse_args(argv)
    con = Console()
    try:  # never empty a directory the demo did not create (`--out .` must not wipe the user's files)
        out = claim_marked_dir(args.out, MARKER, legacy=frozenset({"hf", "orbax", "hf_roundtrip", "tiny"}))
    except ConfigError as e:
        print(f"memjax.demo: error: {e}", file=sys.stderr)
        return 2
    rc = foundation(args, out, con)
    if rc or args.rl_steps == 0:
        return rc
    return tiny_rl(args, out, con)


def tiny_rl(args, out: Path, con: Console) -> int:
    """Part 2: the embedded RL default, configs/tiny.py, through the one training loop (memjax.train)."""
    import dataclasses

    from ..core.config import load_config_file
    from ..report.run_summary import print_report
    from .train import train

    con.rule("memjax demo: tiny memory agent, Multi-Conv GRPO from the warm start (configs/tiny.py)")
    cfg = load_config_file(Path(__file__).resolve().parents[2] / "configs" / "tiny.py")
    changes = {"out_dir": str(out / "tiny")}
    if args.rl_steps is not None:
        changes["steps"] = args.rl_steps
    if args.rl_heldout is not None:
        changes["agent"] = dataclasses.replace(cfg.agent, heldout_size=args.rl_heldout)
    cfg = dataclasses.replace(cfg, **changes)
    result = train(cfg, console=con)
    print_report(result, Path(result["plot"]) if result.get("plot") else None, console=con)
    con.print(f"open the run's report (curves, evaluations, memory traces): {out / 'tiny' / 'report.html'}")
    con.rule("[green]demo finished")
    return 0


def foundation(args, out: Path, con: Console) -> int:
    """Part 1: random tiny Qwen2.5 -> HF -> orbax -> HF round trip, chat template, greedy generation."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from rich.table import Table

    from ..checkpoint import load_hf, save_hf
    from ..core.tokenizer import Tokenizer
    from ..model import count_params, greedy_generate, init_model, presets
    from . import convert

    con.rule("memjax demo: foundation end to end")
    con.print(f"jax {jax.__version__} on {jax.devices()[0].platform}; preset {args.preset}")

    tok = Tokenizer.default()
    cfg = presets.get(args.preset)
    t0 = time.perf_counter()
    model = init_model(cfg, args.seed)
    con.print(f"[1] random {cfg.name}: {count_params(cfg):,} params, {cfg.num_layers} layers, "
              f"vocab {cfg.vocab_size:,} ({time.perf_counter() - t0:.1f}s)")

    hf_dir, orbax_dir, hf2_dir = out / "hf", out / "orbax", out / "hf_roundtrip"
    save_hf(model, hf_dir, max_shard_bytes=16 * 1024**2)
    shards = sorted(p.name for p in hf_dir.glob("*.safetensors"))
    con.print(f"[2] save_hf -> {hf_dir} ({len(shards)} safetensors shards + index)")
    for mode, src, dst in (("hf2orbax", hf_dir, orbax_dir), ("orbax2hf", orbax_dir, hf2_dir)):
        if convert.main([mode, str(src), str(dst)]) != 0:
            con.print(f"[red]convert {mode} failed")
            return 1
    loaded = load_hf(hf2_dir)

    messages = [{"role": "user", "content": QUESTION}]
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True)
    ids = jnp.asarray([prompt], jnp.int32)
    same = bool(np.array_equal(np.asarray(model(ids)), np.asarray(loaded(ids))))
    con.print(f"[3] reloaded after HF -> orbax -> HF: logits bit-identical to the original: "
              f"{'[green]yes' if same else '[red]NO'}")
    if not same:
        return 1

    t0 = time.perf_counter()
    new, logprobs = greedy_generate(loaded, prompt, args.max_new_tokens, stop_token_ids=(tok.eos_id,))
    dt = time.perf_counter() - t0
    table = Table(title="greedy generation (random weights: the text is noise by design)")
    table.add_column("prompt tokens", justify="right")
    table.add_column("new tokens", justify="right")
    table.add_column("mean log-prob", justify="right")
    table.add_column("seconds (incl. compile)", justify="right")
    table.add_row(str(len(prompt)), str(len(new)), f"{np.mean(logprobs):.3f}", f"{dt:.2f}")
    con.print(f"[4] chat prompt ({len(prompt)} ids) ends with: {tok.decode(prompt[-12:])!r}")
    con.print(table)
    con.print(f"    continuation: {tok.decode(new)!r}")
    con.rule("[green]foundation finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
