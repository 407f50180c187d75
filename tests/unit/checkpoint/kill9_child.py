"""Child process of test_run_checkpoints.test_repeated_kill9: resume from the newest good step, then keep
saving (step s holds w[0] == s) until killed. Prints START <step> and SAVING <step> lines."""

import sys
import numpy as np, orbax.checkpoint as ocp
from memjax.checkpoint.run_checkpoints import RunCheckpoints

def restore(mgr, step):
    got = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore({"w": np.zeros(200_000, np.float32)}),
                                                    meta=ocp.args.JsonRestore()))
    assert got["meta"]["step"] == step and float(got["state"]["w"][0]) == step

ck = RunCheckpoints(sys.argv[1], keep=2, warn=lambda m: print("WARN", m, flush=True))
start = ck.restore_latest(restore) or 0
print("START", start, flush=True)
for s in range(start + 1, start + 40):
    w = np.random.default_rng(s).standard_normal(200_000).astype(np.float32); w[0] = s
    ck.save(s, ocp.args.Composite(state=ocp.args.StandardSave({"w": w}), meta=ocp.args.JsonSave({"step": s})))
    print("SAVING", s, flush=True)
ck.close()
