"""A lean recorder: the floor under ``--perf-record``'s cost, measured, not a product.

Issue 59 asks for the record at pytest-split's cost plus 1%.  This ``-p`` plugin
records the same per-test data in the least code that can: each test's phases,
outcome, start and stop, class and module, and its call's CPU wait (two ``pread``\\ s of
the thread's ``schedstat`` inside the call, the closing one skipped under 1 ms as the
plugin's ``SHORT_CALL``), gathered at the end in one loop over the reports with garbage
collection paused (as the plugin's end), taken into columns with C-level maps and
written atomically, times as integer microseconds, with the standard library's C
encoder.  It leaves out what the product does beyond that (xdist, reruns and attempts,
the collections' pauses, quarantine, compilation, groups' totals, validation, the
store), so what it costs is less than any full recorder's.

    build/bench-venv/bin/python bench/instructions.py --tests 10000 --lean

``LEAN_RECORDER_WITHOUT=clock`` leaves the CPU-wait clock out, ``=end`` the session's end
(no fold, no file): the two parts' costs, as ``--steps`` gives the plugin's.
``LEAN_RECORDER_WITH=record`` adds what the record writes beyond these columns and the
product's check of each report (``_the_records_other_parts``); reruns' attempts, pauses
and xdist stay out.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Generator, Iterable
from itertools import repeat
from operator import add, attrgetter
from typing import Any

import pytest

WITHOUT = os.environ.get("LEAN_RECORDER_WITHOUT", "")
# "record": with what the record writes beyond the floor's columns, and its checks.
WITH_RECORD = os.environ.get("LEAN_RECORDER_WITH", "") == "record"
OUT = os.environ.get("LEAN_RECORDER_OUT", "lean-record.json")
# perf.waits's, copied: importing the plugin's package would add its import to the floor.
SHORT_CALL = 0.001  # seconds
MAX_WAIT_PER_ARRIVAL = 50_000_000  # ns

_schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
_waits: dict[str, float] = {}
_items: list[pytest.Item] = []
_started: list[float] = []


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


def pytest_sessionstart() -> None:
    _started.append(time.time())


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
    # Each pass over the reports is one plain loop; the columns are then taken with
    # C-level maps.  Times are written as integer microseconds (the record's six
    # decimals), starts and stops from the session's start: an int's text costs a
    # fraction of a float's ``repr``.
    setup: dict[str, pytest.TestReport] = {}
    call: dict[str, pytest.TestReport] = {}
    teardown: dict[str, pytest.TestReport] = {}
    by_phase = {"setup": setup, "call": call, "teardown": teardown}
    not_passed: dict[str, str] = {}  # the first phase's outcome that is not "passed"
    odd: list[pytest.TestReport] = []  # with more on them than pytest puts there
    test_report = pytest.TestReport
    terminal = session.config.pluginmanager.getplugin("terminalreporter")
    placed = 0  # reports put in a phase's dict: more than the dicts hold where a test reran
    for category, group in terminal.stats.items():
        if category in PASSED_CATEGORIES:
            placed += len(group)
            if WITH_RECORD:  # the product's check that a report holds nothing else
                for report in group:
                    by_phase[report.when][report.nodeid] = report
                    if not _PLAIN_FIELDS.issuperset(vars(report)):
                        odd.append(report)
                continue
            for report in group:
                by_phase[report.when][report.nodeid] = report
            continue
        for report in group:
            if type(report) is test_report:
                placed += 1
                by_phase[report.when][report.nodeid] = report
                if report.outcome != "passed":
                    not_passed.setdefault(report.nodeid, report.outcome)
    ids = list(setup)
    setups = list(setup.values())
    calls = list(map(call.get, ids, repeat(_ABSENT)))
    teardowns = list(map(teardown.get, ids, repeat(_ABSENT)))
    classes, modules = _parents(_items)
    origin = _started[0]
    columns: dict[str, list[Any]] = {
        "id": ids,
        "outcome": list(map(not_passed.get, ids, repeat("passed"))),
        "setup": _microseconds(map(_DURATION, setups)),
        "call": _microseconds(map(_DURATION, calls)),
        "teardown": _microseconds(map(_DURATION, teardowns)),
        "start": [round((at - origin) * 1e6) for at in map(_START, setups)],
        "stop": [round((at - origin) * 1e6) for at in map(_STOP, map(teardown.get, ids, setups))],
        "class": list(map(classes.get, ids)),
        "module": list(map(modules.get, ids)),
        "cpu_wait": list(map(_waits.get, ids)),
    }
    written: dict[str, object] = {"origin": origin, "tests": columns}
    if WITH_RECORD:
        reran = placed - len(setup) - len(call) - len(teardown)
        written.update(_the_records_other_parts(columns, reran, len(odd), not_passed))
    with open(OUT + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(json.dumps(written, separators=(",", ":")))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(OUT + ".tmp", OUT)


# pytest's terminal stats: categories holding only reports of phases that passed (a
# passed call in "passed", a passed setup or teardown in "").
PASSED_CATEGORIES = frozenset({"", "passed"})
_DURATION, _START, _STOP = attrgetter("duration"), attrgetter("start"), attrgetter("stop")


class _Absent:
    """A phase that did not run (a call skipped in its setup)."""

    duration = 0.0


_ABSENT = _Absent()


def _microseconds(seconds: Iterable[float]) -> list[int]:
    return [round(value * 1e6) for value in seconds]


def _parents(items: list[pytest.Item]) -> tuple[dict[str, str], dict[str, str]]:
    """Each test's class and module node ids, read up from its parent: most tests'
    parent is their module or their class, so ``getparent``'s walk is spared."""
    classes: dict[str, str] = {}
    modules: dict[str, str] = {}
    module_type, class_type = pytest.Module, pytest.Class
    for item in items:
        node = item.parent
        if type(node) is module_type:
            modules[item.nodeid] = node.nodeid
            continue
        while node is not None and not isinstance(node, module_type):
            if isinstance(node, class_type) and item.nodeid not in classes:
                classes[item.nodeid] = node.nodeid
            node = node.parent
        if node is not None:
            modules[item.nodeid] = node.nodeid
    return classes, modules


# perf.collector's, copied as SHORT_CALL is (less the meters' attribute, which the floor
# never sets): what a TestReport holds of its own (pytest 9 keeps its node id as ``_id``).
_PLAIN_FIELDS = frozenset(
    {"nodeid", "_id", "location", "keywords", "outcome", "longrepr", "when"}
    | {"user_properties", "sections", "duration", "start", "stop"}
)


def _the_records_other_parts(
    columns: dict[str, list[Any]], reran: int, odd: int, not_passed: dict[str, str]
) -> dict[str, Any]:
    """What the record writes beyond the floor's columns (``LEAN_RECORDER_WITH=record``):
    each test's total, collections' seconds, worker and warm-up; the classes' and the
    modules' tests, totals, spans and wholeness; whether any test ran more than once."""
    ids, setups, calls, teardowns = (columns[k] for k in ("id", "setup", "call", "teardown"))
    count = len(ids)
    totals = list(map(add, map(add, setups, calls), teardowns))
    modules = columns["module"]
    first_of_module = dict(zip(reversed(modules), reversed(ids), strict=True))
    columns.update(
        total=totals,
        gc=[0] * count,
        worker=[None] * count,
        warmup=list(first_of_module.values()),
    )
    groups = {}
    starts, stops = columns["start"], columns["stop"]
    # A step per test, where the product steps per run of a group's tests
    # (``whole_groups``): if anything, this costs more than the product's way.
    for section in ("class", "module"):
        found: dict[str, list[Any]] = {}  # id -> [tests, total, first start, last stop, whole]
        for row, group in enumerate(columns[section]):
            if group is None:
                continue
            kept = found.get(group)
            if kept is None:
                found[group] = [1, totals[row], starts[row], stops[row], ids[row] not in not_passed]
                continue
            kept[0] += 1
            kept[1] += totals[row]
            kept[3] = stops[row]
            if ids[row] in not_passed:
                kept[4] = False
        groups["classes" if section == "class" else "modules"] = {
            "id": list(found),
            "tests": [kept[0] for kept in found.values()],
            "total": [kept[1] for kept in found.values()],
            "span": [kept[3] - kept[2] for kept in found.values()],
            "whole": [kept[4] for kept in found.values()],
        }
    # A test that ran twice (a rerun) would need its attempts in order, and a report
    # with more on it a reading of its own: the product's slow path.  Here both are
    # only counted.
    return {**groups, "reran": reran, "odd": odd}
