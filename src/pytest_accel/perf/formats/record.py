"""The timing record (``--perf-record``): written and read only here.

Tests are in columns (docs/format.md): a list per field, one entry per test, written
straight from the session's ``TimingTable``; version 3 writes the text columns
(outcome, class, module, worker) as runs of equal values where that is shorter
(``perf.model.runlength``).  Version 1 (one object per test) and version 2 (every column a
list) are still read: ``check_record`` validates any of them and returns the lists'
layout, and ``timings`` turns that into the comparison's ``RunTimings``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pytest_accel.fields import (
    check_header,
    expect_int,
    expect_object,
    expect_seconds,
    expect_text,
    kind_of,
    parse_utc_timestamp,
    utc_timestamp,
)
from pytest_accel.files import InputError, dumps_in_pieces, microseconds_json, read_json
from pytest_accel.outcomes import OUTCOMES, RunColumns, interrupted
from pytest_accel.perf.model import runlength
from pytest_accel.perf.model.overrides import Override
from pytest_accel.perf.model.table import (
    GroupColumns,
    GroupSections,
    RunCompilation,
    TimingTable,
)
from pytest_accel.perf.model.timings import (
    Groups,
    RunIdentity,
    RunTimings,
    busiest,
    layout_of,
    whole_groups,
    without_pauses,
    without_waits,
)

RECORD_SCHEMA = "pytest-accel/record"
RECORD_VERSION = 4  # 4: a test running when the run was interrupted says "interrupted"
SECONDS = ("setup", "call", "teardown", "total")
PAUSES = "gc"  # optional: full garbage collections in the call (perf.pauses)
WAITS = "cpu_wait"  # optional (0.4): seconds the call waited for a CPU (perf.waits)
TEXTS = ("class", "module", "worker")
OPTIONAL_COLUMNS = ("tests", "deselected", "whole", PAUSES, WAITS, "worker")
RUN_COLUMNS = ("outcome", *TEXTS)  # written as runs where shorter (perf.model.runlength)
GROUP_SECTIONS = ("classes", "modules")
# The sections the timing feature writes itself: no other feature may add one of these.
TIMING_SECTIONS = frozenset(
    {"schema", "version", "run", "env", "judgement", "comparison", "compilation", "tests"}
    | set(GROUP_SECTIONS)
)
QUARANTINED = "quarantined"  # optional: failures a quarantine list covered (real outcome kept)
PLATFORM_SKIPS = "platform_skips"  # optional: {test: why} for tests our markers skipped
COMPILES = "compiles"  # optional: {test: XLA compilations} where the suite used JAX
COMPILE_SECONDS = "compile_seconds"  # optional: {test: seconds tracing, lowering, compiling}
CALL_COMPILE_SECONDS = "call_compile_seconds"  # optional: {test: ... of them in its call}
RECOMPILES = "recompiles"  # optional: {test: compilations of a function compiled already}
TRACE_SECONDS = "trace_seconds"  # optional (0.4): {test: seconds JAX spent tracing it}
# optional (after 0.4.0): {test: seconds, at most, its thread waited for a CPU while JAX traced}
TRACE_WAIT = "trace_cpu_wait"
REPEATS = "repeats"  # optional (0.4): {test: compilations of its most compiled function}
# optional (0.5), in ``run``: {"ran": s, "waited": s} of every thread of the processes
# that ran the tests (perf.waits): the waits a test's own clock does not see
THREADS_WAIT = "threads_cpu_wait"
# optional (0.5): {test: {function, caller, path, line}} of that function, where known
RECOMPILING = "recompiling"
# optional (0.4), where a GPU or TPU reported memory: {test: {device: peak bytes}}, and
# the tests whose figures are lower bounds (perf.device_memory).
DEVICE_MEMORY = "device_memory"
DEVICE_MEMORY_BOUNDED = "device_memory_bounded"
# The per-test maps of compilation, where the suite used JAX (a record of 0.3 has no
# trace_seconds or repeats).
COMPILE_MAPS = (
    COMPILES,
    COMPILE_SECONDS,
    CALL_COMPILE_SECONDS,
    RECOMPILES,
    TRACE_SECONDS,
    REPEATS,
    TRACE_WAIT,
    RECOMPILING,
)

if TYPE_CHECKING:  # the plugin passes one; `compare` never imports detection
    from pytest_accel.hardware.detection import Detection


@dataclass(frozen=True)
class RunInfo:
    started: float
    duration: float
    commit: str | None
    branch: str | None
    shard: str | None
    workers: int
    exitstatus: int
    run_id: str | None = None
    # Seconds the processes' threads ran and waited for a CPU (``perf.waits``).
    threads_wait: tuple[float, float] | None = None
    # One host of a multi-host run: its index, the run's hosts (None: not known) and
    # the name every host gives (None: not given), which joins their records.
    host: int | None = None
    hosts: int | None = None
    slice_name: str | None = None


def compilation_json(compilation: RunCompilation) -> dict[str, float | int]:
    """The record's ``compilation`` section."""
    found: dict[str, float | int] = {
        "count": compilation.count,
        "seconds": round(compilation.seconds, 6),
        "cache_hits": compilation.cache_hits,
        "cache_misses": compilation.cache_misses,
        "recompiles": compilation.recompiles,
    }
    if compilation.trace_seconds is not None and compilation.backend_seconds is not None:
        found["trace_seconds"] = round(compilation.trace_seconds, 6)
        found["backend_seconds"] = round(compilation.backend_seconds, 6)
    found["share"] = round(compilation.share, 4)
    return found


def compilation_of(record: Mapping[str, Any]) -> RunCompilation | None:
    """A record's ``compilation`` section; None where it has none, or one that is not
    numbers (the page draws what it can of a damaged record).  A record of 0.3 has no
    tracing and backend seconds."""
    found = record.get("compilation")
    numbers = (int, float)
    keys = ("count", "seconds", "cache_hits", "cache_misses", "share")
    if not isinstance(found, Mapping) or not all(isinstance(found.get(k), numbers) for k in keys):
        return None

    def optional(key: str) -> float | None:
        value = found.get(key)
        return float(value) if isinstance(value, numbers) else None

    recompiles = found.get("recompiles")
    return RunCompilation(
        int(found["count"]),
        float(found["seconds"]),
        int(found["cache_hits"]),
        int(found["cache_misses"]),
        recompiles if isinstance(recompiles, int) else 0,
        optional("trace_seconds"),
        optional("backend_seconds"),
        float(found["share"]),
    )


def run_json(run: RunInfo) -> dict[str, Any]:
    """The record's ``run`` section."""
    return {
        "started": utc_timestamp(run.started),
        **({"id": run.run_id} if run.run_id else {}),
        "duration": round(run.duration, 6),
        "commit": run.commit,
        "branch": run.branch,
        "shard": run.shard,
        "workers": run.workers,
        "exitstatus": run.exitstatus,
        **_threads_json(run.threads_wait),
        **_slice_json(run),
    }


def _slice_json(run: RunInfo) -> dict[str, Any]:
    if run.host is None:
        return {}
    return {"host": run.host, "slice": {"name": run.slice_name, "hosts": run.hosts}}


def _threads_json(found: tuple[float, float] | None) -> dict[str, Any]:
    if found is None:
        return {}
    return {THREADS_WAIT: {"ran": round(found[0], 6), "waited": round(found[1], 6)}}


def record_head(
    run: RunInfo,
    detection: Detection,
    key: str,
    frameworks: Mapping[str, str],
    pytest_version: str,
) -> dict[str, Any]:
    """The record's schema, run and environment: what a session writes before the
    judgement, the comparison and the other features' sections."""
    return {
        "schema": RECORD_SCHEMA,
        "version": RECORD_VERSION,
        "run": run_json(run),
        "env": {
            "key": key,
            "platform": detection.platform,
            "device_kind": detection.device_kind,
            "device_count": detection.device_count,
            "python": sys.version.split()[0],  # platform.python_version(), without importing it
            "pytest": pytest_version,
            "frameworks": dict(frameworks),
        },
    }


def encode_record(
    table: TimingTable,
    head: Mapping[str, Any],
    deselected: Mapping[str, Mapping[str, int]] | None = None,
    *,
    warmup: list[bool] | None = None,
    totals: list[float] | None = None,
    groups: GroupSections | None = None,
) -> Iterator[bytes]:
    """The record as JSON, a column at a time (``files.dumps_in_pieces``): each column
    of seconds is rounded as it is written, so one such copy exists at a time.

    ``deselected`` counts, per class and per module (``{"classes": {id: n}, ...}``),
    the tests that were collected but not run here (``-k``, ``-m``, another shard).
    ``warmup``, ``totals`` and ``groups``: the table's, where the caller has them.
    """
    warmup = table.warmup() if warmup is None else warmup
    totals = table.totals() if totals is None else totals
    if groups is None:
        groups = table.grouped(deselected or {}, warmup, totals)
    tests = {
        "id": table.nodeids,
        "outcome": runlength.as_runs(table.outcomes),
        "setup": lambda: microseconds_json(table.setups),
        "call": lambda: microseconds_json(table.calls),
        "teardown": lambda: microseconds_json(table.teardowns),
        "total": lambda: microseconds_json(totals),
        "gc": lambda: microseconds_json(table.pauses),
        **({WAITS: lambda: microseconds_json(table.waits)} if table.waits_measured else {}),
        "class": runlength.as_runs(table.class_ids),
        "module": runlength.as_runs(table.module_ids),
        "worker": runlength.as_runs(table.workers),
        "warmup": [nodeid for nodeid, warm in zip(table.nodeids, warmup, strict=True) if warm],
        QUARANTINED: table.quarantined_failures(),
        PLATFORM_SKIPS: table.platform_skip_reasons(),
        **(
            {
                COMPILES: counts,
                COMPILE_SECONDS: table.compile_seconds(),
                CALL_COMPILE_SECONDS: table.call_compile_seconds(),
                RECOMPILES: table.recompiles(),
                TRACE_SECONDS: table.trace_seconds(),
                REPEATS: table.repeats(),
                **({RECOMPILING: found} if (found := table.recompiling_json()) else {}),
                **({TRACE_WAIT: waited} if (waited := table.trace_waits()) else {}),
            }
            if (counts := table.compile_counts()) is not None
            else {}
        ),
        **(
            {DEVICE_MEMORY: memory, DEVICE_MEMORY_BOUNDED: table.memory_bounds()}
            if (memory := table.device_memory_json()) is not None
            else {}
        ),
        "attempts": table.attempts_json(),
    }
    written = {section: group_columns_json(groups[section][1]) for section in GROUP_SECTIONS}
    yield from dumps_in_pieces({**head, "tests": tests, **written})


def group_columns_json(columns: GroupColumns) -> dict[str, Any]:
    """A run's classes or modules as the record writes them, seconds to the microsecond."""
    return {
        "id": columns.ids,
        "tests": columns.tests,
        "total": microseconds_json(columns.total),
        "span": microseconds_json(columns.span),
        "deselected": columns.deselected,
        "whole": columns.whole,
    }


# --- reading -------------------------------------------------------------------------


def load_record(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """A record file's ``env.key`` and its data (version 2's layout), every field checked."""
    target = os.fspath(path)
    data = check_record(target, read_json(target))
    return data["env"]["key"], data


def check_record(path: str, data: Any) -> dict[str, Any]:
    """A record read back, every field of docs/format.md type-checked, with every
    column a list, as version 2 wrote them (version 1's objects and version 3's runs
    are converted).

    Unknown fields are ignored (a newer writer may add some).  A problem is an InputError
    naming the file and the field.  Columns are checked a field at a time: a record can
    hold 100,000 tests.
    """
    what = "a pytest-accel record"
    record = check_header(path, data, schema=RECORD_SCHEMA, supported=RECORD_VERSION, what=what)
    _check_run(path, expect_object(path, "run", record.get("run")))
    _check_env(path, expect_object(path, "env", record.get("env")))
    if record.get("comparison") is not None:
        expect_object(path, "comparison", record["comparison"])
    if record.get("judgement") is not None:
        judgement_of(path, record)  # checked now: a command reads it later
    if record["version"] == 1:
        return {**record, **_columns_of_version_1(path, record)}
    runs = _check_columns(path, "tests", record.get("tests"), (*SECONDS, PAUSES, WAITS), TEXTS)
    if runs:  # the ids interned; version 3's runs of equal values as version 2's lists
        record = {**record, "tests": {**record["tests"], **runs}}
    tests = record["tests"]
    attempts = expect_object(path, "tests.attempts", tests.get("attempts", {}))
    # The optional maps of a test to its value, each value checked as its kind is.
    maps: dict[str, Any] = {
        PLATFORM_SKIPS: expect_text,
        COMPILES: partial(expect_int, minimum=0),
        COMPILE_SECONDS: expect_seconds,
        CALL_COMPILE_SECONDS: expect_seconds,
        RECOMPILES: partial(expect_int, minimum=0),
        TRACE_SECONDS: expect_seconds,
        REPEATS: partial(expect_int, minimum=0),
        TRACE_WAIT: expect_seconds,
        RECOMPILING: _expect_culprit,
    }
    for name, check in maps.items():
        found = maps[name] = expect_object(path, f"tests.{name}", tests.get(name, {}))
        for nodeid, value in found.items():
            check(path, f"tests.{name}[{nodeid!r}]", value)
    memory = maps[DEVICE_MEMORY] = expect_object(
        path, f"tests.{DEVICE_MEMORY}", tests.get(DEVICE_MEMORY, {})
    )
    for nodeid, peaks in memory.items():
        where = f"tests.{DEVICE_MEMORY}[{nodeid!r}]"
        for device, count in expect_object(path, where, peaks).items():
            expect_int(path, f"{where}[{device!r}]", count, minimum=0)
    bounded = tests.get(DEVICE_MEMORY_BOUNDED, [])
    known: set[str] | None = None
    for where, names in (
        (
            f"tests.{DEVICE_MEMORY_BOUNDED}",
            _check_names(path, f"tests.{DEVICE_MEMORY_BOUNDED}", bounded),
        ),
        ("tests.warmup", _check_names(path, "tests.warmup", tests.get("warmup", []))),
        ("tests.quarantined", _check_names(path, "tests.quarantined", tests.get(QUARANTINED, []))),
        ("tests.attempts", list(attempts)),
        *((f"tests.{name}", list(found)) for name, found in maps.items()),
    ):
        if not names:
            continue
        if known is None:  # a set of 100,000 ids, only where some id is to be looked up
            known = set(tests["id"])
        unknown = next((name for name in names if name not in known), None)
        if unknown is not None:
            raise InputError(path, f"{where}: {unknown!r:.60} is not one of the record's tests")
    for nodeid, runs in attempts.items():
        _check_attempts(path, f"tests.attempts[{nodeid!r}]", runs)
    for section in GROUP_SECTIONS:
        _check_columns(path, section, record.get(section, {"id": []}), ("total", "span"), ())
    return record


def _expect_culprit(path: str, where: str, value: Any) -> None:
    """``{"function": ..., "caller": ..., "path": ..., "line": N, "count": N}``."""
    found = expect_object(path, where, value)
    for name in ("function", "caller", "path"):
        expect_text(path, f"{where}.{name}", found.get(name))
    expect_int(path, f"{where}.line", found.get("line"), minimum=0)
    if "count" in found:
        expect_int(path, f"{where}.count", found["count"], minimum=0)


def culprits(
    found: Mapping[str, Any] | None,
) -> dict[str, tuple[str, str, str, int, int | None]]:
    """A checked record's ``tests.recompiling``, as ``RunTimings.recompiling`` holds it."""
    return {
        test: (c["function"], c["caller"], c["path"], int(c["line"]), c.get("count"))
        for test, c in (found or {}).items()
    }


def _check_run(path: str, run: Mapping[str, Any]) -> None:
    parse_utc_timestamp(path, "run.started", run.get("started"))
    expect_seconds(path, "run.duration", run.get("duration"))
    for name in ("id", "commit", "branch", "shard"):
        expect_text(path, f"run.{name}", run.get(name), optional=True)
    expect_int(path, "run.workers", run.get("workers", 0), minimum=0)
    expect_int(path, "run.exitstatus", run.get("exitstatus", 0))
    if run.get(THREADS_WAIT) is not None:
        threads = expect_object(path, f"run.{THREADS_WAIT}", run[THREADS_WAIT])
        for name in ("ran", "waited"):
            expect_seconds(path, f"run.{THREADS_WAIT}.{name}", threads.get(name))
    if run.get("host") is not None:
        expect_int(path, "run.host", run["host"], minimum=0)
    if run.get("slice") is not None:
        part = expect_object(path, "run.slice", run["slice"])
        expect_text(path, "run.slice.name", part.get("name"), optional=True)
        if part.get("hosts") is not None:
            expect_int(path, "run.slice.hosts", part["hosts"], minimum=1)
    merged = run.get("merged_from", [])
    if not isinstance(merged, list):
        raise InputError(path, f"run.merged_from: expected a list, got {kind_of(merged)}")
    for index, entry in enumerate(merged):
        where = f"run.merged_from[{index}]"
        part = expect_object(path, where, entry)
        for name in ("id", "shard"):
            expect_text(path, f"{where}.{name}", part.get(name), optional=True)


def _check_env(path: str, env: Mapping[str, Any]) -> None:
    if not expect_text(path, "env.key", env.get("key")):
        raise InputError(path, "env.key: expected a non-empty string, got ''")
    expect_text(path, "env.platform", env.get("platform"))
    expect_text(path, "env.device_kind", env.get("device_kind"), optional=True)
    expect_int(path, "env.device_count", env.get("device_count"), minimum=0)
    for name in ("python", "pytest"):
        expect_text(path, f"env.{name}", env.get(name), optional=True)
    frameworks = expect_object(path, "env.frameworks", env.get("frameworks", {}))
    for name, version in frameworks.items():
        expect_text(path, f"env.frameworks[{name!r}]", version)


_NUMBER = {float, int}
_TEXT_OR_NULL = {str, type(None)}


def _check_columns(
    path: str, where: str, value: Any, seconds: tuple[str, ...], texts: tuple[str, ...]
) -> dict[str, list[Any]]:
    """Equal-length columns of the right types; the bad entry named when one is wrong.
    The columns written as runs (``perf.model.runlength``), as lists."""
    columns = expect_object(path, where, value)
    lists: dict[str, list[Any]] = {}
    if where == "tests":
        ids = lists["id"] = _interned_names(path, f"{where}.id", columns.get("id"))
    else:
        ids = _check_names(path, f"{where}.id", columns.get("id"))
    for name in ("outcome", *seconds, *texts, "tests", "deselected", "whole"):
        if where != "tests" and name in ("outcome", *TEXTS):
            continue
        if name not in columns and name in OPTIONAL_COLUMNS:
            continue  # optional: older writers left them out (never null)
        if name not in columns:
            raise InputError(path, f"{where}.{name}: missing (expected a list)")
        column = columns[name]
        if isinstance(column, dict) and name in RUN_COLUMNS:
            values, counts = runlength.runs_of(path, f"{where}.{name}", column, len(ids))
            column = lists[name] = runlength.expanded(values, counts)
            if _column_looks_right(name, values, seconds):
                continue  # a few values checked, not one per test
        if not isinstance(column, list):
            raise InputError(path, f"{where}.{name}: expected a list, got {kind_of(column)}")
        if len(column) != len(ids):
            raise InputError(path, f"{where}.{name}: {len(column)} entries for {len(ids)} ids")
        if _column_looks_right(name, column, seconds):
            continue
        for ident, entry in zip(ids, column, strict=True):  # find and name the bad one
            _check_entry(path, f"{where}.{name}[{ident!r}]", name, entry, seconds)
    return lists


def _column_looks_right(name: str, column: list[Any], seconds: tuple[str, ...]) -> bool:
    types = set(map(type, column))
    if name == "outcome":
        return types <= {str} and set(column) <= OUTCOMES
    if name in seconds:
        return types <= _NUMBER and (not column or (min(column) >= 0 and max(column) <= 1e6))
    if name in ("tests", "deselected"):
        return types <= {int} and (not column or min(column) >= 0)
    if name == "whole":
        return types <= {bool}
    return types <= _TEXT_OR_NULL


def _check_entry(path: str, where: str, name: str, value: Any, seconds: tuple[str, ...]) -> None:
    if name == "outcome":
        _check_outcome(path, where, value)
    elif name in seconds:
        expect_seconds(path, where, value)
    elif name in ("tests", "deselected"):
        expect_int(path, where, value, minimum=0)
    elif name == "whole":
        if not isinstance(value, bool):
            raise InputError(path, f"{where}: expected true or false, got {value!r:.60}")
    else:
        expect_text(path, where, value, optional=True)


def _interned_names(path: str, where: str, value: Any) -> list[str]:
    """A list of strings, interned: so are a baseline's ids (``baseline._parse_env``), and
    the comparison's maps and order checks of 100,000 ids then meet the same objects.
    ``sys.intern`` takes a str and nothing else: the check is the same pass."""
    try:
        if isinstance(value, list):
            return list(map(sys.intern, value))
    except TypeError:
        pass
    return _check_names(path, where, value)  # raises, naming the entry


def _check_names(path: str, where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not set(map(type, value)) <= {str}:
        bad = value if not isinstance(value, list) else next(v for v in value if type(v) is not str)
        raise InputError(path, f"{where}: expected a list of strings, got {bad!r:.60}")
    return value


def _check_outcome(path: str, where: str, value: Any) -> None:
    if not isinstance(value, str) or value not in OUTCOMES:
        raise InputError(
            path, f"{where}: expected one of {', '.join(sorted(OUTCOMES))}, got {value!r:.60}"
        )


def _check_attempts(path: str, where: str, value: Any) -> None:
    if not isinstance(value, list):
        raise InputError(path, f"{where}: expected a list, got {kind_of(value)}")
    for index, raw in enumerate(value):
        attempt = expect_object(path, f"{where}[{index}]", raw)
        _check_outcome(path, f"{where}[{index}].outcome", attempt.get("outcome"))
        for name in ("setup", "call", "teardown"):
            expect_seconds(path, f"{where}[{index}].{name}", attempt.get(name))


def _columns_of_version_1(path: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A version 1 record's per-test objects, checked, as version 2's columns."""
    tests = expect_object(path, "tests", record.get("tests"))
    for nodeid, entry in tests.items():
        where = f"tests[{nodeid!r}]"
        expect_object(path, where, entry)
        _check_outcome(path, f"{where}.outcome", entry.get("outcome"))
        for name in SECONDS:
            expect_seconds(path, f"{where}.{name}", entry.get(name))
        for name in TEXTS:
            expect_text(path, f"{where}.{name}", entry.get(name), optional=True)
        if entry.get("attempts") is not None:
            _check_attempts(path, f"{where}.attempts", entry["attempts"])
    entries = list(tests.values())
    columns: dict[str, Any] = {"id": list(tests)}
    for name in ("outcome", *SECONDS, *TEXTS):
        columns[name] = [entry.get(name) for entry in entries]
    columns["warmup"] = []
    columns["attempts"] = {
        nodeid: entry["attempts"]
        for nodeid, entry in tests.items()
        if len(entry.get("attempts") or ()) > 1
    }
    converted: dict[str, Any] = {"tests": columns}
    for section in GROUP_SECTIONS:
        groups = expect_object(path, section, record.get(section, {}))
        ids = list(groups)
        for group in ids:
            where = f"{section}[{group!r}]"
            entry = expect_object(path, where, groups[group])
            expect_int(path, f"{where}.tests", entry.get("tests"), minimum=0)
            expect_seconds(path, f"{where}.total", entry.get("total"))
            expect_seconds(path, f"{where}.span", entry.get("span"))
        converted[section] = {
            "id": ids,
            **{name: [groups[g][name] for g in ids] for name in ("tests", "total", "span")},
        }
    return converted


def group_columns(data: Mapping[str, Any], run: RunTimings) -> dict[str, GroupColumns]:
    """A checked record's classes and modules (``run``: its ``timings``); what a record
    of an earlier version lacks: no test counted, its total as its span, nothing
    deselected, whole as ``timings`` judged it."""
    found = {}
    for section, groups in zip(GROUP_SECTIONS, (run.classes, run.modules), strict=True):
        columns = data.get(section) or {}
        ids = list(columns.get("id") or ())
        total = [float(seconds) for seconds in columns.get("total") or ()]
        whole = dict(zip(groups.ids, groups.whole, strict=True))
        found[section] = GroupColumns(
            ids,
            list(columns.get("tests") or [0] * len(ids)),
            total,
            list(columns.get("span") or total),
            list(columns.get("deselected") or [0] * len(ids)),
            list(columns.get("whole") or [whole.get(group, True) for group in ids]),
        )
    return found


def timings(data: Mapping[str, Any]) -> RunTimings:
    """A checked record's run as the comparison sees it (see ``RunTimings``)."""
    tests = data["tests"]
    warm = set(tests.get("warmup", ()))
    warmup = [nodeid in warm for nodeid in tests["id"]] if warm else [False] * len(tests["id"])
    run = data["run"]
    groups: list[Groups] = []
    partial_modules: set[str] = set()
    for section, column in zip(GROUP_SECTIONS, (tests["class"], tests["module"]), strict=True):
        columns = data.get(section, {"id": []})
        if "whole" in columns:
            groups.append(Groups(columns["id"], columns["total"], columns["whole"]))
        else:  # version 1: whole unless a test of it failed
            groups.append(whole_groups(column, tests["outcome"], warmup, tests["total"]))
        if section == "modules":
            for module, count in zip(columns["id"], columns.get("deselected", ()), strict=False):
                if count:
                    partial_modules.add(module)
    measured = RunTimings(
        key=data["env"]["key"],
        identity=RunIdentity(
            run.get("commit"),
            run.get("branch"),
            run.get("started"),
            run.get("id"),
            tuple(str(part["id"]) for part in run.get("merged_from", ()) if part.get("id")),
        ),
        ids=tests["id"],
        outcome=tests["outcome"],
        call=tests["call"],
        total=tests["total"],
        cls=tests.get("class") or [None] * len(tests["id"]),
        module=tests.get("module") or [None] * len(tests["id"]),
        warmup=warmup,
        classes=groups[0],
        modules=groups[1],
        partial_modules=frozenset(partial_modules),
        shard=run.get("shard"),
        layout=layout_of(
            int(run.get("workers", 0)),
            [m.get("shard") for m in run.get("merged_from", ())] or [run.get("shard")],
        ),
        compiling=tests.get(COMPILE_SECONDS) if COMPILES in tests else None,
        # A record from before the call's share was kept: its call is all execution.
        call_compiling=tests.get(CALL_COMPILE_SECONDS, {}) if COMPILES in tests else None,
        recompiles=tests.get(RECOMPILES) if COMPILES in tests else None,
        tracing=tests.get(TRACE_SECONDS) if COMPILES in tests else None,
        tracing_waits=tests.get(TRACE_WAIT) if COMPILES in tests else None,
        repeats=tests.get(REPEATS) if REPEATS in tests else None,
        recompiling=culprits(tests.get(RECOMPILING)) if COMPILES in tests else None,
        device_memory=None if DEVICE_MEMORY not in tests else busiest(tests[DEVICE_MEMORY]),
        memory_bounded=frozenset(tests.get(DEVICE_MEMORY_BOUNDED, ())),
        threads_wait_share=threads_share(run.get(THREADS_WAIT)),
    )
    paused = without_pauses(measured, tests.get(PAUSES) or [0.0] * len(tests["id"]))
    return without_waits(paused, tests.get(WAITS))


def threads_share(found: Any) -> float | None:
    """A checked ``run.threads_cpu_wait``'s share of waiting (None: none, or no time)."""
    if not isinstance(found, Mapping):
        return None
    ran, waited = float(found["ran"]), float(found["waited"])
    return waited / (ran + waited) if ran + waited > 0 else None


def run_columns(data: Mapping[str, Any]) -> RunColumns:
    """A checked record's run as the features that account for runs read it."""
    tests, run, env = data["tests"], data["run"], data["env"]
    earlier = {
        nodeid: sum(a["setup"] + a["call"] + a["teardown"] for a in attempts[:-1])
        for nodeid, attempts in tests.get("attempts", {}).items()
    }
    return RunColumns(
        env["key"],
        env["platform"],
        int(env["device_count"]),
        int(run.get("workers", 0)),
        float(run["duration"]),
        tests["id"],
        tests["outcome"],
        tests["total"],
        tests.get("module") or [None] * len(tests["id"]),
        earlier,
        frozenset(tests.get(QUARANTINED, ())),
        tests.get(PLATFORM_SKIPS, {}),
        run.get("started"),
        compiles=tests.get(COMPILES),
        interrupted=interrupted(data),
        reruns={nodeid: len(runs) - 1 for nodeid, runs in tests.get("attempts", {}).items()},
        left_out=left_out(data),
        cut=frozenset(budget_cut(data)),
    )


def left_out(data: Mapping[str, Any]) -> dict[str, str]:
    """The tests the record's change-aware selection left out, and why (shadow mode
    leaves none out).  The section is written by selection and read here as plain
    values: the record is this module's format."""
    section = data.get("selection")
    if not isinstance(section, Mapping) or section.get("mode") == "shadow":
        return {}
    found: dict[str, str] = {}
    for part in ("deselected", "cut"):
        tests = section.get(part)
        if isinstance(tests, Mapping):
            found.update((str(t), str(why)) for t, why in tests.items())
    return found


def budget_cut(data: Mapping[str, Any]) -> list[str]:
    """The tests of ``left_out`` the selection's budget cut."""
    section = data.get("selection")
    cut = section.get("cut") if isinstance(section, Mapping) else None
    if not isinstance(cut, Mapping) or section.get("mode") == "shadow":  # type: ignore[union-attr]
        return []
    return [str(t) for t in cut]


def attempts_of(data: Mapping[str, Any]) -> dict[str, list[str]]:
    """A checked record's tests with more than one attempt: their outcomes in order."""
    return {
        nodeid: [attempt["outcome"] for attempt in runs]
        for nodeid, runs in data["tests"].get("attempts", {}).items()
    }


def record_json(data: Mapping[str, Any]) -> dict[str, Any]:
    """A checked record (``check_record``) as the current version's document: its text
    columns as runs of equal values where that is shorter."""
    tests = data["tests"]
    runs = {name: runlength.as_runs(tests[name]) for name in RUN_COLUMNS if name in tests}
    return {**data, "version": RECORD_VERSION, "tests": {**tests, **runs}}


def started(path: str, data: Mapping[str, Any]) -> float:
    """A checked record's ``run.started`` as a POSIX time."""
    return parse_utc_timestamp(path, "run.started", data["run"]["started"])


# The rule's fields a record keeps (``judgement.rule``), with the types they take: what
# its run was judged by, so that ``compare`` and ``report`` judge it alike.
RULE_FIELDS: dict[str, tuple[type, ...]] = {
    "threshold": (int, float),
    "min_delta": (int, float),
    "min_duration": (int, float),
    "min_samples": (int,),
    "mad_k": (int, float),
    "normalize": (bool,),
    "large_ratio": (int, float),
    "large_k_factor": (int, float),
    "spread": (str,),
    "log_space": (bool,),
    "time": (str,),
    "memory_threshold": (int, float),
    "memory_min_delta": (int,),
}


@dataclass(frozen=True)
class JudgedBy:
    """What a record's run was judged by: the rule's settings (keyed by ``Rule`` field),
    ``--perf-new-slow``, and each test's ``@pytest.mark.perf`` override."""

    rule: Mapping[str, Any]
    new_slow: float | None
    overrides: Mapping[str, Override]


def judgement_json(
    rule: Mapping[str, Any], new_slow: float, overrides: Mapping[str, Override]
) -> dict[str, Any]:
    """The record's ``judgement`` section."""
    return {
        "rule": {name: value for name, value in rule.items() if name in RULE_FIELDS},
        "new_slow": new_slow,
        "overrides": {
            test: {"threshold": o.threshold, "min_delta": o.min_delta, "ignore": o.ignore}
            for test, o in sorted(overrides.items())
        },
    }


def judgement_of(path: str, record: Mapping[str, Any]) -> JudgedBy | None:
    """A record's ``judgement`` (None: a record written before 0.4 keeps none), each
    field checked; a field of the rule this release does not know is left out."""
    raw = record.get("judgement")
    if raw is None:
        return None
    section = expect_object(path, "judgement", raw)
    rule: dict[str, Any] = {}
    for name, value in expect_object(path, "judgement.rule", section.get("rule", {})).items():
        kinds = RULE_FIELDS.get(name)
        if kinds is None:
            continue
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            raise InputError(path, f"judgement.rule.{name}: {value!r:.40} is not what it takes")
        rule[name] = value
    new_slow = section.get("new_slow")
    if new_slow is not None:
        new_slow = expect_seconds(path, "judgement.new_slow", new_slow)
    overrides: dict[str, Override] = {}
    for test, entry in expect_object(
        path, "judgement.overrides", section.get("overrides", {})
    ).items():
        where = f"judgement.overrides[{test!r}]"
        fields = expect_object(path, where, entry)
        numbers = {}
        for name in ("threshold", "min_delta"):
            value = fields.get(name)
            if value is not None:
                numbers[name] = expect_seconds(path, f"{where}.{name}", value)
        ignore = fields.get("ignore", False)
        if not isinstance(ignore, bool):
            raise InputError(path, f"{where}.ignore: expected true or false")
        overrides[test] = Override(numbers.get("threshold"), numbers.get("min_delta"), ignore)
    return JudgedBy(rule, new_slow, overrides)
