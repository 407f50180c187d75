"""CPU seconds per test module, printed at the end of a run beside pytest's wall-clock `--durations`.

On 2 cores under pytest-xdist a test's wall time says little about its cost: a module that starts processes in
parallel (the fault matrix) slows the module on the other worker, whose wall time then grows without any work of
its own. What a test costs the suite is CPU: its process's user + system time over its setup, call and teardown,
plus that of the processes it started and waited for (RUSAGE_CHILDREN). Each phase's seconds travel to the
controller in the report's user_properties ("cpu_s"); the controller sums them by module and prints the costliest
(`MEMJAX_CPU_TOP`, 25 by default; 0 prints none) with the total. Nothing a test checks changes.
"""

from __future__ import annotations

import os
import resource
from collections import Counter

import pytest

_START = pytest.StashKey[float]()
_BY_MODULE: Counter = Counter()


def _cpu_s() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_START] = _cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    now = _cpu_s()
    outcome.get_result().user_properties.append(("cpu_s", now - item.stash.get(_START, now)))
    item.stash[_START] = now


def pytest_runtest_logreport(report):
    for key, value in report.user_properties:
        if key == "cpu_s":
            _BY_MODULE[report.nodeid.split("::", 1)[0]] += value


def pytest_terminal_summary(terminalreporter):
    top = int(os.environ.get("MEMJAX_CPU_TOP", "25"))
    if top <= 0 or not _BY_MODULE:
        return
    terminalreporter.write_sep("=", f"CPU seconds by module (process + waited-for children), top {top}")
    for path, seconds in _BY_MODULE.most_common(top):
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")
    terminalreporter.write_line(f"{sum(_BY_MODULE.values()):8.1f}  all {len(_BY_MODULE)} modules")
