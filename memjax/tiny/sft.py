"""What every tiny warm start shares: the supervised step, where warm starts ship, and load-or-train.

Owns `sft_rows` (prompt + response token rows -> int32 ids and a float32 loss mask on the response),
`warmup_adamw` (the warm starts' optimizer), `sft_step` (one AdamW step of token-mean NLL on a loss mask, jitted),
`asset_dir(name)` (memjax/assets/tiny/<name>), `save_model` (save_hf + an info JSON) and `load_or_train` (load
the shipped warm start, or train and save it first). Each paper's tiny/warmstart.py owns its teacher, data and
stopping rule.
Invariants: `sft_step` donates nothing and mutates the model and optimizer in place (nnx); a warm start directory is
complete when it has config.json.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from ..checkpoint import load_hf, save_hf
from ..rl.logprobs import token_logprobs


def sft_rows(rows, pad_id: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(prompt ids, response ids) pairs -> ids int32 [len(rows), width] (padded with pad_id) and mask float32
    [len(rows), width], 1 on the response's tokens."""
    ids = np.full((len(rows), width), pad_id, np.int32)
    mask = np.zeros((len(rows), width), np.float32)
    for i, (p, r) in enumerate(rows):
        ids[i, :len(p) + len(r)] = p + r
        mask[i, len(p):len(p) + len(r)] = 1.0
    return ids, mask


def warmup_adamw(model, lr: float) -> nnx.Optimizer:
    """AdamW without weight decay, its rate rising linearly from 0 to `lr` over 50 steps: every tiny warm start's."""
    return nnx.Optimizer(model, optax.adamw(optax.linear_schedule(0.0, lr, 50), weight_decay=0.0), wrt=nnx.Param)


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
