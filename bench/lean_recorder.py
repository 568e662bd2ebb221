"""A lean recorder: the floor under ``--perf-record``'s cost, measured, not a product.

Issue 59 asks for the record at pytest-split's cost plus 1%.  This ``-p`` plugin
records the same per-test data in the least code that can: each test's phases,
outcome, start and stop, class and module, and its call's CPU wait (two ``pread``\\ s of
the thread's ``schedstat`` inside the call, the closing one skipped under 1 ms as the
plugin's ``SHORT_CALL``), folded in one pass at the end with garbage collection paused
(as the plugin's end) and written atomically with the standard library's C encoder.  It
leaves out what the product does beyond that (xdist, reruns and attempts, the
collections' pauses, quarantine, compilation, groups' totals, validation, the store), so
what it costs is less than any full recorder's.

    build/bench-venv/bin/python bench/instructions.py --tests 10000 --lean

``LEAN_RECORDER_WITHOUT=clock`` leaves the CPU-wait clock out, ``=end`` the session's end
(no fold, no file): the two parts' costs, as ``--steps`` gives the plugin's.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Generator

import pytest

WITHOUT = os.environ.get("LEAN_RECORDER_WITHOUT", "")
OUT = os.environ.get("LEAN_RECORDER_OUT", "lean-record.json")
# perf.waits's, copied: importing the plugin's package would add its import to the floor.
SHORT_CALL = 0.001  # seconds
MAX_WAIT_PER_ARRIVAL = 50_000_000  # ns

_schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
_waits: dict[str, float] = {}
_items: list[pytest.Item] = []


def _call_waits(item: pytest.Item) -> Generator[None, object, object]:
    before = os.pread(_schedstat, 128, 0)
    started = time.perf_counter()
    try:
        return (yield)
    finally:
        if time.perf_counter() - started >= SHORT_CALL:
            start, end = before.split(), os.pread(_schedstat, 128, 0).split()
            waited = int(end[1]) - int(start[1])
            arrivals = int(end[2]) - int(start[2])
            _waits[item.nodeid] = round(min(waited, arrivals * MAX_WAIT_PER_ARRIVAL) / 1e9, 6)


if WITHOUT != "clock":
    pytest_runtest_call = pytest.hookimpl(wrapper=True, tryfirst=True)(_call_waits)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _items[:] = items


def pytest_sessionfinish(session: pytest.Session) -> None:
    if WITHOUT == "end":
        return
    # As the plugin's end (``files.gc_paused``): the new lists would set off a full
    # collection of the whole session's objects (60 M instructions at 10,000 tests).
    gc.disable()
    try:
        _write_record(session)
    finally:
        gc.enable()


def _write_record(session: pytest.Session) -> None:
    parents: dict[str, tuple[str | None, str | None]] = {}
    for item in _items:
        cls, module = item.getparent(pytest.Class), item.getparent(pytest.Module)
        parents[item.nodeid] = (
            None if cls is None else cls.nodeid,
            None if module is None else module.nodeid,
        )
    ids: list[str] = []
    outcomes: list[str] = []
    setups: list[float] = []
    calls: list[float] = []
    teardowns: list[float] = []
    starts: list[float] = []
    stops: list[float] = []
    phases = {"setup": setups, "call": calls, "teardown": teardowns}
    rows: dict[str, int] = {}
    terminal = session.config.pluginmanager.getplugin("terminalreporter")
    for group in terminal.stats.values():
        for report in group:
            if not isinstance(report, pytest.TestReport):
                continue
            row = rows.get(report.nodeid)
            if row is None:
                row = rows[report.nodeid] = len(ids)
                ids.append(report.nodeid)
                outcomes.append("passed")
                for column in (setups, calls, teardowns):
                    column.append(0.0)
                starts.append(report.start)
                stops.append(report.stop)
            phase = phases.get(report.when or "")
            if phase is not None:
                phase[row] = round(phase[row] + report.duration, 6)
            if report.outcome != "passed":
                outcomes[row] = report.outcome
            starts[row] = min(starts[row], report.start)
            stops[row] = max(stops[row], report.stop)
    no_parents = (None, None)
    columns = {
        "id": ids,
        "outcome": outcomes,
        **phases,
        "start": starts,
        "stop": stops,
        "class": [parents.get(i, no_parents)[0] for i in ids],
        "module": [parents.get(i, no_parents)[1] for i in ids],
        "cpu_wait": [_waits.get(i) for i in ids],
    }
    with open(OUT + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"tests": columns}, separators=(",", ":")))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(OUT + ".tmp", OUT)
