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
from itertools import chain
from typing import Any

from pytest_accel.files import (
    InputError,
    all_plausible,
    check_header,
    expect_int,
    expect_object,
    expect_seconds,
    expect_text,
    parse_utc_timestamp,
    read_json,
    utc_timestamp,
)
from pytest_accel.hardware.detection import Detection
from pytest_accel.perf.table import TimingTable, aggregate
from pytest_accel.reports import FAILING, OUTCOME_RANK

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


def current_from_record(data: Mapping[str, Any], test_metric: str = "call") -> Timings:
    """A checked record's timings (see ``passing_timings`` and ``check_record``)."""
    tests: dict[str, dict[str, Any]] = data["tests"]
    rows = [
        (ident, test["outcome"], test.get("class"), test.get("module"), test[test_metric])
        for ident, test in tests.items()
    ]
    group_totals = {
        group: {ident: float(entry["total"]) for ident, entry in data.get(group, {}).items()}
        for group in ("classes", "modules")
    }
    return passing_timings(rows, group_totals)


def load_record(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """A record file's ``env.key`` and its data, every field checked."""
    target = os.fspath(path)
    data = check_record(target, read_json(target))
    return data["env"]["key"], data


OUTCOMES = frozenset(OUTCOME_RANK)
_TEST_SECONDS = ("setup", "call", "teardown", "total")
_ATTEMPT_SECONDS = ("setup", "call", "teardown")
_TEST_TEXTS = ("class", "module", "worker")
_NUMBER = {float, int}
_TEXT_OR_NULL = {str, type(None)}


def check_record(path: str, data: Any) -> dict[str, Any]:
    """A record read back, every field of docs/format.md type-checked.

    Unknown fields are ignored (a newer writer may add some); ``class``, ``module``,
    ``worker`` and ``attempts`` may be missing.  A problem is an InputError naming the
    file and the field.  The tests are checked in bulk: a record can hold 100,000.
    """
    what = "a pytest-accel record"
    record = check_header(path, data, schema=RECORD_SCHEMA, supported=RECORD_VERSION, what=what)
    _check_run(path, expect_object(path, "run", record.get("run")))
    _check_env(path, expect_object(path, "env", record.get("env")))
    if record.get("comparison") is not None:
        expect_object(path, "comparison", record["comparison"])
    tests = expect_object(path, "tests", record.get("tests"))
    if not _tests_look_right(tests):
        for ident, entry in tests.items():  # find and name the first bad field
            _check_test(path, f"tests[{ident!r}]", entry)
    for section in ("classes", "modules"):
        for group, value in expect_object(path, section, record.get(section, {})).items():
            where = f"{section}[{group!r}]"
            entry = expect_object(path, where, value)
            expect_int(path, f"{where}.tests", entry.get("tests"), minimum=0)
            expect_seconds(path, f"{where}.total", entry.get("total"))
            expect_seconds(path, f"{where}.span", entry.get("span"))
    return record


def _check_run(path: str, run: Mapping[str, Any]) -> None:
    parse_utc_timestamp(path, "run.started", run.get("started"))
    expect_seconds(path, "run.duration", run.get("duration"))
    for name in ("commit", "branch", "shard"):
        expect_text(path, f"run.{name}", run.get(name), optional=True)
    expect_int(path, "run.workers", run.get("workers", 0), minimum=0)
    expect_int(path, "run.exitstatus", run.get("exitstatus", 0))


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


def _tests_look_right(tests: Mapping[str, Any]) -> bool:
    """Every test well formed, checked a field at a time over all tests at once."""
    entries = list(tests.values())
    if any(type(entry) is not dict for entry in entries):
        return False
    outcomes = [entry.get("outcome") for entry in entries]
    if not (set(map(type, outcomes)) <= {str} and set(outcomes) <= OUTCOMES):
        return False
    seconds = [entry.get(name) for entry in entries for name in _TEST_SECONDS]
    texts = [entry.get(name) for entry in entries for name in _TEST_TEXTS]
    if not (set(map(type, texts)) <= _TEXT_OR_NULL and set(map(type, seconds)) <= _NUMBER):
        return False
    histories = [entry.get("attempts") for entry in entries]
    if not set(map(type, histories)) <= {list, type(None)}:
        return False
    attempts = list(chain.from_iterable(h for h in histories if h))
    if any(type(attempt) is not dict for attempt in attempts):
        return False
    outcomes = [attempt.get("outcome") for attempt in attempts]
    if not (set(map(type, outcomes)) <= {str} and set(outcomes) <= OUTCOMES):
        return False
    seconds += [attempt.get(name) for attempt in attempts for name in _ATTEMPT_SECONDS]
    return set(map(type, seconds)) <= _NUMBER and all_plausible(seconds)


def _check_test(path: str, where: str, value: Any) -> None:
    entry = expect_object(path, where, value)
    _check_outcome(path, f"{where}.outcome", entry.get("outcome"))
    for name in _TEST_SECONDS:
        expect_seconds(path, f"{where}.{name}", entry.get(name))
    for name in _TEST_TEXTS:
        expect_text(path, f"{where}.{name}", entry.get(name), optional=True)
    attempts = entry.get("attempts")
    if attempts is None:
        return
    if not isinstance(attempts, list):
        raise InputError(path, f"{where}.attempts: expected a list, got {type(attempts).__name__}")
    for index, raw in enumerate(attempts):
        attempt = expect_object(path, f"{where}.attempts[{index}]", raw)
        _check_outcome(path, f"{where}.attempts[{index}].outcome", attempt.get("outcome"))
        for name in _ATTEMPT_SECONDS:
            expect_seconds(path, f"{where}.attempts[{index}].{name}", attempt.get(name))


def _check_outcome(path: str, where: str, value: Any) -> None:
    if not isinstance(value, str) or value not in OUTCOMES:
        raise InputError(
            path, f"{where}: expected one of {', '.join(sorted(OUTCOMES))}, got {value!r:.60}"
        )


def started(path: str, data: Mapping[str, Any]) -> float:
    """A checked record's ``run.started`` as a POSIX time."""
    return parse_utc_timestamp(path, "run.started", data["run"]["started"])
