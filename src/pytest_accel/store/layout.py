"""Where a store keeps what: pure names, no I/O.

Every run writes new objects under names no other run can take, so writers never
conflict and nothing is rewritten in place::

    runs/<hardware key, quoted>/<started, UTC, to the ms>-<run id>[-host<N>].json

Beside each record, ``...<run id>.summary.md`` and ``.annotations.txt`` keep what the
run showed GitHub Actions.  The time comes first so that a listing sorted by name is
sorted by time: the newest runs of a key are the last names.  The key is quoted whole
(``cpu%2Fx1``): a key's ``/`` is not a folder.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

RUNS = "runs"
MAPS = "maps"  # maps/<commit>/<made, UTC, to the ms>-<content hash>.db
SUFFIX = ".json"
_STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z$")
_PROGRESS = re.compile(r"^(.+)\.progress-(\d+)\.jsonl$")
_NAME = re.compile(r"^(\d{8}T\d{6}(?:\.\d{3})?Z)-([0-9A-Za-z]+)(?:-host(\d+))?\.json$")


@dataclass(frozen=True)
class RunObject:
    """One run's record in the store, as its name says."""

    key: str
    started: str  # 20261129T021442.123Z (to the millisecond where the writer knew it)
    run_id: str
    host: int | None = None

    @property
    def name(self) -> str:
        host = "" if self.host is None else f"-host{self.host}"
        return f"{key_folder(self.key)}/{self.started}-{self.run_id}{host}{SUFFIX}"


# Beside a run's record: what the run showed GitHub Actions (``companion``).
SUMMARY = "summary.md"  # its job summary, as a summary file with nothing in it got it
ANNOTATIONS = "annotations.txt"  # its workflow commands, one a line


def companion(run: RunObject, kind: str) -> str:
    """The name of ``kind`` (``SUMMARY``, ``ANNOTATIONS``) beside ``run``'s record: not
    a run's name, so no reader takes it for one."""
    return f"{run.name.removesuffix(SUFFIX)}.{kind}"


def key_folder(key: str) -> str:
    return f"{RUNS}/{quote(key, safe='')}"


def stamp_of(epoch: float) -> str:
    """A run's start as a name's time, to the millisecond: two runs of one second (a
    record's ``run.started`` holds seconds) still sort in the order they started."""
    whole = int(epoch)
    moment = time.strftime("%Y%m%dT%H%M%S", time.gmtime(whole))
    return f"{moment}.{int((epoch - whole) * 1000):03d}Z"


def compact_stamp(started: str) -> str:
    """``2026-11-29T02:14:42Z`` (a record's ``run.started``) as a name's time."""
    found = _STAMP.match(started)
    if found is None:
        raise ValueError(f"not a UTC timestamp: {started!r}")
    year, month, day, hour, minute, second = found.groups()
    return f"{year}{month}{day}T{hour}{minute}{second}Z"


def parse_name(name: str) -> RunObject | None:
    """The run a store object's name (relative to the store) stands for; None for what
    is not a run's record (a writer's temporary file, anything else put there)."""
    parts = name.strip("/").split("/")
    if len(parts) != 3 or parts[0] != RUNS:
        return None
    found = _NAME.match(parts[2])
    if found is None:
        return None
    started, run_id, host = found.groups()
    return RunObject(unquote(parts[1]), started, run_id, None if host is None else int(host))


def newest(objects: Iterable[RunObject], count: int) -> list[RunObject]:
    """The last ``count`` runs by time (ties by id), oldest first."""
    ordered = sorted(objects, key=lambda run: (run.started, run.run_id, run.host or 0))
    return ordered[-count:] if count > 0 else []


def to_prune(
    runs: Iterable[RunObject], keep_runs: int | None, keep_days: float | None, now: float
) -> list[RunObject]:
    """The runs retention deletes: all but the newest ``keep_runs``, and those that
    started more than ``keep_days`` before ``now`` (epoch seconds); the newest run is
    always kept, so a key never loses its whole history."""
    listed = list(runs)
    ordered = newest(listed, len(listed))
    if not ordered:
        return []
    gone: set[RunObject] = set()
    if keep_runs is not None:
        gone.update(ordered[: max(len(ordered) - keep_runs, 0)])
    if keep_days is not None:
        cutoff = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now - keep_days * 86400))
        gone.update(run for run in ordered if run.started[:15] < cutoff)
    gone.discard(ordered[-1])
    return [run for run in ordered if run in gone]


def parse_progress(name: str) -> tuple[RunObject, int] | None:
    """The run a progress object (``store.progress``) belongs to, and its number."""
    folder, _, leaf = name.strip("/").rpartition("/")
    found = _PROGRESS.match(leaf)
    if found is None:
        return None
    run = parse_name(f"{folder}/{found.group(1)}{SUFFIX}")
    return None if run is None else (run, int(found.group(2)))


def map_name(commit: str, made: str, digest: str) -> str:
    """Where a dependency map of ``commit`` goes: a folder per commit, a new object per
    map (its time, then its content's hash), so the newest of a commit is the last."""
    return f"{MAPS}/{commit}/{made}-{digest[:16]}.db"
