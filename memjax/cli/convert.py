"""`python -m memjax.convert`: move decoder weights between formats.

  hf2orbax SRC DST     Hugging Face dir (config.json + safetensors) -> memjax orbax parameter checkpoint
  orbax2hf SRC DST     memjax orbax parameter checkpoint -> Hugging Face dir loadable by transformers
  hf2hf SRC DST        re-write an HF dir (change dtype, re-shard)
  random PRESET DST    random-weight HF dir of a preset (for benchmarks and tests; --seed)
  export RUN_DIR DST   re-export a training run's policy (RUN_DIR/hf) as a complete, servable HF dir
Every HF output is servable (memjax/checkpoint/export.py): weights, config, tokenizer files and chat template
(--tokenizer DIR; default: the source's own, a run's model, or the shipped Qwen2.5 tokenizer when it fits),
generation_config.json and a README.md model card. Options: --dtype, --max-shard-gb, --tokenizer, --replace.
Errors print one line, exit 2. A non-empty destination, or one that is the source, is refused unless --replace:
the new files then go to a temporary sibling that takes the destination's place once complete (a failed
conversion leaves the destination as it was).
Invariant: the command line and the destination are checked before jax, flax or orbax are imported.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path


def _shard_gb(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GiB, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of GiB > 0, got {text!r}")
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.convert", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["hf2orbax", "orbax2hf", "hf2hf", "random", "export"])
    ap.add_argument("src", help="source directory (or preset name for 'random')")
    ap.add_argument("dst", help="destination directory")
    ap.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                    help="parameter dtype of the output (default: keep the source's; float32 for random)")
    ap.add_argument("--max-shard-gb", type=_shard_gb, default=5.0, help="HF output shard size limit in GiB")
    ap.add_argument("--seed", type=int, default=0, help="seed for 'random'")
    ap.add_argument("--tokenizer", default="", help="tokenizer directory for HF outputs (default: see above)")
    ap.add_argument("--replace", action="store_true", help="replace a non-empty destination (or the source itself): "
                    "its old files are removed once the new ones are complete")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    shard = max(1, int(args.max_shard_gb * 1024**3))
    dst = Path(args.dst)
    if dst.exists() and not dst.is_dir():
        print(f"memjax.convert: error: {dst}: destination exists and is not a directory", file=sys.stderr)
        return 2
    same = args.mode != "random" and Path(args.src).exists() and Path(args.src).resolve() == dst.resolve()
    full = dst.is_dir() and any(dst.iterdir())
    if (same or full) and not args.replace:
        what = "is the source" if same else "is not empty"
        print(f"memjax.convert: error: {dst}: the destination {what}; give a new or empty directory, or --replace to "
              "replace what is there", file=sys.stderr)
        return 2
    import os
    import shutil

    out = dst.with_name(f".{dst.name}.convert-{os.getpid()}") if (same or full) else dst
    from ..checkpoint import CheckpointError, load_hf, save_hf
    from ..checkpoint.params_orbax import load_params, save_params
    from ..model import count_params, init_model, presets

    try:
        if args.mode == "random":
            cfg = presets.get(args.src, param_dtype=args.dtype or "float32", dtype=args.dtype or "float32")
            model = init_model(cfg, args.seed)
        elif args.mode in ("hf2orbax", "hf2hf", "export"):
            src = str(Path(args.src) / "hf") if args.mode == "export" else args.src
            model = load_hf(src, dtype=args.dtype or _hf_dtype(src))
        else:
            model = load_params(args.src, dtype=args.dtype)
        if args.mode == "hf2orbax":
            save_params(model, out)
        else:
            from ..checkpoint.export import export_hf
            from .model_dir import run_record, source_tokenizer

            run = run_record(args.src) if args.mode == "export" else None
            tok, note = source_tokenizer(args.mode, args.src, args.tokenizer, model.cfg.vocab_size, run)
            if tok is None:
                save_hf(model, out, max_shard_bytes=shard)
            else:
                export_hf(model, out, tokenizer=tok, run=run, max_shard_bytes=shard,
                          base=args.src if args.mode == "hf2hf" else None)
            if note:
                print(f"memjax.convert: {note}", file=sys.stderr)
        if out != dst:  # --replace: the complete new directory takes the old one's place
            old = dst.with_name(f".{dst.name}.old-{os.getpid()}")
            os.rename(dst, old)
            os.rename(out, dst)
            shutil.rmtree(old)
    except (CheckpointError, KeyError, ValueError, FileNotFoundError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e  # str(KeyError) is the repr of its message
        print(f"memjax.convert: error: {msg}", file=sys.stderr)
        return 2
    except OSError as e:  # disk full, permission denied: the path and the reason, one line
        print(f"memjax.convert: error: {e}", file=sys.stderr)
        return 1
    finally:
        if out != dst and out.exists():
            shutil.rmtree(out, ignore_errors=True)
    print(f"{args.mode}: {args.src} -> {args.dst} ({count_params(model.cfg):,} params, "
          f"{model.cfg.param_dtype}) in {time.perf_counter() - t0:.1f}s")
    return 0


def _hf_dtype(src: str) -> str:
    """The source checkpoint's declared dtype (torch_dtype / dtype), float32 if absent or unknown."""
    import json
    from pathlib import Path

    try:
        hf = json.loads((Path(src) / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return "float32"  # load_hf reports the real problem with the file
    d = hf.get("torch_dtype") or hf.get("dtype") or "float32"
    return d if d in ("float32", "bfloat16", "float16") else "float32"


if __name__ == "__main__":
    sys.exit(main())
