"""memjax.engine data-parallel slot groups on 8 simulated CPU devices (EngineConfig.data_parallel=8, and
4 groups x tensor_parallel=2):
each device holds 1/8 of the KV pool and its own slots, devices decode distinct requests, and tokens and
log-probs equal a 1-device engine's for the same requests and seeds, also under preemption and for
multi-turn continuations (which stay in their parent's device group). One subprocess runs every check."""

import json
import os
import subprocess
import sys

import pytest

from memjax.engine import EngineConfig, KVCacheOptions

pytestmark = pytest.mark.e2e

SCRIPT = r"""
import json, re, time
import jax.numpy as jnp
T0 = time.time()
import numpy as np
import jax
from memjax.engine import Engine, EngineConfig, KVCacheOptions, SamplingParams
from memjax.model import init_model, presets
from memjax.parallel import MeshConfig, param_shardings, rollout_devices
from flax import nnx


assert jax.device_count() == 8
model = init_model(presets.get("tiny"), seed=6)
CFG = dict(max_slots=16, page_size=4, window=48, prefill_slots=8, prefill_chunk=8, progress=False)
r = np.random.default_rng(0)
prompts = [r.integers(0, 512, int(k)).tolist() for k in r.integers(3, 20, 20)]
prompts[5] = prompts[4]  # one prefix-sharing pair
sp = [SamplingParams(temperature=0.0 if i % 2 else 1.0, top_p=0.9 if i % 3 == 0 else 1.0, max_tokens=int(k), seed=i)
      for i, k in enumerate(r.integers(10, 28, 20))]
one = Engine(model, EngineConfig(**CFG))  # one device, a pool large enough never to preempt
ref = one.generate(prompts, sp)
T1 = time.time()
# 8 groups of 2 slots, 14 pages each (12 per full window + 2): long pairs preempt
mesh = MeshConfig().make()  # the trainer's default: every device on fsdp
dp = Engine(model, EngineConfig(**CFG, kv=KVCacheOptions(num_pages=8 * 14), data_parallel=-1), devices=rollout_devices(mesh))
rids = [dp.submit(p, s) for p, s in zip(prompts, sp)]
groups = [dp.book.live[i].device for i in rids]
done = {}
while len(done) < len(rids):
    done.update({c.request_id: c for c in dp.step()})
out = [done[i] for i in rids]
T2 = time.time()
k = dp._pool.k
res = dict(
    pool_shape=list(k.shape), shard_shapes=sorted({tuple(s.data.shape) for s in k.addressable_shards}),
    shard_devices=len({s.device for s in k.addressable_shards}), slots_shard=list(dp._slots.tokens.addressable_shards[0].data.shape),
    one_pool=list(one._pool.k.shape), num_pages=dp.num_pages, one_stats=dict(one.stats), stats=dict(dp.stats),
    device_decode=[s["decode_tokens"] for s in dp.device_stats], device_rounds=[s["rounds"] for s in dp.device_stats],
    tokens_equal=[a.token_ids == b.token_ids and a.finish_reason == b.finish_reason for a, b in zip(ref, out)],
    lp_err=max(float(np.abs(np.subtract(a.logprobs, b.logprobs)).max()) for a, b in zip(ref, out)),
    preemptions=sum(o.preemptions for o in out),
    groups=[g for g in groups],
)
# continuation: a retained parent and its child stay in one device group; equals prefilling the concatenation
greedy = SamplingParams(temperature=0.0, max_tokens=6)
for i in range(3):  # load groups 0..2 first: the parent goes to the least loaded group, 3
    dp.submit(prompts[i], SamplingParams(max_tokens=4))
rid = dp.submit(prompts[7], greedy, retain=True)
done = {}
while rid not in done:
    done.update({c.request_id: c for c in dp.step()})
parent = done[rid]
child_rid = dp.submit([5, 6, 7], greedy, parent=parent)
child_dev = dp.book.live[child_rid].device
dp.release(parent)
while child_rid not in done:
    done.update({c.request_id: c for c in dp.step()})
while dp.num_unfinished:
    dp.step()
# beside a top-p request: the 1-device loop that ran `ref` (compiled); a greedy row takes the argmax in it too
want = one.generate([prompts[7] + parent.token_ids + [5, 6, 7], prompts[0]], [greedy, sp[0]])[0]
res.update(parent_dev=parent.kv.device, child_dev=child_dev, cont_equal=done[child_rid].token_ids == want.token_ids,
           cont_lp_err=float(np.abs(np.subtract(done[child_rid].logprobs, want.logprobs)).max()),
           continued=dp.stats["continued_tokens"], n_free=np.asarray(dp._pool.n_free).tolist(),
           refcount=int(np.asarray(dp._pool.refcount).sum()), retained=dp.retained_pages)
# weights handed over from the trainer's FSDP layout: resharded (replicated) without recompiling the loop
state = nnx.state(model, nnx.Param)
fsdp = jax.device_put(state, param_shardings(state, mesh))
compiled = dp._run._cache_size()
dp.update_weights(fsdp)
again = dp.generate(prompts[1::2], sp[1::2])  # the greedy requests
res.update(fsdp_sharded=any(a.addressable_shards[0].data.shape != a.shape for a in jax.tree.leaves(fsdp)),
           params_replicated=all(a.sharding.is_fully_replicated and len(a.sharding.device_set) == 8
                                 for a in jax.tree.leaves(dp._params)),
           recompiled=dp._run._cache_size() - compiled,
           after_update_equal=all(a.token_ids == b.token_ids for a, b in zip(again, ref[1::2])))
# sleep (hybrid engine): pool and weights freed, rebuilt sharded on the next call
freed = dp.sleep()
dp.update_weights(state)
woke = dp.generate(prompts[1::2], sp[1::2])
res.update(sleep_freed=freed, wake_equal=all(a.token_ids == b.token_ids for a, b in zip(woke, ref[1::2])),
           wake_shards=sorted({tuple(s.data.shape) for s in dp._pool.k.addressable_shards}) == res["shard_shapes"])
# tensor parallel: 4 groups x 2 devices splitting the heads and the pool's KV heads
tp = Engine(model, EngineConfig(**CFG, kv=KVCacheOptions(num_pages=4 * 14), data_parallel=4, tensor_parallel=2))
tp_out = tp.generate(prompts, sp)
q = tp._queue()[0]
qw = [a for pth, a in jax.tree_util.tree_flatten_with_path(tp._params)[0] if "q_w" in jax.tree_util.keystr(pth)][0]
(ran,) = tp._runs_truncating.values()  # the loop tp_out ran (some requests sample with top-p): its cached program
hlo = ran.lower(tp._params, tp._slots, tp._pool, q, tp._ring, jnp.int32(1), jnp.int32(0)).compile().as_text()
res.update(tp_shards=sorted({tuple(s.data.shape) for s in tp._pool.k.addressable_shards}),
           tp_pool=list(tp._pool.k.shape), tp_qw=[list(s.data.shape) for s in qw.addressable_shards][:1],
           tp_equal=[a.token_ids == b.token_ids for a, b in zip(ref, tp_out)],
           tp_lp_err=max(float(np.abs(np.subtract(a.logprobs, b.logprobs)).max()) for a, b in zip(ref, tp_out)),
           tp_all_gather=len(re.findall(r" all-gather(-start)?\(", hlo)), tp_all_reduce=len(re.findall(r" all-reduce(-start)?\(", hlo)),
           tp_decode=[s["decode_tokens"] for s in tp.device_stats])
res["times"] = [T1 - T0, T2 - T1, time.time() - T2]
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def res():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.split("RESULT", 1)[1])
    print(json.dumps(res))  # the measured values (pytest -s)
    return res


def test_each_device_holds_an_eighth_of_the_pool_and_its_slots(res):
    assert res["num_pages"] == 8 * 14 and res["pool_shape"][0] == 8 and res["pool_shape"][3] == 14
    assert res["shard_shapes"] == [[1, *res["pool_shape"][1:]]] and res["shard_devices"] == 8
    assert res["slots_shard"][:2] == [1, 2]  # 16 slots -> 2 per device


def test_devices_decode_distinct_requests(res):
    assert all(n > 0 for n in res["device_decode"]), res["device_decode"]
    assert sum(res["device_decode"]) == res["stats"]["decode_tokens"] > 0
    assert sorted(set(res["groups"])) == list(range(8))  # every request was assigned to one group, all used
    assert res["groups"][4] == res["groups"][5]  # identical prompts (a prefix-sharing group) share a device


def test_outputs_equal_one_device_under_preemption(res):
    assert all(res["tokens_equal"]) and res["lp_err"] < 1e-5, res
    assert res["preemptions"] > 0 and res["stats"]["preemptions"] == res["preemptions"]
    assert res["one_stats"]["preemptions"] == 0


def test_continuation_stays_in_its_group_and_pages_come_back(res):
    assert res["parent_dev"] == res["child_dev"] == 3
    assert res["cont_equal"] and res["cont_lp_err"] < 1e-5 and res["continued"] > 0
    assert res["n_free"] == [13] * 8 and res["refcount"] == 0 and res["retained"] == 0


def test_totals_must_split_over_the_groups():
    with pytest.raises(ValueError, match="max_slots=12 is a total over data_parallel=8"):
        EngineConfig(max_slots=12, prefill_slots=8, data_parallel=8)
    with pytest.raises(ValueError, match="num_pages=160 over 8 device groups leaves 20 pages"):
        EngineConfig(max_slots=16, prefill_slots=8, window=512, page_size=16, data_parallel=8,
                     kv=KVCacheOptions(num_pages=160))
    with pytest.raises(ValueError, match="data_parallel must be >= 1 or -1"):
        EngineConfig(data_parallel=0)
    with pytest.raises(ValueError, match="tensor_parallel must be >= 1"):
        EngineConfig(tensor_parallel=0)
    from memjax.engine import Engine
    from memjax.model import init_model, presets

    with pytest.raises(ValueError, match="tensor_parallel=2 needs more than the 1 device"):  # this process: 1 CPU
        Engine(init_model(presets.get("tiny")), EngineConfig(max_slots=2, prefill_slots=1, window=64, tensor_parallel=2))
    cfg = EngineConfig(max_slots=16, prefill_slots=8, window=256, queue_size=64, data_parallel=8,
                       kv=KVCacheOptions(num_pages=800)).per_device(8)
    assert (cfg.max_slots, cfg.prefill_slots, cfg.kv.num_pages, cfg.queue_len, cfg.data_parallel) == (2, 1, 100, 8, 1)


def test_weights_from_the_fsdp_layout_are_replicated_without_recompiling(res):
    assert res["fsdp_sharded"] and res["params_replicated"] and res["recompiled"] == 0
    assert res["after_update_equal"]
    assert res["sleep_freed"] > 0 and res["wake_equal"] and res["wake_shards"]


def test_tensor_parallel_groups_split_heads_and_the_pool(res):
    L, kv, p = res["tp_pool"][1], res["tp_pool"][2], res["tp_pool"][3]
    assert res["tp_pool"][0] == 4 and p == 14 and res["tp_shards"] == [[1, L, kv // 2, p, 4, 16]]
    assert res["tp_qw"][0][-1] * 2 == 64  # q_w's output columns (4 heads x 16) split over 2 devices
    assert all(n > 0 for n in res["tp_decode"]) and len(res["tp_decode"]) == 4
    assert all(res["tp_equal"]) and res["tp_lp_err"] < 1e-5, res
    # inside a group: no gather of weights or KV pages, only the partial sums of o and down are reduced
    assert res["tp_all_gather"] == 0 and res["tp_all_reduce"] > 0
