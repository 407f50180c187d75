"""memjax/core/environment.py: what a run records of its versions, devices and processor, checked against jax and
importlib.metadata in this process; a scoring that started no jax backend does not start one to describe itself
(a fresh process, as memjax.evaluate scoring an answers file is)."""

import json
import subprocess
import sys
from importlib import metadata

import jax
import pytest

from memjax.core.environment import changes, cpu_model, describe, line


def test_describe_names_this_process_versions_devices_and_processor():
    env = describe()
    assert env["packages"]["jax"] == jax.__version__ and env["packages"]["numpy"] == metadata.version("numpy")
    assert env["devices"] == jax.device_count() and env["processes"] == jax.process_count()
    assert env["device_kind"] == str(jax.devices()[0].device_kind) and env["backend"] == jax.devices()[0].platform
    assert env["cpu"] == cpu_model() != ""
    assert line(env) == (f"jax {jax.__version__}, {jax.device_count()} x {env['device_kind']} ({env['backend']}), "
                         f"1 process, {env['cpu']}")
    assert json.loads(json.dumps(env)) == env                       # it goes into run.json / results.json as is


def test_changes_lists_each_difference_once_and_nothing_for_an_old_record():
    a = {"packages": {"jax": "0.11.2", "numpy": "2.5.5"}, "devices": 8, "cpu": "x"}
    b = {"packages": {"jax": "0.11.3", "numpy": "2.5.5", "nltk": "3.9.1"}, "devices": 8, "cpu": "y"}
    assert changes(a, b) == ["jax 0.11.2 -> 0.11.3", "nltk - -> 3.9.1", "cpu: x -> y"]
    assert changes(a, a) == [] and changes(None, b) == [] and changes({}, b) == []


@pytest.mark.e2e
def test_describing_a_process_without_a_backend_does_not_start_one():
    code = ("import jax; from jax._src import xla_bridge as x; from memjax.core.environment import describe, line\n"
            "e = describe(devices=None); started = x.backends_are_initialized(); jax.devices()\n"
            "print(json.dumps([sorted(e), started, 'devices' in describe(devices=None), line(e)]))")
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    keys, started, later, text = json.loads(out.splitlines()[-1])
    assert keys == ["cpu", "packages", "python"] and started is False and later is True
    assert text.startswith(f"jax {jax.__version__}, ") and " x " not in text
