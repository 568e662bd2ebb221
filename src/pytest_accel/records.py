"""Timing records: per-test phases and attempts, per-class and per-module aggregates.

Pure logic: the recorder plugin feeds reports in; ``encode_record`` turns what was seen
into the versioned JSON document described in docs/format.md.
"""

from __future__ import annotations

import os
import platform as python_platform
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pytest_accel.detection import Detection

RECORD_SCHEMA = "pytest-accel/record"
RECORD_VERSION = 1
PHASES = ("setup", "call", "teardown")
# Outcomes ranked by how bad they are: the worst phase decides an attempt's outcome.
# A failed call outranks the teardown error that may follow it.
_RANK = {
    "passed": 0,
    "skipped": 1,
    "xfailed": 1,
    "xpassed": 1,
    "error": 2,
    "failed": 3,
    "crashed": 4,
}


# A test's final outcome that counts as a failure of the run.
FAILING = frozenset({"failed", "error", "crashed"})


def phase_outcome(when: str, outcome: str, wasxfail: bool) -> str:
    """A report's contribution to its test's outcome, as pytest's summary counts it."""
    if when == "???":  # pytest-xdist's report for a test that took its worker down
        return "crashed"
    if outcome in ("failed", "rerun"):  # "rerun": a failed attempt that is tried again
        return "failed" if when == "call" else "error"
    if outcome == "skipped":
        return "xfailed" if wasxfail else "skipped"
    return "xpassed" if wasxfail and when == "call" else "passed"


AttemptTuple = tuple[str, float, float, float]  # outcome, setup, call, teardown


class TimingTable:
    """Per-test timings in columns, one row per node id.

    A handful of lists instead of several objects per test: on a 10,000-test suite the
    garbage collector would otherwise walk 40,000 more containers on every full pass.
    Earlier attempts (reruns) are kept only for the rows that have them.
    """

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.nodeids: list[str] = []
        self.class_ids: list[str | None] = []
        self.module_ids: list[str | None] = []
        self.workers: list[str | None] = []
        self.paths: list[str | None] = []  # where the test is defined, for annotations
        self.lines: list[int | None] = []  # 1-based
        self.outcomes: list[str] = []
        self.setups: list[float] = []
        self.calls: list[float] = []
        self.teardowns: list[float] = []
        self.starts: list[float] = []
        self.stops: list[float] = []
        # 0: the current attempt has no report yet, 1: it has, 2: it is over (teardown).
        self.attempt_state: list[int] = []
        self.earlier: dict[int, list[AttemptTuple]] = {}

    def __len__(self) -> int:
        return len(self.nodeids)

    def row(self, nodeid: str) -> tuple[int, bool]:
        """The row of ``nodeid`` and whether it was just created."""
        row = self.rows.get(nodeid)
        if row is not None:
            return row, False
        row = self.rows[nodeid] = len(self.nodeids)
        self.nodeids.append(nodeid)
        for column in (self.class_ids, self.module_ids, self.workers, self.paths, self.lines):
            column.append(None)
        self.outcomes.append("passed")
        for numbers in (self.setups, self.calls, self.teardowns, self.starts, self.stops):
            numbers.append(0.0)
        self.attempt_state.append(0)
        return row, True

    def add(
        self,
        row: int,
        when: str,
        outcome: str,
        duration: float,
        *,
        start: float = 0.0,
        stop: float = 0.0,
        wasxfail: bool = False,
    ) -> None:
        """Fold one report in; a report after a finished attempt starts the next one.

        An attempt is over after its teardown, or when a new setup begins: a rerun's
        failed attempt may end without a teardown report (pytest-rerunfailures, and
        this plugin's reruns keep one ``<testcase>`` per test in JUnit XML that way).
        """
        state = self.attempt_state[row]
        if state == 2 or (state == 1 and when == "setup"):
            self.earlier.setdefault(row, []).append(self.attempt(row))
            self.outcomes[row] = "passed"
            self.setups[row] = self.calls[row] = self.teardowns[row] = 0.0
        if when == "call":
            self.calls[row] += duration
        elif when == "setup":
            self.setups[row] += duration
        elif when == "teardown":
            self.teardowns[row] += duration
        if outcome != "passed" or wasxfail or when == "???":  # a passed phase changes nothing
            result = phase_outcome(when, outcome, wasxfail)
            if _RANK[result] > _RANK[self.outcomes[row]]:
                self.outcomes[row] = result
        self.attempt_state[row] = 2 if when in ("teardown", "???") else 1
        if start and (not self.starts[row] or start < self.starts[row]):
            self.starts[row] = start
        self.stops[row] = max(self.stops[row], stop)

    def attempt(self, row: int) -> AttemptTuple:
        return (self.outcomes[row], self.setups[row], self.calls[row], self.teardowns[row])

    def attempts(self, row: int) -> list[AttemptTuple]:
        return [*self.earlier.get(row, ()), self.attempt(row)]

    def total(self, row: int) -> float:
        return self.setups[row] + self.calls[row] + self.teardowns[row]

    def to_json(self, row: int) -> dict[str, Any]:
        return {
            "outcome": self.outcomes[row],
            "setup": self.setups[row],
            "call": self.calls[row],
            "teardown": self.teardowns[row],
            "total": self.total(row),
            "class": self.class_ids[row],
            "module": self.module_ids[row],
            "worker": self.workers[row],
            "attempts": [
                {"outcome": o, "setup": s, "call": c, "teardown": t}
                for o, s, c, t in self.attempts(row)
            ],
        }


def aggregate(table: TimingTable, column: list[str | None]) -> dict[str, dict[str, float | int]]:
    """``{id: {"tests", "total", "span"}}`` grouped by ``table.class_ids`` or ``module_ids``."""
    groups: dict[str, list[int]] = {}
    for row, group in enumerate(column):
        if group is not None:
            groups.setdefault(group, []).append(row)
    result: dict[str, dict[str, float | int]] = {}
    for group, rows in groups.items():
        total = sum(table.total(r) for r in rows)
        starts = [table.starts[r] for r in rows if table.starts[r]]
        stops = [table.stops[r] for r in rows if table.stops[r]]
        span = max(stops) - min(starts) if starts and stops else total
        result[group] = {"tests": len(rows), "total": total, "span": span}
    return result


def env_key(detection: Detection, override: str | None = None) -> str:
    """``platform/device_kind/xN`` (kind omitted when unknown or the platform itself)."""
    if override:
        return override
    parts = [detection.platform]
    if detection.device_kind and detection.device_kind != detection.platform:
        parts.append(detection.device_kind)
    parts.append(f"x{detection.device_count}")
    return "/".join(parts)


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


def utc_timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def xdist_worker_id() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")
