"""ModelSource: where a CLI gets its policy model and tokenizer (an HF directory or a random preset).

Owns: the typed config section shared by `memjax.evaluate` and `memjax.train`, and `load()`.
Invariants: an empty `hf_path` means random weights of `preset` (for pipeline and throughput runs: no
weights can be downloaded here); the tokenizer comes from `tokenizer_path`, else `hf_path` when it holds
tokenizer.json, else the shipped Qwen2.5 tokenizer; a tokenizer with more tokens than the model has
embedding rows is refused at load.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flax import nnx

from ..core.tokenizer import Tokenizer
from ..model import init_model, presets
from ..model.qwen2 import Qwen2
from . import load_hf


@dataclass(frozen=True)
class ModelSource:
    hf_path: str = ""
    preset: str = "tiny-qwen-vocab"
    dtype: str = "float32"  # parameter (master-weight) dtype
    compute_dtype: str = ""  # activation dtype; "" = dtype. fp32 master + bf16 compute: dtype=float32, compute_dtype=bfloat16
    seed: int = 0
    tokenizer_path: str = ""

    def __post_init__(self):
        from ..model.config import _DTYPES

        if self.dtype not in _DTYPES or self.compute_dtype not in ("", *_DTYPES):
            raise ValueError(f"ModelSource: dtype must be one of {_DTYPES} and compute_dtype '' or one of them "
                             f"(got {self.dtype!r}, {self.compute_dtype!r})")
        if not self.hf_path and self.preset not in presets.names():
            raise ValueError(f"ModelSource.preset {self.preset!r} unknown; known: {', '.join(presets.names())}")

    def load(self) -> tuple[Qwen2, Tokenizer]:
        if self.hf_path:
            model = load_hf(self.hf_path, dtype=self.dtype, compute_dtype=self.compute_dtype or None)
        else:
            cfg = presets.get(self.preset, param_dtype=self.dtype, dtype=self.compute_dtype or self.dtype)
            model = nnx.jit(lambda: init_model(cfg, self.seed))() if cfg.hidden_size >= 1024 else init_model(cfg, self.seed)
        tok_dir = self.tokenizer_path or (self.hf_path if self.hf_path and (Path(self.hf_path) / "tokenizer.json").is_file()
                                          else "")
        tok = Tokenizer.from_dir(tok_dir) if tok_dir else Tokenizer.default()
        check_vocab(model, tok, self.tokenizer_path or self.hf_path or "the shipped Qwen2.5 tokenizer")
        return model, tok


def check_vocab(model: Qwen2, tok: Tokenizer, where: str) -> None:
    """The tokenizer's ids must all be rows of the model's embedding (checked at load, not at the first rollout)."""
    if tok.vocab_size > model.cfg.vocab_size:
        from ..core.config import ConfigError

        raise ConfigError(f"tokenizer ({where}) has {tok.vocab_size:,} tokens but the model's vocabulary has "
                          f"{model.cfg.vocab_size:,} rows: they do not belong together (model.tokenizer_path?)")
