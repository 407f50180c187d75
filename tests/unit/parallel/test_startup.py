"""Start-up checks and lifecycle helpers without processes (memjax/parallel/startup.py, confdiff.py, logtee.py,
preempt.py): each bad JAX variable is one StartupError line, the port probe sees a held port and an absent
coordinator, config differences are named by field, the native-log helper turns the coordination service's
fatal report into the one line, and a single process's SIGTERM becomes a stop request at the next step."""

from __future__ import annotations

import os
import re
import signal
import socket

import pytest

from memjax.parallel import DistributedMismatch, confdiff, logtee, startup
from memjax.parallel.preempt import StopRequests

JAX_VARS = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "MEMJAX_INIT_TIMEOUT_S", "SLURM_JOB_ID",
            "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE", "MEMJAX_SINGLE_PROCESS")


@pytest.fixture
def env(monkeypatch):
    for k in JAX_VARS:
        monkeypatch.delenv(k, raising=False)

    def set_(**kv):
        for k, v in kv.items():
            monkeypatch.setenv(k, v)
    return set_


@pytest.mark.parametrize("kv, match", [
    ({"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}, "JAX_COORDINATOR_ADDRESS is not set"),
    ({"JAX_COORDINATOR_ADDRESS": "host", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}, "is not host:port"),
    ({"JAX_COORDINATOR_ADDRESS": "h:99999", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}, "is not host:port"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2"}, r"outside 0\.\.1"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "x", "JAX_PROCESS_ID": "0"}, "must be an integer"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2"}, "JAX_PROCESS_ID is not"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "0", "JAX_PROCESS_ID": "0"}, ">= 1"),
])
def test_bad_jax_variables_are_one_line(env, kv, match):
    env(**kv)
    with pytest.raises(startup.StartupError, match=match) as e:
        startup.jax_env()
    assert "\n" not in str(e.value)


def test_good_variables_and_timeout(env):
    assert startup.jax_env() is None and startup.init_timeout() == startup.DEFAULT_INIT_TIMEOUT_S
    env(JAX_COORDINATOR_ADDRESS="[::1]:1234", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="1", MEMJAX_INIT_TIMEOUT_S="7")
    assert startup.jax_env() == ("[::1]:1234", 2, 1) and startup.init_timeout() == 7
    env(MEMJAX_INIT_TIMEOUT_S="0")
    with pytest.raises(startup.StartupError, match="whole number"):
        startup.init_timeout()


def test_a_slurm_batch_script_of_several_tasks_says_to_use_srun(env):
    env(SLURM_JOB_ID="7", SLURM_NTASKS="4")
    with pytest.raises(startup.StartupError, match=r"SLURM_NTASKS=4 but this is the allocation's batch script, not an "
                       r"srun step: start the command with srun \(srun python -m memjax.train") as e:
        startup.check_env()
    assert "\n" not in str(e.value) and startup.launch_rank() is None
    env(MEMJAX_SINGLE_PROCESS="1")  # asked for: one process in the allocation
    assert startup.check_env() is None and not startup.launched_as_many()


def test_an_srun_step_and_mpirun_give_the_native_logs_rank(env):
    env(SLURM_JOB_ID="7", SLURM_NTASKS="2", SLURM_STEP_NUM_TASKS="2", SLURM_PROCID="1")
    assert startup.check_env() is None and startup.launched_as_many() and startup.launch_rank() == (1, 2)
    env(SLURM_JOB_ID="8", SLURM_NTASKS="1", SLURM_STEP_NUM_TASKS="1", SLURM_PROCID="0")
    assert startup.check_env() is None and not startup.launched_as_many()  # one task: a single process
    env(SLURM_STEP_NUM_TASKS="x")
    with pytest.raises(startup.StartupError, match="SLURM_STEP_NUM_TASKS='x' must be an integer"):
        startup.launch_rank()


def test_probe_sees_a_held_port_and_no_coordinator():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(startup.StartupError, match=f"cannot listen on port {port}"):
            startup.probe(f"127.0.0.1:{port}", f"127.0.0.1:{port}", 0, 1)
        startup.probe(f"127.0.0.1:{port}", None, 1, 1)  # something listens: reachable
    with pytest.raises(startup.StartupError, match="cannot reach the coordinator"):
        startup.probe(f"127.0.0.1:{port}", None, 1, 0.5)


def test_config_differences_are_named_by_field():
    a = confdiff.flatten({"seed": 0, "optim": {"lr": 1e-3, "betas": (0.9, 0.99)}, "steps": 3})
    b = confdiff.flatten({"seed": 1, "optim": {"lr": 1e-3, "betas": [0.9, 0.99]}, "extra": 1, "steps": 3})
    assert confdiff.differing(a, b) == ["extra", "seed"]  # a tuple and a list of the same values are equal
    assert confdiff.describe(a, b, ["extra", "seed"]) == 'extra ("<absent>" vs 1), seed (0 vs 1)'
    many = [f"f{i}" for i in range(6)]
    assert confdiff.describe({}, {}, many, values=False) == "f0, f1, f2, f3 and 2 more"
    assert "memjax/parallel/confdiff.py" not in confdiff.source_digests() and "parallel/confdiff.py" in \
        confdiff.source_digests()


def test_native_fatal_report_becomes_one_line(tmp_path):
    joined = ["RPC: /xla.coordination.CoordinationService/RegisterTask", f"F1127 client.h:86] {logtee.FATAL}"]
    assert "could not join the coordinator" in logtee.verdict(joined, 0, 2, 30)
    lines = ["E1127 coordination_service.cc:1518] Use error polling ...: UNAVAILABLE: The following tasks are "
             "unhealthy (stopped sending heartbeats):", "1", "The tasks have crashed.",
             f"F1127 client.h:86] {logtee.FATAL}. This most likely indicates that another task died"]
    assert logtee.verdict(lines, 0, 2, 30) == "process 1 of 2 stopped (killed by a signal or lost); this process (0) stops"
    # the process named unhealthy reads the same report: it is alive, so its heartbeat went unheard
    assert logtee.verdict(lines, 1, 2, 30) == ("this process (1 of 2) was declared lost: the coordinator heard no "
                                               "heartbeat from it for 30 s (a starved or paused process; "
                                               "MEMJAX_HEARTBEAT_S sets the bound)")
    assert logtee.verdict(["[Gloo] Rank 0 is connected to 1 peer ranks"], 0, 2, 30) is None
    (tmp_path / "checkpoints" / "2").mkdir(parents=True)
    (tmp_path / "checkpoints" / "10").mkdir()
    assert logtee.newest_checkpoint(str(tmp_path)).endswith("checkpoints/10")


def test_one_process_sigterm_is_a_stop_request_then_unwinds():
    stop = StopRequests(1)
    try:
        assert not stop.due(1)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.due(1) and stop.code == 143 and stop.signal_name == "SIGTERM"
        with pytest.raises(KeyboardInterrupt):  # a second signal unwinds at once
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        stop.restore()


def test_an_inherited_ignored_sigint_stays_ignored_and_sigterm_still_stops():
    """A run started as a background job of a non-interactive shell inherits SIGINT
    ignored; Python leaves it so, and so does the run: Ctrl-C meant for the shell does not stop it."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        stop = StopRequests(1)
        try:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            assert not stop.due(1) and stop.code == 0
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.due(2) and stop.code == 143
        finally:
            stop.restore()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_processes_with_other_package_versions_refuse_naming_the_package(monkeypatch):
    """A host with another jax (or Python, numpy, ...) compiles other programs: the run refuses at start in one line
    naming the package and both versions, the way a config difference is named (the exchange is the coordinator's
    key-value store, replaced here by process 1's answer)."""
    import jax

    from memjax.core import environment
    from memjax.parallel import lifecycle, startup

    mine = environment.describe(devices=False)
    other = {"python": mine["python"], **mine["packages"], "jax": "0.0.1"}
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(jax, "process_index", lambda: 0)
    monkeypatch.setattr(startup, "exchange", lambda name, flat: [flat, other if name == "packages" else flat])
    with pytest.raises(DistributedMismatch, match=r'^process 0 and process 1 differ in the packages: jax \("'
                       + re.escape(mine["packages"]["jax"]) + r'" vs "0\.0\.1"\); install the same versions'):
        lifecycle.agree_run({"seed": 0})
    monkeypatch.setattr(startup, "exchange", lambda name, flat: [flat, flat])
    lifecycle.agree_run({"seed": 0})  # the same everywhere: no refusal
