"""A run's finished tests, sent to the store as they finish: what a run killed without
a word (``kill -9``, a node lost, an OOM kill) leaves behind, where no session end
sends its record.

Every few seconds at most, the tests finished since the last sending go up as a new
object beside where the record will be (``<start>-<id>.progress-<n>.jsonl``, one JSON
object a line), from a thread of their own: a slow store never holds up a test.  Once
the record is in the store they are deleted: a run's progress outlives it only where it
never ended, and a reader takes it for what it is, an interrupted run (``store list``,
``report --from``), never a passing one; no baseline folds it.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_accel.outcomes import PHASES
from pytest_accel.store.layout import RunObject

if TYPE_CHECKING:
    import pytest

    from pytest_accel.store.location import Store

EVERY = 5.0  # seconds, at least, between two sendings
PROGRESS = "progress"


def progress_name(run: RunObject, number: int) -> str:
    return f"{run.name.removesuffix('.json')}.{PROGRESS}-{number:05d}.jsonl"


def outcome_of(phases: dict[str, Any]) -> str:
    """A finished test's outcome from its phases' reports, as the record words it."""
    setup, call, teardown = (phases.get(when, {}) for when in ("setup", "call", "teardown"))
    if setup.get("outcome") == "failed":
        return "error"
    if call.get("xfail"):
        return "xpassed" if call.get("outcome") == "passed" else "xfailed"
    if "skipped" in (setup.get("outcome"), call.get("outcome")):
        return "skipped"
    if call.get("outcome") == "failed":
        return "failed"
    if teardown.get("outcome") == "failed":
        return "error"
    return "passed"


@dataclass
class ProgressWriter:
    """Sends a run's finished tests as they finish (``finished``), from a thread."""

    store: Store
    run: RunObject  # the progress's own name: the session's start and a fresh id
    every: float = EVERY
    sent: list[str] = field(default_factory=list)  # the objects in the store
    problem: str | None = None  # why sending stopped, where it did
    _rows: list[bytes] = field(default_factory=list)
    _phases: dict[str, dict[str, Any]] = field(default_factory=dict)
    _last: float = field(default_factory=time.monotonic)
    _number: int = 0  # of the objects handed to the thread
    _queue: queue.Queue[tuple[str, bytes] | None] = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None

    def report(self, report: pytest.TestReport) -> None:
        """A phase's report: a test is finished at its teardown's."""
        phases = self._phases.setdefault(report.nodeid, {})
        phases[report.when] = {
            "outcome": report.outcome,
            "duration": round(report.duration, 6),
            "xfail": hasattr(report, "wasxfail"),
        }
        if report.when != "teardown":
            return
        del self._phases[report.nodeid]
        row = {"test": report.nodeid, "outcome": outcome_of(phases)}
        row.update({when: phases.get(when, {}).get("duration", 0.0) for when in PHASES})
        self._rows.append(json.dumps(row, ensure_ascii=False).encode() + b"\n")
        if time.monotonic() - self._last >= self.every:
            self.flush()

    def flush(self) -> None:
        """Hand the finished tests to the sending thread as one new object."""
        if not self._rows or self.problem is not None:
            return
        self._number += 1
        self._queue.put((progress_name(self.run, self._number), b"".join(self._rows)))
        self._rows.clear()
        self._last = time.monotonic()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._send, name="pytest-accel-progress", daemon=True
            )
            self._thread.start()

    def _send(self) -> None:
        from pytest_accel.store.location import StoreError

        while (item := self._queue.get()) is not None:
            if self.problem is not None:
                continue  # the store failed once: the record's end says so
            name, body = item
            try:
                self.store.put_new(name, body)
            except StoreError as exc:
                self.problem = str(exc)
            else:
                self.sent.append(name)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread once what it was handed is sent (at most ``timeout``)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)

    def remove_sent(self) -> None:
        """The record is in the store: its progress goes (a failure here leaves only
        objects no reader folds)."""
        from pytest_accel.store.location import StoreError

        with contextlib.suppress(StoreError):
            self.store.remove(self.sent)
