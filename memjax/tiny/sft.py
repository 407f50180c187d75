"""What every tiny warm start shares: the supervised step, where warm starts ship, and load-or-train.

Owns `sft_step` (one AdamW step of token-mean NLL on a loss mask, jitted), `asset_dir(name)`
(memjax/assets/tiny/<name>), `save_model` (save_hf + an info JSON) and `load_or_train` (load the shipped warm start,
or train and save it first). Each paper's tiny/warmstart.py owns its teacher, data and stopping rule.
Invariants: `sft_step` donates nothing and mutates the model and optimizer in place (nnx); a warm start directory is
complete when it has config.json.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jax.numpy as jnp
from flax import nnx

from ..checkpoint import load_hf, save_hf
from ..rl.logprobs import token_logprobs


@nnx.jit
def sft_step(model, opt, ids, mask):
    """One supervised step (token-mean NLL on the mask) for every tiny task's warm start."""
    def loss_fn(m):
        logp, _ = token_logprobs(m, ids, mask)
        return -jnp.sum(logp * mask) / jnp.maximum(jnp.sum(mask), 1.0)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    opt.update(model, grads)
    return loss


def asset_dir(name: str) -> Path:
    """memjax/assets/tiny/<name>: where a tiny warm start ships."""
    return Path(str(resources.files("memjax") / "assets" / "tiny" / name))


def save_model(model, info: dict, out: str | Path, info_name: str) -> Path:
    """A warm start's files: memjax.save_hf + `info_name` (JSON: steps, dev metrics, history)."""
    out = Path(out)
    save_hf(model, out)
    (out / info_name).write_text(json.dumps(info, indent=1, default=str) + "\n")
    return out


def load_or_train(path: Path, info_name: str, train_fn, save_fn, *, what: str, log=print):
    """(model, info) of the warm start at `path`; if absent, train it with train_fn(log=log) and save it there
    with save_fn(model, info, path) first (every tiny warm start: this one, r1_, r2_, sumer_warmstart)."""
    if not (path / "config.json").is_file():
        log(f"no {what} at {path}: training one")
        model, info = train_fn(log=log)
        save_fn(model, info, path)
    info = json.loads((path / info_name).read_text()) if (path / info_name).is_file() else {}
    return load_hf(path), info
