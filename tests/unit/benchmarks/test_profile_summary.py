"""benchmarks/profile_summary.py on a synthetic GPU-shaped Perfetto trace: kernels are counted on the CUDA
stream lines only (a device process also has "XLA Ops" / "XLA Modules" lines over the same time)."""

import gzip
import json

from benchmarks.profile_summary import summarize


def _write(tmp_path, events):
    d = tmp_path / "plugins" / "profile" / "run"
    d.mkdir(parents=True)
    with gzip.open(d / "host.perfetto_trace.json.gz", "wt") as fh:
        json.dump({"traceEvents": events}, fh)


def test_counts_stream_kernels_once(tmp_path):
    meta = [dict(ph="M", name="process_name", pid=1, args=dict(name="/device:GPU:0")),
            dict(ph="M", name="process_name", pid=2, args=dict(name="/host:CPU")),
            dict(ph="M", name="thread_name", pid=1, tid=10, args=dict(name="Stream #13(Compute)")),
            dict(ph="M", name="thread_name", pid=1, tid=11, args=dict(name="XLA Ops")),
            dict(ph="M", name="thread_name", pid=1, tid=12, args=dict(name="XLA Modules"))]
    x = lambda pid, tid, name, dur: dict(ph="X", pid=pid, tid=tid, name=name, ts=0, dur=dur)
    events = meta + [x(1, 10, "gemm_fusion", 30), x(1, 10, "gemm_fusion", 30), x(1, 10, "loop_add", 10),
                     x(1, 11, "gemm_fusion.1", 60), x(1, 11, "add.2", 10), x(1, 12, "jit_run", 75),
                     x(2, 20, "python", 500)]
    _write(tmp_path, events)
    s = summarize(tmp_path)
    assert s["kernels_from"] == "streams" and s["device_us"] == 70
    assert [(r["name"], r["us"], r["count"]) for r in s["top"]] == [("gemm_fusion", 60, 2), ("loop_add", 10, 1)]
    assert s["device_lines_us"]["/device:GPU:0 / XLA Modules"] == 75


def test_cpu_trace_counts_every_line(tmp_path):
    _write(tmp_path, [dict(ph="M", name="process_name", pid=2, args=dict(name="/host:CPU")),
                      dict(ph="X", pid=2, tid=1, name="fusion", ts=0, dur=5)])
    s = summarize(tmp_path)
    assert s["kernels_from"] == "all lines" and s["device_us"] == 5 and s["top"][0]["count"] == 1
