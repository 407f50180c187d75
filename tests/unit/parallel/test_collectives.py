"""memjax.parallel.collectives: replica groups in their three HLO forms, while-loop execution counts, async
start/done pairs and the ring model's intra/inter-host bytes on hand-written HLO (expected bytes worked out here
from the ring formulas), then one real program compiled on 8 simulated CPU devices (2 hosts x 4)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from memjax.parallel.collectives import collectives, parse_groups, summary

F32 = 4


def _module(body: str, extra: str = "") -> str:
    head = ["HloModule test, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}", "",
            "%add (a: f32[], b: f32[]) -> f32[] {", "  %a = f32[] parameter(0)", "  %b = f32[] parameter(1)",
            "  ROOT %s = f32[] add(%a, %b)", "}", "", extra,
            "ENTRY %main.1_spmd (p: f32[8,16]) -> f32[8,16] {", "  %p = f32[8,16]{1,0} parameter(0)"]
    tail = ["  ROOT %r = f32[8,16]{1,0} copy(%p)", "}", ""]
    return "\n".join(head + ["  " + line for line in body.splitlines()] + tail)


@pytest.mark.parametrize("attrs,groups", [
    ("replica_groups={{0,1,2,3},{4,5,6,7}}", [(0, 1, 2, 3), (4, 5, 6, 7)]),
    ("replica_groups={{0,4},{1,5},{2,6},{3,7}}", [(0, 4), (1, 5), (2, 6), (3, 7)]),
    ("replica_groups=[2,4]<=[8]", [(0, 1, 2, 3), (4, 5, 6, 7)]),
    ("replica_groups=[4,2]<=[2,4]T(1,0)", [(0, 4), (1, 5), (2, 6), (3, 7)]),
    ("replica_groups=[2,4]<=[2,2,2]T(2,1,0)", [(0, 4, 2, 6), (1, 5, 3, 7)]),
    ("replica_groups=mesh['data'=2,'fsdp'=4,'tensor'=1] {'fsdp'}", [(0, 1, 2, 3), (4, 5, 6, 7)]),
    ("replica_groups=mesh['data'=2,'fsdp'=4,'tensor'=1] {'data'}", [(0, 4), (1, 5), (2, 6), (3, 7)]),
    ("replica_groups=mesh['data'=2,'fsdp'=4,'tensor'=1] {'data','fsdp'}", [tuple(range(8))]),
    ("replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_1'}", [(0, 1, 2, 3), (4, 5, 6, 7)]),
    ("replica_groups=mesh['a'=2,'b'=2,'c'=2] {'a','c'}", [(0, 1, 4, 5), (2, 3, 6, 7)]),
])
def test_replica_group_forms(attrs, groups):
    assert parse_groups(f"channel_id=1, {attrs}, dimensions={{0}}") == tuple(groups)


def test_replica_groups_absent_or_unknown():
    assert parse_groups("channel_id=1, dimensions={0}") is None
    assert parse_groups("replica_groups={}, dimensions={0}") is None
    with pytest.raises(ValueError, match="replica_groups"):
        parse_groups("replica_groups=<something new>")


def test_ring_bytes_intra_and_inter():
    # all-gather of an f32[32,16] result inside each host of 4 devices; all-reduce of f32[100] between hosts;
    # reduce-scatter to f32[2,16] over all 8; collective-permute of f32[8,16] 0->4 (crosses) and 1->2 (not)
    body = "\n".join([
        "%ag = f32[32,16]{1,0} all-gather(%p), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, "
        "dimensions={0}, use_global_device_ids=true",
        "%v = f32[100]{0} slice(%p), slice={[0:100]}",
        "%ar = f32[100]{0} all-reduce(%v), channel_id=2, replica_groups=[4,2]<=[2,4]T(1,0), "
        "use_global_device_ids=true, to_apply=%add",
        "%rs = f32[2,16]{1,0} reduce-scatter(%p), channel_id=3, replica_groups=[1,8]<=[8], dimensions={0}, "
        "use_global_device_ids=true, to_apply=%add",
        "%cp = f32[8,16]{1,0} collective-permute(%p), channel_id=4, source_target_pairs={{0,4},{1,2}}",
    ])
    s = summary(_module(body), num_devices=8, devices_per_host=4)
    ag = 3 / 4 * 32 * 16 * F32  # (n-1)/n x result, every device
    ar = 2 * 1 / 2 * 100 * F32  # 2 (n-1)/n x B, partner on the other host
    rs = 7 * 2 * 16 * F32  # (n-1) x result; ring 0..7: devices 3 and 7 send to another host
    for dev in range(8):
        intra = ag + (rs if dev not in (3, 7) else 0) + (8 * 16 * F32 if dev == 1 else 0)
        inter = ar + (rs if dev in (3, 7) else 0) + (8 * 16 * F32 if dev == 0 else 0)
        assert s["per_device"][str(dev)] == {"intra": int(intra), "inter": int(inter)}, dev
    assert s["max_inter"] == int(ar + rs) and s["ops"]["all-gather"] == 1 and s["unknown_trip_counts"] == []
    assert s["by_op"]["all-reduce"] == {"intra": 0, "inter": int(8 * ar)}
    # the same program with 2 devices per host: the all-gather ring 0->1->2->3->0 crosses at 1->2 and 3->0
    s2 = summary(_module(body), num_devices=8, devices_per_host=2)
    assert s2["by_op"]["all-gather"] == {"intra": int(4 * ag), "inter": int(4 * ag)}
    # one host: nothing is inter-host
    assert summary(_module(body), num_devices=8, devices_per_host=8)["max_inter"] == 0


LOOPS = textwrap.dedent("""\
    %inner_body (ip: (s32[], f32[16])) -> (s32[], f32[16]) {
      %ip = (s32[], f32[16]{0}) parameter(0)
      %ii = s32[] get-tuple-element(%ip), index=0
      %ix = f32[16]{0} get-tuple-element(%ip), index=1
      %rs = f32[4]{0} reduce-scatter(%ix), channel_id=5, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true, to_apply=%add
      ROOT %it = (s32[], f32[16]{0}) tuple(%ii, %ix)
    }

    %inner_cond (ic: (s32[], f32[16])) -> pred[] {
      %ic = (s32[], f32[16]{0}) parameter(0)
      ROOT %ib = pred[] constant(true)
    }

    %outer_body (op: (s32[], f32[16])) -> (s32[], f32[16]) {
      %op = (s32[], f32[16]{0}) parameter(0)
      %ox = f32[16]{0} get-tuple-element(%op), index=1
      %ags = (f32[16]{0}, f32[128]{0}) all-gather-start(%ox), channel_id=6, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true
      %agd = f32[128]{0} all-gather-done(%ags)
      ROOT %w = (s32[], f32[16]{0}) while(%op), condition=%inner_cond, body=%inner_body, backend_config={"known_trip_count":{"n":"5"}}
    }

    %outer_cond (oc: (s32[], f32[16])) -> pred[] {
      %oc = (s32[], f32[16]{0}) parameter(0)
      ROOT %ob = pred[] constant(true)
    }

    %micro_body (mp: (s32[], f32[16])) -> (s32[], f32[16]) {
      %mp = (s32[], f32[16]{0}) parameter(0)
      %mx = f32[16]{0} get-tuple-element(%mp), index=1
      %ar = f32[16]{0} all-reduce(%mx), channel_id=7, replica_groups=mesh['data'=2,'fsdp'=4] {'data'}, use_global_device_ids=true, to_apply=%add
      ROOT %mw = (s32[], f32[16]{0}) while(%mp), condition=%outer_cond, body=%quiet_body
    }

    %quiet_body (qp: (s32[], f32[16])) -> (s32[], f32[16]) {
      ROOT %qp = (s32[], f32[16]{0}) parameter(0)
    }
    """)
LOOP_BODY = "\n".join([
    "%c = s32[] constant(0)",
    "%x = f32[16]{0} slice(%p), slice={[0:1], [0:16]}",
    "%t0 = (s32[], f32[16]{0}) tuple(%c, %x)",
    "%w1 = (s32[], f32[16]{0}) while(%t0), condition=%outer_cond, body=%outer_body, "
    'backend_config={"known_trip_count":{"n":"3"}}',
    "%w2 = (s32[], f32[16]{0}) while(%t0), condition=%outer_cond, body=%micro_body",
])


def test_loop_counts_async_and_unknown_trip_counts():
    hlo = _module(LOOP_BODY, LOOPS)
    colls, unknown = collectives(hlo, 8)
    by = {c.op: c for c in colls}
    assert by["reduce-scatter"].count == 3 * 5 and by["all-gather"].count == 3 and by["all-reduce"].count == 1
    assert by["all-gather"].bytes == 128 * F32  # the -done's result, not the start's (operand, result) tuple
    # the micro loop (no known trip count, called from the entry) holds a collective; the loop inside it does not
    assert unknown == ["micro_body"]
    colls7, unknown7 = collectives(hlo, 8, outer_trip_count=7)
    assert {c.op: c.count for c in colls7}["all-reduce"] == 7 and unknown7 == []
    s = summary(hlo, 8, 4, outer_trip_count=7)
    rs = 15 * 3 * 4 * F32  # 15 runs x (n-1) x result, inside a host
    ag = 3 * 7 / 8 * 128 * F32  # 3 runs, ring over 8: devices 3 and 7 send across
    ar = 7 * 2 * 1 / 2 * 16 * F32  # 7 runs, partner on the other host
    for dev in range(8):
        cross = dev in (3, 7)
        assert s["per_device"][str(dev)] == {"intra": int(rs + (0 if cross else ag)),
                                             "inter": int(ar + (ag if cross else 0))}, dev


def test_no_entry_is_an_error():
    with pytest.raises(ValueError, match="ENTRY"):
        collectives("HloModule m\n%f (a: f32[]) -> f32[] {\n  ROOT %a = f32[] parameter(0)\n}\n")


SCRIPT = textwrap.dedent("""
    import json
    from functools import partial
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from memjax.parallel.collectives import summary
    assert len(jax.devices()) == 8
    mesh = Mesh(np.asarray(jax.devices()).reshape(2, 4), ("data", "fsdp"))
    N = 256

    def local(c, n):  # one device's f32[N]: a loop gathering over fsdp, then a sum over data
        def body(_, c):
            g = jax.lax.all_gather(c, "fsdp", tiled=True)  # f32[4N] result
            return jnp.tanh(c * 0.5 + g.reshape(4, N).sum(0))
        c = jax.lax.fori_loop(0, n, body, c)
        return jax.lax.psum(c, "data")

    out = {}
    for name, n in (("scan3", 3), ("traced", None)):
        f = jax.jit(jax.shard_map(partial(local, n=n) if n else local, mesh=mesh,
                                  in_specs=(P(("data", "fsdp")),) + ((P(),) if n is None else ()),
                                  out_specs=P(("data", "fsdp"))))
        args = (jax.ShapeDtypeStruct((8 * N,), jnp.float32),) + ((jax.ShapeDtypeStruct((), jnp.int32),)
                                                                 if n is None else ())
        hlo = f.lower(*args).compile().as_text()
        out[name] = {"1": summary(hlo, 8, 4), "3": summary(hlo, 8, 4, outer_trip_count=3),
                     "flat": summary(hlo, 8, 8, outer_trip_count=3)}
    print("RESULT" + json.dumps(out))
""")


@pytest.mark.e2e
def test_compiled_program_on_2_hosts_x_4_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.split("RESULT", 1)[1])
    gather = 3 * 3 / 4 * 4 * 256 * F32  # 3 iterations, ring of 4 inside a host, f32[4N] result
    psum = 2 * 1 / 2 * 256 * F32  # one all-reduce with the partner on the other host
    scan, traced = res["scan3"], res["traced"]
    for dev in map(str, range(8)):
        assert scan["1"]["per_device"][dev] == {"intra": gather, "inter": psum}, (dev, scan["1"])
        # a traced trip count: counted once (and listed) unless the caller gives it
        assert traced["1"]["per_device"][dev] == {"intra": gather / 3, "inter": psum}, (dev, traced["1"])
        assert traced["3"]["per_device"][dev] == scan["1"]["per_device"][dev]
        assert scan["flat"]["per_device"][dev] == {"intra": gather + psum, "inter": 0}
    assert scan["1"]["unknown_trip_counts"] == [] and len(traced["1"]["unknown_trip_counts"]) == 1
    assert traced["3"]["unknown_trip_counts"] == []
