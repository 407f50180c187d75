"""Run under 8 simulated CPU devices by test_trainer_mesh.py: the Trainer on MeshConfig meshes vs one device,
per-device parameter + optimizer bytes, the collectives of the compiled mini-batch update, and (data 2 x fsdp 4
as 2 hosts x 4) the bytes it sends between hosts."""

import json
import re

import jax
import numpy as np

jax.config.update("jax_default_matmul_precision", "highest")
from flax import nnx  # noqa: E402

from memjax.model import presets  # noqa: E402
from memjax.model.qwen2 import init_model  # noqa: E402
from memjax.parallel import MeshConfig  # noqa: E402
from memjax.parallel.collectives import summary  # noqa: E402
from memjax.rl import Conversation, build_batch  # noqa: E402
from memjax.rl.advantages import with_advantages  # noqa: E402
from memjax.rl.trainer import OptimConfig, Trainer, UpdateConfig  # noqa: E402

CFG = presets.get("tiny").replace(hidden_size=128, intermediate_size=256, num_layers=2, num_heads=8, num_kv_heads=4,
                                  tie_word_embeddings=False)
UPD = UpdateConfig(micro_rows=8, pack=True, row_buckets=(64,), attention="blockwise", max_segments=4)


def make_batch(seed=0, n=24):
    r = np.random.default_rng(seed)
    convs = []
    for i in range(n):
        p, k = int(r.integers(4, 30)), int(r.integers(3, 30))
        convs.append(Conversation(r.integers(1, CFG.vocab_size, p).tolist(), r.integers(1, CFG.vocab_size, k).tolist(),
                                  (-r.random(k)).tolist(), sample=i // 3, group=i // 6, turn=i % 3))
    return build_batch(convs, r.random(n // 3).round(1).tolist(), [s // 2 for s in range(n // 3)])


def collectives(txt):
    """Per while-loop body computation: counts of collectives (loops that have any)."""
    out = []
    for comp in re.split(r"\n(?=\S.*\{\n)", txt):
        head = comp.split("\n", 1)[0]
        if "ENTRY" in head:
            continue
        cnt = {op: len(re.findall(r" " + op + r"(-start)?\(", comp)) for op in ("all-gather", "reduce-scatter",
                                                                                  "all-reduce")}
        ar_shapes = re.findall(r"= (.+?) all-reduce(?:-start)?\(", comp)
        if any(cnt.values()):
            out.append(dict(cnt, head=head[:600], all_reduce_shapes=ar_shapes[:20]))
    return out


def main():
    batch = make_batch()
    res = {}
    for name, mc in (("one", None), ("fsdp8", MeshConfig(data=1, fsdp=-1)),
                     ("dp2_fsdp2_tp2", MeshConfig(data=2, fsdp=2, tensor=2)), ("dp2_fsdp4", MeshConfig(data=2, fsdp=4))):
        m = init_model(CFG, seed=0)
        tr = Trainer(m, OptimConfig(lr=1e-2, warmup_steps=0, eps=1e-3), update=UPD,
                     mesh=None if mc is None else mc.make())
        st = tr.update(with_advantages(batch))
        params = [np.asarray(x) for x in jax.tree.leaves(nnx.state(m, nnx.Param))]
        r = dict(loss=st["loss"], grad_norm=st["grad_norm"], params=params)
        if name == "fsdp8":
            d0 = jax.devices()[0]
            trees = (nnx.state(m, nnx.Param), tr.opt_state)
            mine = sum(s.data.nbytes for t in trees for a in jax.tree.leaves(t) for s in a.addressable_shards
                       if s.device == d0)
            total = sum(a.nbytes for t in trees for a in jax.tree.leaves(t))
            r["param_opt_frac"] = mine / total
            abstract = jax.eval_shape(lambda: nnx.state(m, nnx.Param))
            txt = tr.step_fn.lower_update(abstract, 4, 64).compile().as_text()
            r["loops"] = collectives(txt)
            r["data_spec"] = str(tr.step_fn.data_sharding.spec)
        if name == "dp2_fsdp4":  # as 2 hosts x 4 devices: what crosses hosts per update
            d0 = jax.devices()[0]
            r["param_bytes_per_device"] = sum(s.data.nbytes for a in jax.tree.leaves(nnx.state(m, nnx.Param))
                                              for s in a.addressable_shards if s.device == d0)
            abstract = jax.eval_shape(lambda: nnx.state(m, nnx.Param))
            txt = tr.step_fn.lower_update(abstract, 4, 64).compile().as_text()
            r["traffic"] = summary(txt, 8, 4, outer_trip_count=4)
            r["traffic"].pop("per_device")
        res[name] = r
    ref = res.pop("one")
    out = {}
    for name, r in res.items():
        out[name] = {k: v for k, v in r.items() if k != "params"}
        out[name]["loss_err"] = abs(r["loss"] - ref["loss"])
        out[name]["gnorm_rel_err"] = abs(r["grad_norm"] - ref["grad_norm"]) / ref["grad_norm"]
        out[name]["param_err"] = max(float(np.abs(a - b).max()) for a, b in zip(ref["params"], r["params"]))
    print("RESULT" + json.dumps(out))


if __name__ == "__main__":
    main()
