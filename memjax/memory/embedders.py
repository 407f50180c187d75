"""Text embedders for retrieval: one protocol, four offline backends, and an on-disk cache.

Owns: `Embedder` (protocol: `id`, `dim`, `encode(texts) -> float32 [N, D]`), the backends `HashedBowEmbedder`
(model-free hashed bag of words), `WordLlamaEmbedder` (wordllama's bundled static embedding, offline),
`DecoderMeanPoolEmbedder` (mean-pooled hidden states of a memjax Qwen2 model) and `FileEmbedder` (precomputed
vectors), and `cached_encode`. Each backend's class docstring says how it embeds.
Invariants: rows are L2-normalised float32; an all-zero input vector (e.g. an empty text) stays zero; nothing is
downloaded. `cached_encode(embedder, texts, cache_dir)` stores `encode(texts)` as
`<embedder id>-<sha256 of the texts>.npy`, so a conversation is embedded once per embedder.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

_TOKEN = re.compile(r"\w+")
STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being am do does did have "
    "has had i you he she it we they me him her us them my your his its our their this that these those what which "
    "who whom when where why how not no so too very can will just than then there here about into over after "
    "before up down out off again once".split())


@runtime_checkable
class Embedder(Protocol):
    id: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def l2_normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 0, x / np.maximum(n, 1e-12), 0.0).astype(np.float32)


def _tokens(text: str, stopwords: frozenset[str]) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in stopwords]


class HashedBowEmbedder:
    """Deterministic hashed bag of words (blake2b of each lower-cased `\\w+` token, sign hashing, log(1 + tf));
    no model, for tests and as a lexical baseline."""

    def __init__(self, dim: int = 2048, *, stopwords: frozenset[str] = STOPWORDS):
        if dim <= 0:
            raise ValueError(f"HashedBowEmbedder.dim: must be positive, got {dim}")
        self.dim, self.stopwords = dim, stopwords
        self.id = f"hashbow-{dim}-sw{len(stopwords)}"

    def _slot(self, tok: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
        return h % self.dim, 1.0 if (h >> 63) & 1 else -1.0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for tok, n in Counter(_tokens(t, self.stopwords)).items():
                j, s = self._slot(tok)
                out[i, j] += s * np.log1p(n)
        return l2_normalize(out)


class WordLlamaEmbedder:
    """wordllama's bundled `l2_supercat` 256-d static embedding, loaded with downloads disabled.

    The PyPI package `wordllama` (MIT) bundles `weights/l2_supercat_256.safetensors` (a token embedding table
    distilled from LLM embeddings) and its tokenizer. It loads with sockets blocked, embeds thousands of texts per
    second on one CPU core and needs no torch. The package's default load path reaches for the network, so it is
    loaded from the package directory with `disable_download=True`."""

    def __init__(self, dim: int = 256):
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError as e:
            raise ImportError("WordLlamaEmbedder needs the `wordllama` package (pip install wordllama)") from e
        pkg = Path(wordllama.__file__).parent
        self._model = WordLlama.load(config="l2_supercat", cache_dir=pkg, dim=dim, disable_download=True)
        self.dim = dim
        self.id = f"wordllama-l2_supercat-{dim}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return l2_normalize(self._model.embed(list(texts)))


class DecoderMeanPoolEmbedder:
    """Masked mean of a memjax Qwen2 model's final hidden states; `tokenize` maps text -> token ids.

    Texts are right-padded to power-of-two lengths so few shapes compile (causal attention: padding after a text
    cannot change its states)."""

    def __init__(self, model, tokenize: Callable[[str], list[int]], *, name: str, max_len: int = 512,
                 batch_size: int = 16, pad_id: int = 0):
        import jax
        import jax.numpy as jnp
        from flax import nnx

        self.dim = int(model.cfg.hidden_size)
        self.id = f"meanpool-{name}-{max_len}"
        self._tokenize, self._max_len, self._bs, self._pad = tokenize, max_len, batch_size, pad_id

        @nnx.jit
        def pooled(m, ids, mask):
            h, _ = m.forward(ids, return_hidden=True)
            w = mask[..., None].astype(jnp.float32)
            return (h.astype(jnp.float32) * w).sum(1) / jnp.maximum(w.sum(1), 1.0)

        self._model, self._pooled, self._jax = model, pooled, jax

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for s in range(0, len(texts), self._bs):
            ids = [list(self._tokenize(t))[: self._max_len] for t in texts[s: s + self._bs]]
            width = 1 << max(3, (max(1, max(len(x) for x in ids)) - 1).bit_length())
            arr = np.full((self._bs, width), self._pad, np.int32)
            mask = np.zeros((self._bs, width), np.int32)
            for i, x in enumerate(ids):
                arr[i, : len(x)], mask[i, : len(x)] = x, 1
            vec = np.asarray(self._pooled(self._model, arr, mask))
            out[s: s + len(ids)] = vec[: len(ids)]
        return l2_normalize(out)


class FileEmbedder:
    """Vectors computed elsewhere (e.g. Qwen3-Embedding or OpenAI), looked up by exact text.

    `.npz` (arrays `keys` [N] str and `vectors` [N, D]) or `.npy` plus the key list; a text with no vector is a
    one-line error naming the file."""

    def __init__(self, path: str | os.PathLike, keys: Sequence[str] | None = None):
        path = Path(path)
        try:
            if path.suffix == ".npz":
                with np.load(path, allow_pickle=False) as z:
                    if "keys" not in z or "vectors" not in z:
                        raise ValueError("needs arrays 'keys' and 'vectors'")
                    keys, vectors = [str(k) for k in z["keys"]], z["vectors"]
            else:
                vectors = np.load(path, allow_pickle=False)
                if keys is None:
                    raise ValueError("a .npy file needs `keys` (one text per row)")
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not a vector file ({e})") from None
        if vectors.ndim != 2 or len(keys) != vectors.shape[0]:
            raise ValueError(f"{path}: vectors {vectors.shape} do not match {len(keys)} keys")
        self._row = {k: i for i, k in enumerate(keys)}
        self._vectors, self.dim, self._path = l2_normalize(vectors), int(vectors.shape[1]), path
        self.id = f"file-{path.stem}-{hashlib.sha256(self._vectors.tobytes()).hexdigest()[:12]}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._row]
        if missing:
            raise KeyError(f"{self._path}: no vector for {len(missing)} text(s), first {missing[0][:60]!r}")
        return self._vectors[[self._row[t] for t in texts]].reshape(len(texts), self.dim)


def cached_encode(embedder: Embedder, texts: Sequence[str], cache_dir: str | os.PathLike | None) -> np.ndarray:
    """`embedder.encode(texts)`, stored under `cache_dir` keyed by (embedder id, content hash)."""
    if cache_dir is None:
        return embedder.encode(texts)
    h = hashlib.sha256("\x1f".join(texts).encode()).hexdigest()[:24]
    path = Path(cache_dir) / f"{embedder.id}-{h}.npy"
    if path.exists():
        vec = np.load(path, allow_pickle=False)
        if vec.shape == (len(texts), embedder.dim):
            return vec
    vec = embedder.encode(texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
    np.save(tmp, vec)
    os.replace(tmp, path)
    return vec
