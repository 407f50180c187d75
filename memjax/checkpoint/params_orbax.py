"""Orbax checkpoints of the decoder's parameters (not the train state: that lives with the trainer).

Layout of a directory written by `save_params(model, dir)`:
  dir/memjax_model.json   the ModelConfig fields (so a checkpoint is self-describing)
  dir/params/             an orbax StandardCheckpointer tree of {name: array} in our stacked layout.
`load_params(dir, dtype=None)` restores into a fresh Qwen2 (optionally casting the parameter dtype); a
damaged checkpoint is one CheckpointError line naming the directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from flax import nnx

from ..model.config import ModelConfig
from ..model.qwen2 import Qwen2, abstract_model, param_shapes
from .errors import CheckpointError
from .run_checkpoints import one_line

CONFIG_FILE = "memjax_model.json"


def _owner(model: Qwen2, key: str):
    return (model.layers if key.startswith("layers/") else model), key.split("/")[-1]


def _flat(model: Qwen2) -> dict[str, jax.Array]:
    return {k.replace("/", "."): getattr(*_owner(model, k))[...] for k in param_shapes(model.cfg)}


def save_params(model: Qwen2, path: str | os.PathLike) -> Path:
    root = Path(path).absolute()
    if (root / "params").exists():
        raise CheckpointError(f"{root / 'params'}: already exists; refusing to overwrite")
    root.mkdir(parents=True, exist_ok=True)
    with ocp.StandardCheckpointer() as ckpt:
        ckpt.save(root / "params", _flat(model))
    (root / CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(model.cfg), indent=2))
    return root


def load_params(path: str | os.PathLike, dtype: str | None = None) -> Qwen2:
    root = Path(path).absolute()
    cfg_file = root / CONFIG_FILE
    if not cfg_file.is_file():
        raise CheckpointError(f"{cfg_file}: file not found (not a memjax orbax parameter checkpoint)")
    try:
        fields = json.loads(cfg_file.read_text())
        cfg = ModelConfig(**fields)
    except (json.JSONDecodeError, TypeError, ValueError) as e:
        raise CheckpointError(f"{cfg_file}: invalid model config ({e})") from None
    stored_dtype = cfg.param_dtype
    if dtype is not None:
        cfg = cfg.replace(param_dtype=dtype, dtype=dtype)
    abstract = {k.replace("/", "."): jax.ShapeDtypeStruct(s, jnp.dtype(stored_dtype))
                for k, s in param_shapes(cfg).items()}
    try:
        with ocp.StandardCheckpointer() as ckpt:
            flat = ckpt.restore(root / "params", abstract)
    except Exception as e:  # orbax/TensorStore errors carry pages of spec: keep their first line
        raise CheckpointError(f"{root / 'params'}: cannot restore parameters ({one_line(e)})") from None
    model = abstract_model(cfg)
    for k in param_shapes(cfg):
        setattr(*_owner(model, k), nnx.Param(flat[k.replace("/", ".")].astype(cfg.jnp_param_dtype)))
    return model
