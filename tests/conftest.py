"""Shared fixtures: golden transformers outputs (committed under tests/fixtures/golden)."""

from pathlib import Path

import jax
import numpy as np
import pytest

jax.config.update("jax_default_matmul_precision", "highest")

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
GOLDEN_MODELS = ("tied_kv1", "untied_kv2", "sharded_kv2")


def golden_dir(name: str) -> Path:
    d = GOLDEN / "models" / name
    if not (d / "reference.npz").is_file():
        pytest.fail(f"committed golden fixture missing: {d} (regenerate with tests/fixtures/make_golden.py)")
    return d


def golden_ref(name: str) -> dict[str, np.ndarray]:
    return dict(np.load(golden_dir(name) / "reference.npz"))
