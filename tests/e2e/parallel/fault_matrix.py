"""The launch and fault matrix: real `memjax.train` / `memjax.launch` processes on CPU, run in parallel.

Each `Case` starts one or more processes (by hand with JAX_* variables, or the launcher; each forked from a server
that has imported jax, tests/forked_cli.py), optionally sends a signal once a line appears in the output, waits for
every process, and records the exit codes, the first memjax line printed (the one a user reads), the seconds to the
last exit, and -- for cases that trained -- whether running the same command again resumes to the final parameters
of an uninterrupted run bit for bit. `python tests/e2e/parallel/fault_matrix.py` runs the whole matrix and prints
its table; tests/e2e/parallel/test_fault_matrix.py runs it and asserts every row.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script: python tests/e2e/parallel/fault_matrix.py
    sys.path.insert(0, str(ROOT))
from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH  # noqa: E402
from tests.forked_cli import ForkedCLI  # noqa: E402

# groups of 4 and micro-batches of 32 rows: every step still updates (a non-flat group each step, grad_norm logged),
# at ~17 CPU-s per warm process instead of ~25 with the config's groups of 8 and 128-row micro-batches
TRAIN = ["memjax.train", "configs/tiny.py", "--set", "steps=3", "--set", "prompts_per_step=2", "--set",
         "agent.heldout_size=4", "--set", "agent.eval_samples=1", "--set", "eval_every=0", "--set",
         "checkpoint_every=10", "--set", "agent.group_size=4", "--set", "update.micro_rows=32"]
# the two-process shape also trains PPO's critic (GAE) under the shuffled-reward ablation, so every two-process stop
# (SIGTERM, SIGINT, the launcher, kill -9) resumes the critic, its optimizer and the ablation's generator too
TWO = ("--set", "advantage.estimator=gae", "--set", "ablation=shuffle_rewards")
INIT_S = 8  # MEMJAX_INIT_TIMEOUT_S in the matrix (the default, 30, in one case)
START_S = 45  # importing memjax.train and jax before any check: ~4 s idle, up to ~30 s on a loaded 2-core machine
HEARTBEAT_S = 20  # 5 s (and once 10 s, outside the matrix) let the coordination service declare a starved process dead
STOP_S = 150  # from a SIGTERM / SIGINT to the last exit: the rest of a step (compiles included) and a save, loaded CPU


_ISSUED: set = set()  # ports given to a case in this run: the cases run in threads, and bind(0) can return a port
_ISSUED_LOCK = threading.Lock()  # given to another case whose processes have not bound it yet


def claim_port(hold: bool = False) -> tuple[int, socket.socket | None]:
    """A port no other case of this run was given; with `hold`, the listening socket that keeps it (the "port in
    use" row binds it at once: probed and bound later, another case took it in between, CI of stop 60)."""
    rejected = []  # kept bound until the end, so bind(0) does not return them again
    with _ISSUED_LOCK:
        try:
            while True:
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
                if port not in _ISSUED:
                    break
                rejected.append(s)
        finally:
            for r in rejected:
                r.close()
        _ISSUED.add(port)
    if hold:
        s.listen()
        return port, s
    s.close()
    return port, None


@dataclasses.dataclass(frozen=True)
class Proc:
    env: dict  # JAX_* etc.; "{port}" is replaced by the case's port
    devices: int = 1
    extra: tuple = ()  # more --set arguments
    launcher: int = 0  # >0: `memjax.launch --nproc N` runs the training


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    procs: tuple
    codes: tuple  # expected exit code per process (None: any non-zero)
    line: str  # regex the first memjax line must match
    bound_s: float  # every process has exited within this many seconds (of the start, or of the signal)
    signal_at: tuple | None = None  # (regex in process k's output, k, signal, target process)
    resume: str | None = None  # "one" / "two": the uninterrupted run the resumed out dir must equal
    hold_port: bool = False  # the test holds the coordinator port (listening) during the case


def _p(i, n=2, **env):
    return {"JAX_COORDINATOR_ADDRESS": "127.0.0.1:{port}", "JAX_NUM_PROCESSES": str(n), "JAX_PROCESS_ID": str(i),
            **env}


ANY = None
CASES = [
    Case("SIGTERM, one process", (Proc({}),), (143,), r"memjax.train: stopped by SIGTERM at step \d", STOP_S,
         signal_at=(r"step 1/3", 0, signal.SIGTERM, 0), resume="one"),
    Case("SIGINT (Ctrl-C), one process", (Proc({}),), (130,), r"memjax.train: stopped by SIGINT at step \d", STOP_S,
         signal_at=(r"step 1/3", 0, signal.SIGINT, 0), resume="one"),
    Case("SIGTERM to process 1 of 2, by hand", (Proc(_p(0), extra=TWO), Proc(_p(1), extra=TWO)), (143, 143),
         r"memjax.train: stopped by SIGTERM at step \d", STOP_S, signal_at=(r"step 1/3", 0, signal.SIGTERM, 1),
         resume="two"),
    Case("SIGINT to process 0 of 2, by hand", (Proc(_p(0), extra=TWO), Proc(_p(1), extra=TWO)), (130, 143),
         r"memjax.train: stopped by SIG(INT|TERM) at step \d", STOP_S, signal_at=(r"step 1/3", 0, signal.SIGINT, 0),
         resume="two"),
    Case("SIGTERM to the launcher (2 processes)", (Proc({}, launcher=2, extra=TWO),), (143,),
         r"memjax.train: stopped by SIGTERM at step \d", STOP_S, signal_at=(r"step 1/3", 0, signal.SIGTERM, 0),
         resume="two"),
    Case("kill -9 of process 1 of 2, by hand", (Proc(_p(0), extra=(*TWO, "--set", "checkpoint_every=1")),
                                                Proc(_p(1), extra=(*TWO, "--set", "checkpoint_every=1"))),
         (ANY, -9), r"memjax: process 1 of 2 stopped \(killed by a signal or lost\); this process \(0\) stops; "
                    r"resume from .*checkpoints/\d", 6 * HEARTBEAT_S, signal_at=(r"checkpoint 1: committed", 0, signal.SIGKILL, 1),
         resume="two"),
    Case("JAX_NUM_PROCESSES/ID without JAX_COORDINATOR_ADDRESS", (Proc({"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}),
                                                                 Proc({"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"})),
         (2, 2), r"JAX_COORDINATOR_ADDRESS is not set", START_S),
    Case("address without a port", (Proc({**_p(0), "JAX_COORDINATOR_ADDRESS": "localhost"}),), (2,),
         r"JAX_COORDINATOR_ADDRESS='localhost' is not host:port", START_S),
    Case("port not a number", (Proc({**_p(1), "JAX_COORDINATOR_ADDRESS": "127.0.0.1:http"}),), (2,),
         r"is not host:port", START_S),
    Case("process id out of range", (Proc(_p(2)),), (2,), r"JAX_PROCESS_ID=2 is outside 0..1", START_S),
    Case("negative process id", (Proc(_p(-1)),), (2,), r"JAX_PROCESS_ID=-1 is outside 0..1", START_S),
    Case("process id not a number", (Proc({**_p(0), "JAX_PROCESS_ID": "one"}),), (2,),
         r"JAX_PROCESS_ID='one' must be an integer", START_S),
    Case("process count 0", (Proc(_p(0, n=0)),), (2,), r"JAX_NUM_PROCESSES=0 must be >= 1", START_S),
    Case("address without JAX_PROCESS_ID", (Proc({"JAX_COORDINATOR_ADDRESS": "127.0.0.1:{port}",
                                                   "JAX_NUM_PROCESSES": "2"}),), (2,),
         r"JAX_PROCESS_ID is not", START_S),
    Case("bad MEMJAX_INIT_TIMEOUT_S", (Proc(_p(0, MEMJAX_INIT_TIMEOUT_S="soon")),), (2,),
         r"MEMJAX_INIT_TIMEOUT_S='soon' must be a whole number", START_S),
    Case("3 processes announced, 2 started (default timeout 30 s)",
         (Proc(_p(0, n=3, MEMJAX_INIT_TIMEOUT_S="")), Proc(_p(1, n=3, MEMJAX_INIT_TIMEOUT_S=""))), (2, 2),
         r"not every process joined the coordinator .* within 30 s", 30 + START_S),
    Case("both processes JAX_PROCESS_ID=0", (Proc(_p(0)), Proc(_p(0))), (ANY, ANY),  # which fails how: a race
         r"(cannot listen on port|not every process joined|could not join)", INIT_S + START_S),
    Case("both processes JAX_PROCESS_ID=1", (Proc(_p(1)), Proc(_p(1))), (2, 2),
         r"cannot reach the coordinator", INIT_S + START_S),
    Case("coordinator port in use", (Proc(_p(0)), Proc(_p(1))), (2, 2),
         r"(cannot listen on port \d+ for the coordinator|not every process joined)", INIT_S + START_S, hold_port=True),
    Case("process 0 never started", (Proc(_p(1)),), (2,), r"process 1 cannot reach the coordinator at .* within",
         INIT_S + START_S),
    Case("4 devices in one process, 2 in the other", (Proc(_p(0), devices=4), Proc(_p(1), devices=2)), (2, 2),
         r"processes hold different numbers of devices \(process 0: 4, process 1: 2", START_S + 30),
    Case("different configs (seed, steps)", (Proc(_p(0)), Proc(_p(1), extra=("--set", "seed=1", "--set", "steps=4"))),
         (2, 2), r"differ in the config: seed \(0 vs 1\), steps \(3 vs 4\)|differ in the config: seed \(1 vs 0\), "
                 r"steps \(4 vs 3\)", START_S + 30),
    Case("launcher, one process fails at start", (Proc({}, launcher=2, extra=("--set", "mesh.data=3")),), (2,),
         r"memjax.train: error: ", START_S + 30),
]


@dataclasses.dataclass
class Outcome:
    codes: list
    first: str
    seconds: float
    out: str
    out_dir: Path
    text: list


def _env(devices: int, extra: dict, port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC",
                                                                      "JAX_PROCESS_ID", "SLURM_", "OMPI_", "MEMJAX_"))}
    env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1", MEMJAX_INIT_TIMEOUT_S=str(INIT_S),
               MEMJAX_HEARTBEAT_S=str(HEARTBEAT_S), XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    for k, v in extra.items():
        if v == "":
            env.pop(k, None)
        else:
            env[k] = v.replace("{port}", str(port))
    return env


def _command(p: Proc, out: Path) -> list:
    train = [*TRAIN, "--set", f"out_dir={out}", *p.extra]
    if p.launcher:
        return [sys.executable, "-m", "memjax.launch", "--nproc", str(p.launcher), "--devices-per-proc",
                str(p.devices), "--", *train]
    return [sys.executable, "-m", *train]


def start(cli: ForkedCLI, procs, out: Path, port: int, logs: Path, tag: str):
    """The case's processes from `cli`, each in its own session (a shell's job), environment and log."""
    return [(cli.start(_command(p, out), logs / f"{tag}{i}.txt", env=_env(p.devices, p.env, port), new_session=True),
             logs / f"{tag}{i}.txt") for i, p in enumerate(procs)]


def run(cli: ForkedCLI, case: Case, work: Path, signal_at=True) -> Outcome:
    work.mkdir(parents=True, exist_ok=True)
    out = work / "out"
    port, held = claim_port(hold=case.hold_port)
    try:
        t0 = time.monotonic()
        procs = start(cli, case.procs, out, port, work, "p" if signal_at else "resume")
        sig = case.signal_at if signal_at else None
        limit = t0 + case.bound_s + 900  # a stuck case fails its bound; this only ends it
        while any(p.poll() is None for p, _ in procs):
            if sig is not None and re.search(sig[0], procs[sig[1]][1].read_text(errors="replace")):
                procs[sig[3]][0].send_signal(sig[2])
                sig, t0 = None, time.monotonic()  # a signal case's seconds: from the signal to the last exit
            if time.monotonic() > limit:
                for p, _ in procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
            time.sleep(0.2)
        seconds = time.monotonic() - t0
    finally:
        if held is not None:
            held.close()
    time.sleep(0.3)  # the native-log helper's line follows its process's exit
    text = [f.read_text(errors="replace") for _, f in procs]
    lines = [ln for t in text for ln in t.splitlines() if re.search(r"memjax(\.\w+)?: ", ln)]
    lines = [re.sub(r"^\[\d\] ", "", ln) for ln in lines]
    return Outcome([p.returncode for p, _ in procs], lines[0] if lines else "", seconds, str(out), out, text)


def params(out: Path) -> dict:
    from safetensors.numpy import load_file

    return load_file(out / "hf" / "model.safetensors")


def equal(a: Path, b: Path) -> bool:
    x, y = params(a), params(b)
    return x.keys() == y.keys() and all((x[k] == y[k]).all() for k in x)


def references(work: Path) -> dict:
    """The uninterrupted runs: one process; two processes by hand (1 device each, critic and ablation: TWO)."""
    one = Case("uninterrupted, one process", (Proc({}),), (0,), "", 600)
    two = Case("uninterrupted, two processes", (Proc(_p(0), extra=TWO), Proc(_p(1), extra=TWO)), (0, 0), "", 600)
    return {"one": one, "two": two}


def stream(out: Path) -> dict:
    """What a run consumed of its prompt stream: the steps in metrics.jsonl (one line each, none repeated), the prompt
    records of each step, and the stream states its last checkpoint holds (every process's, and process 0's)."""
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = max(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    meta = json.loads((out / "checkpoints" / str(last) / "meta" / "metadata").read_text())
    return {"steps": [m["step"] for m in metrics], "records": [m["data_records"] for m in metrics],
            "checkpoint": last, "data": meta["data"], "data_processes": meta.get("data_processes")}


def run_matrix(work: Path, cases=CASES, jobs: int = 12) -> tuple[dict, dict, dict]:
    """Every case (in parallel) and, for those that trained, its resume; returns ({name: Outcome}, {name: resumed
    equal or None}, {"one" / "two": the uninterrupted reference's Outcome}). A resumed case's Outcome.out_dir holds
    the resumed run (it ran again in the same folder).

    At most `jobs` cases (or references) at a time, as before: the start-up rows' bounds include importing jax,
    which ~40 processes importing at once on 2 cores stretch past them. The uninterrupted references start first,
    beside the start-up cases (which fail before anything compiles); a case that trains starts once the reference
    of its shape (one process, or two) has finished, and its resume right after it. So the programs are compiled
    once per shape, by the reference, and every later training process finds them in the persistent compilation
    cache (JAX_COMPILATION_CACHE_DIR: tests/conftest.py sets one per test session and the children inherit it)
    instead of compiling them itself, all at the same time (about 70 s of CPU per process cold, 28 s warm, at load
    20-30). Process 1 of a two-process run finds its own programs there too: jax writes the cache from process 0
    only, and on CPU a key includes the process, so the children run with tests/child_site on PYTHONPATH, whose
    sitecustomize lets every process write. A cache hit is the executable XLA would have built: the exit codes,
    lines, bounds and the bit-for-bit comparison are those of cold processes. Each process is forked from one
    server that has imported jax, flax, optax and orbax but started no backend (tests/forked_cli.py), in its own
    session with its own environment: the memjax code it runs, its signals and its exit code are a fresh
    `python -m` process's, without ~3 CPU-s of imports each (the launcher's own children start fresh)."""
    refs = references(work)
    needed = {c.resume for c in cases if c.resume}
    with ForkedCLI(_env(1, {}, 0), ROOT) as cli, ThreadPoolExecutor(jobs) as ex:
        rfuts = {k: ex.submit(run, cli, refs[k], work / f"ref_{k}")
                 for k in sorted(needed, reverse=True)}  # "two" first

        def case_then_resume(i: int, c: Case):
            if c.resume:
                rfuts[c.resume].result()  # its programs are in the cache
            o = run(cli, c, work / f"case{i}")
            return o, (run(cli, c, work / f"case{i}", False) if c.resume else None)

        order = sorted(enumerate(cases), key=lambda ic: ic[1].resume is not None)  # start-up rows, then training
        futs = {c.name: ex.submit(case_then_resume, i, c) for i, c in order}
        done = {k: f.result() for k, f in futs.items()}
        ref = {k: f.result() for k, f in rfuts.items()}
    got, resumed = {k: o for k, (o, _) in done.items()}, {}
    for c in cases:
        r = done[c.name][1]
        if r is None:
            resumed[c.name] = None
        else:
            ok = all(code == 0 for code in r.codes) and all(code == 0 for code in ref[c.resume].codes)
            resumed[c.name] = ok and equal(r.out_dir, ref[c.resume].out_dir)
    return got, resumed, ref


def table(cases, got, resumed) -> str:
    rows = ["| case | command | exit codes | first line printed | seconds | resumed equal |", "|---|---|---|---|---|---|"]
    for c in cases:
        o = got[c.name]
        how = "memjax.launch --nproc 2" if c.procs[0].launcher else (
            " + ".join(" ".join(f"{k}={v}" for k, v in p.env.items() if k != "JAX_COORDINATOR_ADDRESS") or "1 process"
                       for p in c.procs))
        if c.signal_at:
            how += f"; {signal.Signals(c.signal_at[2]).name} to process {c.signal_at[3]}" if not c.procs[0].launcher \
                else f"; {signal.Signals(c.signal_at[2]).name} to the launcher"
        res = {None: "-", True: "yes", False: "NO"}[resumed.get(c.name)]
        first = o.first.replace("|", "/")
        rows.append(f"| {c.name} | `{how}` | {', '.join(map(str, o.codes))} | {first} | {o.seconds:.1f} | {res} |")
    return "\n".join(rows)


if __name__ == "__main__":
    names = sys.argv[1:]
    chosen = [c for c in CASES if not names or any(n in c.name for n in names)]
    with tempfile.TemporaryDirectory() as d:
        # the children share one compilation cache, as under pytest (tests/conftest.py)
        os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(d) / "xla-cache"))
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        t0 = time.monotonic()
        got, resumed, _ = run_matrix(Path(d), chosen)
        print(table(chosen, got, resumed))
        print(f"\nwall {time.monotonic() - t0:.0f} s")
