"""The timing record (``--perf-record``): written and read only here.

``encode_record`` turns a session's ``TimingTable`` into the versioned JSON document of
docs/format.md; ``load_record`` and ``check_record`` read one back, validated, for the
baseline, ``merge``, ``compare`` and the flaky analysis.
"""

from __future__ import annotations

import os
import platform as python_platform
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_accel.files import (
    InputError,
    all_plausible,
    check_header,
    expect_object,
    expect_seconds,
    finite_number,
    parse_utc_timestamp,
    read_json,
    utc_timestamp,
)
from pytest_accel.hardware.detection import Detection
from pytest_accel.perf.table import TimingTable, aggregate
from pytest_accel.reports import FAILING

RECORD_SCHEMA = "pytest-accel/record"
RECORD_VERSION = 1


# (commit variable, branch variables in order of preference)
_CI_VARIABLES = (
    ("GITHUB_SHA", ("GITHUB_HEAD_REF", "GITHUB_REF_NAME")),
    ("CI_COMMIT_SHA", ("CI_COMMIT_REF_NAME",)),  # GitLab
    ("BUILDKITE_COMMIT", ("BUILDKITE_BRANCH",)),
    ("CIRCLE_SHA1", ("CIRCLE_BRANCH",)),
    ("GIT_COMMIT", ("GIT_BRANCH",)),  # Jenkins
)


def vcs_info(environ: Mapping[str, str], cwd: str | None = None) -> tuple[str | None, str | None]:
    """Commit and branch from CI variables, else from git, else (None, None)."""
    for commit_var, branch_vars in _CI_VARIABLES:
        commit = environ.get(commit_var)
        if commit:
            branch = next((environ[v] for v in branch_vars if environ.get(v)), None)
            return commit, branch
    return _git("rev-parse", "HEAD", cwd=cwd), _git("rev-parse", "--abbrev-ref", "HEAD", cwd=cwd)


def _git(*args: str, cwd: str | None) -> str | None:
    try:
        completed = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    value = completed.stdout.strip()
    if completed.returncode != 0 or not value or value == "HEAD":
        return None
    return value


@dataclass(frozen=True)
class RunInfo:
    started: float
    duration: float
    commit: str | None
    branch: str | None
    shard: str | None
    workers: int
    exitstatus: int


def encode_record(table: TimingTable, head: Mapping[str, Any]) -> Iterator[bytes]:
    """The record as JSON chunks, one test at a time.

    Peak memory stays at one test's dict instead of the whole suite's: a 10,000-test
    record would otherwise double the plugin's footprint at the very end of the run.
    """
    import orjson

    groups = {
        "classes": aggregate(table, table.class_ids),
        "modules": aggregate(table, table.module_ids),
    }
    yield orjson.dumps({**head, **groups})[:-1] + b',"tests":{'
    # Chunks of tests per orjson call: fewer Python-level joins, bounded memory.
    chunk = 1000
    for first in range(0, len(table), chunk):
        rows = range(first, min(first + chunk, len(table)))
        body = orjson.dumps({table.nodeids[r]: table.to_json(r) for r in rows})[1:-1]
        yield (b"," if first else b"") + body
    yield b"}}\n"


def record_head(
    run: RunInfo,
    detection: Detection,
    key: str,
    frameworks: Mapping[str, str],
    pytest_version: str,
) -> dict[str, Any]:
    """Everything in a record but its tests, classes and modules."""
    return {
        "schema": RECORD_SCHEMA,
        "version": RECORD_VERSION,
        "run": {
            "started": utc_timestamp(run.started),
            "duration": round(run.duration, 6),
            "commit": run.commit,
            "branch": run.branch,
            "shard": run.shard,
            "workers": run.workers,
            "exitstatus": run.exitstatus,
        },
        "env": {
            "key": key,
            "platform": detection.platform,
            "device_kind": detection.device_kind,
            "device_count": detection.device_count,
            "python": python_platform.python_version(),
            "pytest": pytest_version,
            "frameworks": dict(frameworks),
        },
    }


# --- reading -------------------------------------------------------------------------

Timings = dict[str, dict[str, float]]  # {"tests"|"classes"|"modules": {id: seconds}}
# (node id, outcome, class id, module id, seconds of the chosen metric)
TestRow = tuple[str, str, str | None, str | None, float]


def passing_timings(
    rows: Iterable[TestRow], group_totals: Mapping[str, Mapping[str, float]]
) -> Timings:
    """A run's timings to compare or fold: passing tests, and the classes and modules
    that hold no failing test (their total says more about the failure than about speed).
    """
    rows = list(rows)
    failing = {
        group
        for _, outcome, cls, module, _ in rows
        if outcome in FAILING
        for group in (cls, module)
        if group
    }
    timings: Timings = {
        "tests": {ident: s for ident, outcome, _, _, s in rows if outcome == "passed"}
    }
    for group, totals in group_totals.items():
        timings[group] = {ident: t for ident, t in totals.items() if ident not in failing}
    return timings


def current_from_record(path: str, data: Mapping[str, Any], test_metric: str = "call") -> Timings:
    """A record's timings (see ``passing_timings``), validated as they are read."""
    rows: list[Any] = []
    for ident, test in expect_object(path, "tests", data.get("tests")).items():
        if type(test) is not dict:
            expect_object(path, f"tests[{ident!r}]", test)  # raises, naming the test
        rows.append(
            (
                ident,
                test.get("outcome"),
                test.get("class"),
                test.get("module"),
                test.get(test_metric),
            )
        )
    values = [row[4] for row in rows if row[1] == "passed"]
    if not (set(map(type, values)) <= {float, int} and all_plausible(values)):
        for ident, outcome, _, _, value in rows:  # find and name the bad one
            if outcome == "passed":
                expect_seconds(path, f"tests[{ident!r}].{test_metric}", value)
    group_totals: dict[str, dict[str, float]] = {}
    for group in ("classes", "modules"):
        group_totals[group] = {
            ident: expect_seconds(
                path,
                f"{group}[{ident!r}].total",
                expect_object(path, f"{group}[{ident!r}]", entry).get("total"),
            )
            for ident, entry in expect_object(path, group, data.get(group, {})).items()
        }
    return passing_timings(rows, group_totals)


def load_record(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """A record file's ``env.key`` and data, validated enough to compare or fold."""
    target = os.fspath(path)
    return record_key(target, read_json(target))


def record_key(target: str, data: Any) -> tuple[str, dict[str, Any]]:
    """Already-parsed record data's ``env.key``, checked as ``load_record`` does."""
    check_header(
        target, data, schema=RECORD_SCHEMA, supported=RECORD_VERSION, what="a pytest-accel record"
    )
    env = expect_object(target, "env", data.get("env"))
    key = env.get("key")
    if not isinstance(key, str) or not key:
        raise InputError(target, f"env.key: expected a non-empty string, got {key!r}")
    expect_object(target, "tests", data.get("tests"))
    return key, data  # the tests are validated as they are read (samples_from_record)


def check_record(path: str, data: Any) -> dict[str, Any]:
    """Enough validation to merge: the header as ``record_key`` checks it, then run and
    every test, class and module."""
    _, record = record_key(path, data)
    if not isinstance(record.get("run"), dict):
        raise InputError(path, "run: expected an object")
    tests = record["tests"]
    if not all(type(test) is dict for test in tests.values()):
        nodeid = next(n for n, t in tests.items() if type(t) is not dict)
        raise InputError(path, f"tests[{nodeid!r}]: expected an object")
    fields = ("setup", "call", "teardown", "total")
    values = [test.get(name) for test in tests.values() for name in fields]
    if not (set(map(type, values)) <= {float, int} and all_plausible(values)):
        for nodeid, test in tests.items():  # find and name the bad one
            for name in fields:
                value = test.get(name)
                if not finite_number(value) or value < 0:
                    raise InputError(
                        path, f"tests[{nodeid!r}].{name}: expected seconds, got {value!r}"
                    )
    for section in ("classes", "modules"):
        for group, value in expect_object(path, section, record.get(section, {})).items():
            entry = expect_object(path, f"{section}[{group!r}]", value)
            for name in ("tests", "total", "span"):
                if not finite_number(entry.get(name)) or entry[name] < 0:
                    raise InputError(
                        path,
                        f"{section}[{group!r}].{name}: expected a number, got {entry.get(name)!r}",
                    )
    started(path, record)
    return record


def started(path: str, data: Mapping[str, Any]) -> float:
    """A validated record's ``run.started`` as a POSIX time."""
    run = data.get("run")
    return parse_utc_timestamp(
        path, "run.started", run.get("started") if isinstance(run, dict) else None
    )
