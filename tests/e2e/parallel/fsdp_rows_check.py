"""Run under 8 simulated CPU devices by test_fsdp_rows.py: token_logprobs' loss and gradients with the FSDP
LayerSharding (embedding table gathered before the lookup, the fused log-prob per device on its own rows under
shard_map) against no sharding, and the collective bytes of the compiled gradient on 2 hosts x 4 devices with
and without those two (a sharding that lacks `table` and `row_map`)."""

import json

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_default_matmul_precision", "highest")
from flax import nnx  # noqa: E402

from memjax.model import presets  # noqa: E402
from memjax.model.qwen2 import init_model  # noqa: E402
from memjax.parallel import layer_sharding, make_mesh, param_shardings, rows_sharding  # noqa: E402
from memjax.parallel.collectives import summary  # noqa: E402
from memjax.rl.logprobs import token_logprobs  # noqa: E402


class WithoutRowMap:
    """The FSDP sharding without `table` / `row_map` (what XLA partitions on its own)."""

    def __init__(self, s):
        self.s = s

    def params(self, p):
        return self.s.params(p)

    def activations(self, x):
        return self.s.activations(x)

    def head(self, w):
        return self.s.head(w)


def main():
    assert len(jax.devices()) == 8
    mesh = make_mesh(data=2, fsdp=4)
    out = {}
    for tied in (True, False):
        cfg = presets.get("tiny").replace(hidden_size=128, intermediate_size=256, num_layers=2, num_heads=8,
                                          num_kv_heads=4, tie_word_embeddings=tied)
        gd, st0 = nnx.split(init_model(cfg, seed=0))
        r = np.random.default_rng(0)
        ids = r.integers(0, cfg.vocab_size, (16, 32)).astype(np.int32)
        mask = (r.random((16, 32)) < 0.7).astype(np.int32)
        adv = r.standard_normal((16, 32)).astype(np.float32)

        def loss(sharding):
            def f(st, ids, mask, adv):
                logp, ent = token_logprobs(nnx.merge(gd, st), ids, mask, sharding=sharding)
                return (logp * adv).sum() / mask.sum() + 0.01 * ent.mean()
            return jax.jit(jax.value_and_grad(f))

        ref_v, ref_g = loss(None)(st0, ids, mask, adv)
        st = jax.device_put(st0, param_shardings(st0, mesh))
        args = [jax.device_put(jnp.asarray(a), rows_sharding(mesh)) for a in (ids, mask, adv)]
        for name, sh in (("row_map", layer_sharding(mesh)), ("without", WithoutRowMap(layer_sharding(mesh)))):
            fn = loss(sh)
            v, g = fn(st, *args)
            s = summary(fn.lower(st, *args).compile().as_text(), 8, 4)
            out[f"tied={tied},{name}"] = dict(
                loss_err=abs(float(v) - float(ref_v)),
                grad_err=max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(ref_g))),
                grad_scale=max(float(jnp.abs(b).max()) for b in jax.tree.leaves(ref_g)),
                inter=s["max_inter"], by_op=s["by_op"])
    print("RESULT" + json.dumps(out))


if __name__ == "__main__":
    main()
