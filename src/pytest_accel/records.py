"""Timing records: per-test phases and attempts, per-class and per-module aggregates.

Pure logic: the recorder plugin feeds reports in; ``encode_record`` turns what was seen
into the versioned JSON document described in docs/format.md.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform as python_platform
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
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


def phase_outcome(when: str, outcome: str, wasxfail: bool) -> str:
    """A report's contribution to its test's outcome, as pytest's summary counts it."""
    if when == "???":  # pytest-xdist's report for a test that took its worker down
        return "crashed"
    if outcome == "failed":
        return "failed" if when == "call" else "error"
    if outcome == "skipped":
        return "xfailed" if wasxfail else "skipped"
    return "xpassed" if wasxfail and when == "call" else "passed"


@dataclass(slots=True)
class Attempt:
    outcome: str = "passed"
    setup: float = 0.0
    call: float = 0.0
    teardown: float = 0.0
    complete: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "setup": round(self.setup, 6),
            "call": round(self.call, 6),
            "teardown": round(self.teardown, 6),
        }


@dataclass(slots=True)
class NodeTiming:
    """Everything seen for one node id, over all its attempts."""

    nodeid: str
    class_id: str | None = None
    module_id: str | None = None
    worker: str | None = None
    start: float | None = None
    stop: float | None = None
    attempts: list[Attempt] = field(default_factory=list)

    def add(
        self,
        when: str,
        outcome: str,
        duration: float,
        start: float,
        stop: float,
        *,
        wasxfail: bool = False,
    ) -> None:
        if not self.attempts or self.attempts[-1].complete:
            self.attempts.append(Attempt())
        attempt = self.attempts[-1]
        if when in PHASES:
            setattr(attempt, when, getattr(attempt, when) + duration)
        result = phase_outcome(when, outcome, wasxfail)
        if _RANK[result] > _RANK[attempt.outcome]:
            attempt.outcome = result
        if when in ("teardown", "???"):
            attempt.complete = True
        if start:
            self.start = start if self.start is None else min(self.start, start)
        if stop:
            self.stop = stop if self.stop is None else max(self.stop, stop)

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]

    def to_json(self) -> dict[str, Any]:
        final = self.final
        total = final.setup + final.call + final.teardown
        return {
            "outcome": final.outcome,
            "setup": round(final.setup, 6),
            "call": round(final.call, 6),
            "teardown": round(final.teardown, 6),
            "total": round(total, 6),
            "class": self.class_id,
            "module": self.module_id,
            "worker": self.worker,
            "attempts": [a.to_json() for a in self.attempts],
        }


def aggregate(entries: Iterable[NodeTiming], key: str) -> dict[str, dict[str, float | int]]:
    """``{id: {"tests", "total", "span"}}`` grouped by ``class_id`` or ``module_id``."""
    groups: dict[str, list[NodeTiming]] = {}
    for entry in entries:
        group = getattr(entry, key)
        if group is not None and entry.attempts:
            groups.setdefault(group, []).append(entry)
    result: dict[str, dict[str, float | int]] = {}
    for group, members in groups.items():
        total = sum(m.final.setup + m.final.call + m.final.teardown for m in members)
        starts = [m.start for m in members if m.start is not None]
        stops = [m.stop for m in members if m.stop is not None]
        span = max(stops) - min(starts) if starts and stops else total
        result[group] = {"tests": len(members), "total": round(total, 6), "span": round(span, 6)}
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


def encode_record(entries: Mapping[str, NodeTiming], head: Mapping[str, Any]) -> Iterator[bytes]:
    """The record as JSON chunks, one test at a time.

    Peak memory stays at one test's dict instead of the whole suite's: a 10,000-test
    record would otherwise double the plugin's footprint at the very end of the run.
    """
    import orjson

    seen = [e for e in entries.values() if e.attempts]
    groups = {"classes": aggregate(seen, "class_id"), "modules": aggregate(seen, "module_id")}
    yield orjson.dumps({**head, **groups})[:-1] + b',"tests":{'
    separator = b""
    for entry in seen:
        yield separator + orjson.dumps(entry.nodeid) + b":" + orjson.dumps(entry.to_json())
        separator = b","
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


def framework_versions() -> dict[str, str]:
    """Installed framework versions, read from metadata (never by importing them)."""
    versions: dict[str, str] = {}
    for name in ("jax", "jaxlib", "torch", "torch_xla"):
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            try:
                versions[name] = importlib.metadata.version(name.replace("_", "-"))
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions


def xdist_worker_id() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")
