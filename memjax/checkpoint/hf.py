"""Hugging Face safetensors checkpoints in and out of the memjax decoder.

Owns: the tensor-name map between transformers' Qwen2ForCausalLM and our stacked layout, streaming
load (`load_hf`) and sharded save (`save_hf`).
Invariants:
- Loading streams one tensor at a time from memory-mapped safetensors into one stacked host buffer per
  parameter, which goes to the device before the next is built: host peak is one stacked parameter plus
  one tensor, never two copies of the model.
- torch Linear weights are [out, in]; ours are [in, out] (transposed on the way in and out).
- Tied models: `lm_head.weight` is not written (transformers re-ties it on load) and is ignored on read.
- Round trip save -> load is bit-exact in the parameter dtype.
Every failure is a CheckpointError naming the file and the tensor; tensors holding NaN/inf load with a
warning naming them. Written files get the usual permissions (0666 minus the umask), not 0600.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors import safe_open
from safetensors.numpy import save_file

from ..model.config import ModelConfig
from ..model.qwen2 import Qwen2, abstract_model, param_shapes
from .errors import CheckpointError
from .hf_config import from_hf_config, to_hf_config

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
DEFAULT_MAX_SHARD_BYTES = 5 * 1024**3

# our name -> (HF name, with {i} for the layer, transpose?)
_MAP: dict[str, tuple[str, bool]] = {
    "embed": ("model.embed_tokens.weight", False),
    "final_norm": ("model.norm.weight", False),
    "lm_head": ("lm_head.weight", True),
    "layers/input_norm": ("model.layers.{i}.input_layernorm.weight", False),
    "layers/post_norm": ("model.layers.{i}.post_attention_layernorm.weight", False),
    "layers/q_w": ("model.layers.{i}.self_attn.q_proj.weight", True),
    "layers/k_w": ("model.layers.{i}.self_attn.k_proj.weight", True),
    "layers/v_w": ("model.layers.{i}.self_attn.v_proj.weight", True),
    "layers/q_b": ("model.layers.{i}.self_attn.q_proj.bias", False),
    "layers/k_b": ("model.layers.{i}.self_attn.k_proj.bias", False),
    "layers/v_b": ("model.layers.{i}.self_attn.v_proj.bias", False),
    "layers/o_w": ("model.layers.{i}.self_attn.o_proj.weight", True),
    "layers/gate_w": ("model.layers.{i}.mlp.gate_proj.weight", True),
    "layers/up_w": ("model.layers.{i}.mlp.up_proj.weight", True),
    "layers/down_w": ("model.layers.{i}.mlp.down_proj.weight", True),
}
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)

Placer = Callable[[str, np.ndarray], jax.Array]


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise CheckpointError(f"{path}: file not found")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None


def _weight_map(root: Path) -> dict[str, Path]:
    """HF tensor name -> file holding it, for single-file and sharded checkpoints."""
    if (root / INDEX).is_file():
        index = _read_json(root / INDEX)
        if not isinstance(index.get("weight_map"), dict):
            raise CheckpointError(f"{root / INDEX}: no 'weight_map' object")
        wm = {k: root / v for k, v in index["weight_map"].items()}
        for f in sorted(set(wm.values())):
            if not f.is_file():
                raise CheckpointError(f"{f}: shard listed in {INDEX} not found")
        return wm
    if (root / SINGLE).is_file():
        return {name: root / SINGLE for name in _keys(root / SINGLE)}
    raise CheckpointError(f"{root}: neither {SINGLE} nor {INDEX} found")


def _keys(path: Path) -> list[str]:
    try:
        with safe_open(str(path), framework="numpy") as f:
            return list(f.keys())
    except Exception as e:  # safetensors raises several types for corrupt headers
        raise CheckpointError(f"{path}: corrupt or unreadable safetensors file ({e})") from None


class _Reader:
    """Keeps one open (memory-mapped) handle per shard; reads one tensor at a time."""

    def __init__(self, weight_map: dict[str, Path]):
        self.weight_map, self._open = weight_map, {}

    def get(self, name: str) -> np.ndarray:
        path = self.weight_map.get(name)
        if path is None:
            raise CheckpointError(f"tensor {name!r} is missing from the checkpoint")
        try:
            if path not in self._open:
                self._open[path] = safe_open(str(path), framework="numpy").__enter__()
            return self._open[path].get_tensor(name)
        except CheckpointError:
            raise
        except Exception as e:
            raise CheckpointError(f"{path}: cannot read tensor {name!r} ({e})") from None

    def close(self) -> None:
        for h in self._open.values():
            h.__exit__(None, None, None)
        self._open.clear()


def _hf_names(key: str, cfg: ModelConfig) -> list[str]:
    tmpl = _MAP[key][0]
    return [tmpl.format(i=i) for i in range(cfg.num_layers)] if key.startswith("layers/") else [tmpl]


def load_config(path: str | os.PathLike, dtype: str = "float32", compute_dtype: str | None = None) -> ModelConfig:
    root = Path(path)
    return from_hf_config(_read_json(root / "config.json"), where=str(root / "config.json"),
                          param_dtype=dtype, dtype=compute_dtype)


def load_hf(path: str | os.PathLike, dtype: str = "float32", *, compute_dtype: str | None = None,
            place: Placer | None = None) -> Qwen2:
    """Load a Qwen2 checkpoint directory (config.json + safetensors, sharded or not) as a Qwen2 module.

    dtype: storage dtype of the parameters; compute_dtype: activation dtype (default: dtype).
    place(name, host_array) -> jax.Array puts each parameter on device(s) (default jnp.asarray);
    pass a function that uses jax.device_put with a NamedSharding to load straight into a mesh.
    """
    root = Path(path)
    if not root.is_dir():
        raise CheckpointError(f"{root}: checkpoint directory not found")
    cfg = load_config(root, dtype, compute_dtype)
    reader = _Reader(_weight_map(root))
    place = place or (lambda _name, a: jnp.asarray(a))
    np_dtype = jnp.dtype(dtype)
    shapes = param_shapes(cfg)
    model = abstract_model(cfg)
    expected_names: set[str] = set()
    nonfinite: list[str] = []
    try:
        for key, shape in shapes.items():
            names = _hf_names(key, cfg)
            expected_names.update(names)
            transpose = _MAP[key][1]
            buf = np.empty(shape, dtype=np_dtype)
            per = shape[1:] if key.startswith("layers/") else shape
            for i, name in enumerate(names):
                t = reader.get(name)
                t = t.T if transpose else t
                if t.shape != per:
                    raise CheckpointError(f"{reader.weight_map[name]}: tensor {name!r} has shape "
                                          f"{tuple(t.T.shape if transpose else t.shape)}, expected "
                                          f"{tuple(per[::-1] if transpose else per)} for config {root / 'config.json'}")
                if np.issubdtype(t.dtype, np.floating) and not np.isfinite(t).all():
                    nonfinite.append(name)
                if key.startswith("layers/"):
                    buf[i] = t
                else:
                    buf[...] = t
                del t
            owner = model.layers if key.startswith("layers/") else model
            setattr(owner, key.split("/")[-1], nnx.Param(place(key, buf)))
            del buf
    finally:
        reader.close()
    if nonfinite:
        warnings.warn(f"{root}: {len(nonfinite)} tensor(s) hold NaN or inf values: {', '.join(nonfinite[:5])}"
                      f"{' ...' if len(nonfinite) > 5 else ''}", RuntimeWarning, stacklevel=2)
    if cfg.tie_word_embeddings:
        expected_names.add("lm_head.weight")
    unexpected = sorted(n for n in reader.weight_map if n not in expected_names
                        and not n.endswith(_IGNORED_SUFFIXES))
    if unexpected:
        raise CheckpointError(f"{root}: unexpected tensors not used by {cfg.num_layers}-layer Qwen2: "
                              f"{', '.join(unexpected[:5])}{' ...' if len(unexpected) > 5 else ''}")
    return model


def _tensor_plan(cfg: ModelConfig) -> list[tuple[str, str, int | None, int]]:
    """(HF name, our key, layer index or None, element count) in HF's usual order."""
    shapes = param_shapes(cfg)
    layer_keys = [k for k in shapes if k.startswith("layers/")]
    count = lambda k: int(np.prod(shapes[k][1:] if k.startswith("layers/") else shapes[k]))
    plan = [(_MAP["embed"][0], "embed", None, count("embed"))]
    for i in range(cfg.num_layers):
        plan += [(_MAP[k][0].format(i=i), k, i, count(k)) for k in layer_keys]
    plan.append((_MAP["final_norm"][0], "final_norm", None, count("final_norm")))
    if not cfg.tie_word_embeddings:
        plan.append((_MAP["lm_head"][0], "lm_head", None, count("lm_head")))
    return plan


def _fetch(x) -> np.ndarray:
    """A device array on the host; one that spans several processes is all-gathered (every process calls)."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(jax.device_get(x))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _host_tensor(model: Qwen2, key: str, layer: int | None) -> np.ndarray:
    """One tensor in torch layout, fetched from device on its own (a layer slice, not the stack)."""
    owner = model.layers if key.startswith("layers/") else model
    param = getattr(owner, key.split("/")[-1])[...]
    a = _fetch(param if layer is None else param[layer])
    return np.ascontiguousarray(a.T) if _MAP[key][1] else a


def hf_tensors(model: Qwen2) -> Iterator[tuple[str, np.ndarray]]:
    """Yield (HF name, host array in torch layout) one tensor at a time, in HF's usual order."""
    for name, key, layer, _ in _tensor_plan(model.cfg):
        yield name, _host_tensor(model, key, layer)


def save_hf(model: Qwen2, out_dir: str | os.PathLike, *, max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
            config_extra: dict | None = None) -> Path:
    """Write config.json + safetensors (sharded with an index above max_shard_bytes); returns out_dir.

    Shards are planned from the shapes first, then filled and written one at a time, so host memory
    holds at most one shard. Several processes: every process must call it (each tensor is gathered from all of
    them); only process 0 writes.
    """
    out = Path(out_dir)
    if jax.process_index() != 0:
        for name, key, layer, _ in _tensor_plan(model.cfg):
            _host_tensor(model, key, layer)  # this process's part of every gather
        return out
    out.mkdir(parents=True, exist_ok=True)
    cfg = model.cfg
    itemsize = jnp.dtype(model.embed[...].dtype).itemsize
    shards: list[list[tuple[str, str, int | None]]] = [[]]
    size = total = 0
    for name, key, layer, n in _tensor_plan(cfg):
        nbytes = n * itemsize
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, key, layer))
        size += nbytes
        total += nbytes
    meta = {"format": "pt"}
    files = [SINGLE] if len(shards) == 1 else [f"model-{j + 1:05d}-of-{len(shards):05d}.safetensors"
                                               for j in range(len(shards))]
    umask = os.umask(0)
    os.umask(umask)
    for fname, shard in zip(files, shards):
        save_file({name: _host_tensor(model, key, layer) for name, key, layer in shard},
                  str(out / fname), metadata=meta)
        os.chmod(out / fname, 0o666 & ~umask)  # safetensors writes through a private (0600) temporary file
    if len(shards) == 1:
        (out / INDEX).unlink(missing_ok=True)
    else:
        weight_map = {name: fname for fname, shard in zip(files, shards) for name, _, _ in shard}
        (out / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map},
                                            indent=2, sort_keys=True))
        (out / SINGLE).unlink(missing_ok=True)
    (out / "config.json").write_text(json.dumps(to_hf_config(cfg, extra=config_extra), indent=2))
    return out
