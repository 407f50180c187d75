"""A policy directory as the entry points read it: its tokenizer (a Qwen tokenizer, or a tiny system's word
tokenizer exported by memjax/checkpoint/export.py), its training run's record, and the tokenizer a conversion writes.

Owns `load_tokenizer(dir)`, `run_record(run_dir)` and `source_tokenizer(mode, src, override, vocab, run)`.
Invariants: a directory without tokenizer.json is one ValueError line naming it; a tiny word tokenizer comes back as
memjax.tiny.vocab.TinyTokenizer with the same ids it was exported with; nothing here loads weights.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..checkpoint.export import TINY_MARK


def load_tokenizer(path: str | Path):
    """The tokenizer saved in a model directory (memjax.Tokenizer, or TinyTokenizer for a tiny system's export)."""
    root = Path(path)
    if not (root / "tokenizer.json").is_file():
        raise ValueError(f"{root}: no tokenizer.json (export the policy with `python -m memjax.convert export`, or "
                         "pass --tokenizer DIR)")
    cfg_path = root / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    if cfg.get("memjax_tokenizer") == TINY_MARK:
        from ..tiny.vocab import TinyTokenizer

        vocab = json.loads((root / "tokenizer.json").read_text())["model"]["vocab"]
        return TinyTokenizer([w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])])
    from ..core.tokenizer import Tokenizer

    return Tokenizer.from_dir(root)


def run_record(run_dir: str | Path) -> dict:
    """A finished training run's result.json (its config, system, evaluations, history, code)."""
    p = Path(run_dir) / "result.json"
    if not p.is_file():
        raise ValueError(f"{p}: not found (is {run_dir} a finished memjax.train run?)")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not valid JSON ({e})") from None


def system_tokenizer(name: str):
    """The tokenizer a registered system loads its model with (the tiny systems' word tokenizers)."""
    from ..systems import get

    cls = get(name)
    return cls(cls.section()).load_model(None)[1]


def source_tokenizer(mode: str, src: str, override: str, vocab_size: int, run: dict | None):
    """(tokenizer or None, note) for a conversion's output: --tokenizer, else the source dir's own (hf2hf, export),
    else a run's model / system tokenizer, else the shipped Qwen2.5 tokenizer when the model's vocabulary holds it."""
    if override:
        return load_tokenizer(override), ""
    own = Path(src) / ("hf" if mode == "export" else "")
    if mode in ("hf2hf", "export") and (own / "tokenizer.json").is_file():
        return load_tokenizer(own), ""
    if run is not None:
        model = run.get("config", {}).get("model", {})
        for key in ("tokenizer_path", "hf_path"):
            if model.get(key) and (Path(model[key]) / "tokenizer.json").is_file():
                return load_tokenizer(model[key]), ""
        name = run.get("system") or run.get("config", {}).get("agent", {}).get("name", "")
        if name.startswith("tiny"):
            return system_tokenizer(name), ""
    from ..core.tokenizer import Tokenizer

    tok = Tokenizer.default()
    if tok.vocab_size > vocab_size:
        return None, (f"no tokenizer written: the model's {vocab_size:,}-row vocabulary is smaller than the shipped "
                      f"Qwen2.5 tokenizer's {tok.vocab_size:,} tokens (pass --tokenizer DIR)")
    return tok, ""
