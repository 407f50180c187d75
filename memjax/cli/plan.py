"""`python -m memjax.plan`: per-device memory of a training config on N devices of G GiB, and whether it fits.

  python -m memjax.plan configs/memagent/train.py --devices 8 --hbm-gib 80 [--hosts 4] [--set mesh.fsdp=4 ...] [--json]

Prints the plan's table (or its JSON) and exits 1 with the reason when the config does not fit, 2 on bad input;
`--check` resolves the config, model, mesh and engine placement without compiling. The rows and how they are
computed: memjax/run/plan.py. `--pickled` / `--gpu-target` are the arguments of the plan's own child process.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys

from ..core.cli import RunError, nonnegative_float, positive_float, positive_int
from ..core.config import apply_overrides, load_config_file
from ..run.layout import engine_groups, mesh_config, model_config, resolve
from ..run.plan import plan, plan_here, table

MAX_HBM_GIB = 1024  # the largest --hbm-gib taken: above any device's memory (H200 141, MI300X 192, B200 180)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.plan", description=__doc__.split("\n")[0])
    ap.add_argument("config", nargs="?", help="a training config file (defines a TrainConfig)")
    ap.add_argument("--devices", type=positive_int, required=True, help="number of devices (>= 1), per host")
    ap.add_argument("--hosts", type=positive_int, default=1, help="hosts (processes) of --devices devices each (default 1): "
                    "the trainer's mesh spans all of them (mesh.across_hosts='data': fsdp/tensor inside a host, "
                    "data across hosts), each engine one host; prints the bytes each device sends per update "
                    "inside a host and between hosts (compiled collectives, ring model) beside the weights' least")
    ap.add_argument("--hbm-gib", type=positive_float, required=True, help="memory of one device in GiB (> 0)")
    ap.add_argument("--min-kv-gib", type=nonnegative_float, default=16.0, help="least KV cache per device in GiB (>= 0)")
    ap.add_argument("--micro-batches", type=positive_int, default=None,
                    help="micro-batch slots of the compiled update (default: update.min_micro_batches)")
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check", action="store_true", help="validate the arguments and the config, resolve the model "
                    "and the mesh on --devices, print what would be planned and exit 0 (nothing compiled)")
    ap.add_argument("--backend", choices=("auto", "gpu", "cpu"), default="auto",
                    help="compile the programs for XLA:GPU (the node's topology, deviceless: H100 up to 80 GiB, else "
                    "H200; needs the CUDA plugin of make venv) and XLA:CPU, reporting rows that differ by > 10%%; "
                    "auto = gpu when the plugin is installed, cpu otherwise (default auto)")
    ap.add_argument("--pickled", help=argparse.SUPPRESS)
    ap.add_argument("--gpu-target", help=argparse.SUPPRESS)
    ap.add_argument("--no-exit-code", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.hbm_gib > MAX_HBM_GIB:  # a typo (bytes, MiB) plans a device that does not exist, and every shape "fits"
        ap.error(f"argument --hbm-gib: {a.hbm_gib:g} GiB is more than any accelerator holds (at most {MAX_HBM_GIB}); "
                 "give the memory of one device in GiB (80 for an H100)")
    try:
        if a.pickled:
            with open(a.pickled, "rb") as fh:
                cfg = pickle.load(fh)
        else:
            if not a.config:
                ap.error("CONFIG is required")
            cfg = load_config_file(a.config)
        missing = [f for f in ("engine", "update", "loss", "optim", "mesh") if not hasattr(cfg, f)]
        if missing:
            ap.error(f"{a.config}: a {type(cfg).__name__} is not a training config (no {', '.join(missing)}); "
                     "memjax.plan plans TrainConfigs (configs/*.py given to python -m memjax.train)")
        cfg = apply_overrides(cfg, a.overrides)
        if a.check:
            m, (d, f, t) = model_config(cfg), mesh_config(cfg).sizes(a.devices)
            dg, fg, tg = mesh_config(cfg).global_sizes(a.devices * a.hosts, a.hosts)
            cfg, placed = resolve(cfg, a.devices, a.hbm_gib, model_cfg=m, hosts=a.hosts, min_kv_gib=a.min_kv_gib)
            where = f"{a.hosts} hosts x {a.devices}" if a.hosts > 1 else f"{a.devices}"
            print(f"python -m memjax.plan: {m.num_layers} layers, hidden {m.hidden_size}, vocab {m.vocab_size:,} on "
                  f"{where} x {a.hbm_gib:g} GiB, mesh data={dg} fsdp={fg} tensor={tg}, engine groups "
                  f"{engine_groups(cfg.engine, d, f, t)}, min KV {a.min_kv_gib:g} GiB\n{placed.line()}"
                  "\ncheck: ok (nothing compiled)")
            return 0
        if a.gpu_target:  # the child of plan(): the GPU node's compile-only devices
            from ..parallel.gpu_topology import node_devices
            res = plan_here(cfg, a.devices, a.hbm_gib, a.min_kv_gib, a.micro_batches, hosts=a.hosts,
                             devs=node_devices(a.gpu_target, a.hosts, a.devices))
        else:
            res = plan(cfg, a.devices, a.hbm_gib, min_kv_gib=a.min_kv_gib, micro_batches=a.micro_batches,
                       hosts=a.hosts, backend=a.backend,
                       source=None if a.pickled else (os.path.abspath(a.config), a.overrides))
    except (ValueError, RunError) as e:
        print(f"memjax.plan: {e}", file=sys.stderr)
        return 2
    print(json.dumps(res, indent=1) if a.json else table(res))
    if not res["fits"] and not a.no_exit_code:
        print(f"memjax.plan: does not fit: {res['reason']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
