"""A session's timings in columns: per-test phases and attempts, and the per-class and
per-module aggregates, as the collector folds pytest's reports in."""

from __future__ import annotations

from typing import Any

from pytest_accel.reports import OUTCOME_RANK, phase_outcome

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
            if OUTCOME_RANK[result] > OUTCOME_RANK[self.outcomes[row]]:
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
