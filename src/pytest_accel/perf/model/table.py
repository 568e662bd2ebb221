"""A session's timings in columns: per-test phases and attempts, and the per-class and
per-module aggregates, as the collector folds pytest's reports in."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, itemgetter, mul
from typing import Any, Protocol

from pytest_accel.outcomes import (
    FAILING,
    OUTCOME_RANK,
    CompileFigures,
    Parents,
    phase_outcome,
    test_id,
)
from pytest_accel.perf.model.runlength import runs
from pytest_accel.perf.model.timings import Groups, first_per_process, whole_groups

AttemptTuple = tuple[str, float, float, float]  # outcome, setup, call, teardown


@dataclass(frozen=True)
class RunCompilation:
    """A run's JAX compilation (the record's ``compilation``): how many, how long, the
    persistent cache's hits and misses, and the share of the tests' time it took."""

    count: int
    seconds: float
    cache_hits: int
    cache_misses: int
    recompiles: int
    trace_seconds: float | None  # None: a record of 0.3, which did not split them
    backend_seconds: float | None
    share: float


# "classes" and "modules": as the comparison sees them, and their columns as written.


@dataclass(frozen=True)
class GroupColumns:
    """A run's classes or modules as its record keeps them and the page ranks them
    (``classes``, ``modules``: written and read by ``perf.formats.record``): each id,
    its tests, the sum of its tests' totals, its span (first start to last stop; its
    total where none was timed), its tests deselected, and whether it ran whole."""

    ids: list[str]
    tests: list[int]
    total: list[float]
    span: list[float]
    deselected: list[int]
    whole: list[bool]


class Located(Protocol):
    """A test's report: where its test is defined, as (path, 0-based line, name)."""

    @property
    def location(self) -> tuple[str, int | None, str]: ...


# The classes and the modules, each as the comparison sees them and as the record keeps them.
GroupSections = dict[str, tuple[Groups, GroupColumns]]
_NO_PARENTS: Parents = (None, None)


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
        # Each row's first report, which says where its test is defined (``location``):
        # read for the few tests an annotation points at, not for every row.
        self.located: list[Located | None] = []
        self.outcomes: list[str] = []
        # Seconds, mostly the reports' own float objects: a list of them is 8 bytes a
        # test, as C doubles would be, and is filled with no conversion of each number
        # (``array("d", ...)`` parsed each, 500 instructions apiece).
        self.setups: list[float] = []
        self.calls: list[float] = []
        self.teardowns: list[float] = []
        self.pauses: list[float] = []  # full garbage collections in the call (perf.pauses)
        self.waits: list[float] = []  # seconds the call waited for a CPU (perf.waits)
        self.waits_measured = False  # where the kernel keeps the figure
        self.starts: list[float] = []
        self.stops: list[float] = []
        # 0: the current attempt has no report yet, 1: it has, 2: it is over (teardown).
        self.attempt_state: list[int] = []
        self.earlier: dict[int, list[AttemptTuple]] = {}
        self.quarantined: set[int] = set()  # rows with a failure a quarantine list covered
        self.platform_skips: dict[int, str] = {}  # rows pytest-accel's markers skipped: why
        # Where JAX is in use, each row's [compilations, seconds, cache hits, misses,
        # recompiles] (perf.compiles), and the seconds of its last attempt's call that
        # were compiling.
        self.compiles: dict[int, CompileFigures] = {}
        self.call_compiles: dict[int, float] = {}
        # Where a row compiled a function more than once: [function, caller, path, line]
        # of the one it compiled most (the meters' ``recompiling``).
        self.recompiling: dict[int, Sequence[Any]] = {}
        # Where a GPU or TPU is in use, each row's peak device memory per device (bytes;
        # the highest of its attempts), and the rows whose figure is a lower bound.
        self.device_memory: dict[int, dict[str, int]] = {}
        self.memory_bounded: set[int] = set()

    def __len__(self) -> int:
        return len(self.nodeids)

    def earlier_seconds(self) -> dict[str, float]:
        """The tests that were rerun: the seconds of their attempts before the last."""
        return {
            self.nodeids[row]: sum(setup + call + teardown for _, setup, call, teardown in tries)
            for row, tries in self.earlier.items()
        }

    def platform_skip_reasons(self) -> dict[str, str]:
        """The tests pytest-accel's markers skipped here, and why."""
        return {self.nodeids[row]: why for row, why in self.platform_skips.items()}

    def add_compilation(self, row: int, tally: Sequence[float]) -> None:
        figures = CompileFigures.of(tally)
        kept = self.compiles.get(row)
        self.compiles[row] = figures if kept is None else kept.plus(figures)

    def add_device_memory(self, row: int, peaks: Sequence[Sequence[Any]]) -> None:
        """A teardown report's ``[[device, bytes, exact], ...]`` (perf.device_memory)."""
        kept = self.device_memory.setdefault(row, {})
        for device, count, exact in peaks:
            if int(count) >= kept.get(str(device), -1):
                kept[str(device)] = int(count)
                if not exact:
                    self.memory_bounded.add(row)

    def device_memory_json(self) -> dict[str, dict[str, int]] | None:
        """Each test's peak per device, or None where no device reported memory."""
        if not self.device_memory:
            return None
        return {self.nodeids[row]: dict(peaks) for row, peaks in self.device_memory.items()}

    def memory_bounds(self) -> list[str]:
        """The tests whose peak is a lower bound (JAX's peak cannot be reset)."""
        return [self.nodeids[row] for row in sorted(self.memory_bounded)]

    def compile_counts(self) -> dict[str, int] | None:
        """Each test's XLA compilations, or None where the suite did not use JAX."""
        if not self.compiles:
            return None
        return {self.nodeids[row]: int(tally.compilations) for row, tally in self.compiles.items()}

    def compile_seconds(self) -> dict[str, float]:
        """Each test's seconds of tracing, lowering and compiling (where JAX is in use)."""
        return {self.nodeids[row]: round(tally.seconds, 6) for row, tally in self.compiles.items()}

    def trace_seconds(self) -> dict[str, float]:
        """Each test's seconds of JAX tracing its Python (where JAX is in use)."""
        return {
            self.nodeids[row]: round(tally.trace_seconds, 6) for row, tally in self.compiles.items()
        }

    def trace_waits(self) -> dict[str, float]:
        """Each test's CPU wait within its tracing, at most, where it was measured."""
        return {
            self.nodeids[row]: round(tally.trace_wait, 6)
            for row, tally in self.compiles.items()
            if tally.trace_wait >= 0
        }

    def call_compile_seconds(self) -> dict[str, float]:
        """The seconds of each test's call that were compiling (where JAX is in use)."""
        return {
            self.nodeids[row]: round(self.call_compiles.get(row, 0.0), 6) for row in self.compiles
        }

    def recompiles(self) -> dict[str, int]:
        """Each test's compilations of a function it had compiled already (JAX in use)."""
        return {self.nodeids[row]: int(tally.recompiles) for row, tally in self.compiles.items()}

    def repeats(self) -> dict[str, int]:
        """Each test's compilations of the function it compiled most, where over one."""
        return {
            self.nodeids[row]: int(tally.repeats)
            for row, tally in self.compiles.items()
            if tally.repeats > 1
        }

    def recompiling_json(self) -> dict[str, dict[str, Any]]:
        """Each test's most compiled function and its caller, where known."""
        fields = ("function", "caller", "path", "line", "count")
        return {
            self.nodeids[row]: dict(zip(fields, found, strict=False))
            for row, found in sorted(self.recompiling.items())
        }

    def compilation(self) -> RunCompilation | None:
        """The run's compilation: how many, how long, the persistent cache's hits and
        misses, and the share of the tests' time it took (None without JAX)."""
        if not self.compiles:
            return None
        run = CompileFigures(0, 0.0, 0, 0, 0)
        for figures in self.compiles.values():
            run = run.plus(figures)
        total = sum(self.totals())
        return RunCompilation(
            int(run.compilations),
            run.seconds,
            int(run.cache_hits),
            int(run.cache_misses),
            int(run.recompiles),
            run.trace_seconds,
            run.backend_seconds,
            run.seconds / total if total > 0 else 0.0,
        )

    def quarantined_failures(self) -> list[str]:
        """The tests whose final outcome is a failure a quarantine list covered."""
        failing = [row for row in sorted(self.quarantined) if self.outcomes[row] in FAILING]
        return [self.nodeids[row] for row in failing]

    def row(self, nodeid: str) -> tuple[int, bool]:
        """The row of ``nodeid`` and whether it was just created."""
        row = self.rows.get(nodeid)
        if row is not None:
            return row, False
        row = self.rows[nodeid] = len(self.nodeids)
        self.nodeids.append(nodeid)
        for column in (self.class_ids, self.module_ids, self.workers, self.located):
            column.append(None)
        self.outcomes.append("passed")
        for numbers in self._seconds_columns():
            numbers.append(0.0)
        self.attempt_state.append(0)
        return row, True

    def add_rows(
        self, nodeids: list[str], located: Sequence[Located], parents: Mapping[str, Parents]
    ) -> None:
        """Rows for ``nodeids`` (``test_id``\\ s, none of them in the table yet), in one
        go: ``located`` are their first reports, ``parents`` the collected (class,
        module) of each.  Column by column with C-level maps, where ``row`` would make
        them one list append at a time."""
        start, count = len(self.nodeids), len(nodeids)
        self.rows.update(zip(nodeids, range(start, start + count), strict=True))
        self.nodeids += nodeids
        known = list(map(parents.get, nodeids, repeat(_NO_PARENTS)))
        self.class_ids += map(itemgetter(0), known)
        self.module_ids += map(itemgetter(1), known)
        self.workers += repeat(None, count)
        self.located += located
        self.outcomes += repeat("passed", count)
        for numbers in self._seconds_columns():
            numbers.extend(repeat(0.0, count))
        self.attempt_state += repeat(0, count)

    def location(self, row: int) -> tuple[str, int | None] | None:
        """Where the test of ``row`` is defined, its line 1-based; None where unknown."""
        located = self.located[row]
        if located is None:
            return None
        path, line, _ = located.location
        return test_id(path), None if line is None else line + 1

    def _seconds_columns(self) -> tuple[list[float], ...]:
        return (
            self.setups,
            self.calls,
            self.teardowns,
            self.pauses,
            self.waits,
            self.starts,
            self.stops,
        )

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
        pause: float = 0.0,
        compiling: float | None = None,
        waited: float | None = None,
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
            self.pauses[row] = self.waits[row] = 0.0
            self.call_compiles.pop(row, None)
        if when == "call":
            self.calls[row] += duration
            self.pauses[row] += pause
            if waited is not None:
                self.waits[row] += waited
                self.waits_measured = True
            if compiling:
                self.call_compiles[row] = self.call_compiles.get(row, 0.0) + compiling
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

    def add_passed_phases(
        self,
        rows: Iterable[int],
        *,
        whens: Iterable[str],
        durations: Iterable[float],
        starts: Iterable[float],
        stops: Iterable[float],
        waits: Iterable[float | None],
        plain: Iterable[bool],
        other: Callable[[int], None],
    ) -> None:
        """Fold phases in the order they happened, as ``add`` would one by one: a
        ``plain`` phase (passed, nothing attached to it but its CPU wait) that goes on
        with its test's attempt here, in one loop; any other through ``other(index)``.
        Nearly every phase of a run is plain, and a call per phase is most of the cost of
        folding 30,000 of them.  The columns are read in step, one phase at a time."""
        state_of, setups, calls, teardowns = (
            self.attempt_state,
            self.setups,
            self.calls,
            self.teardowns,
        )
        firsts, lasts, waited_for = self.starts, self.stops, self.waits
        phases = zip(rows, whens, durations, starts, stops, waits, plain, strict=True)
        for index, (row, when, duration, start, stop, waited, is_plain) in enumerate(phases):
            state = state_of[row]
            if not is_plain or state == 2 or (state == 1 and when == "setup"):
                other(index)  # a new attempt, an outcome, something attached
                continue
            if when == "call":
                calls[row] += duration
                if waited is not None:
                    waited_for[row] += waited
                    self.waits_measured = True
                state_of[row] = 1
            elif when == "setup":
                setups[row] += duration
                state_of[row] = 1
            elif when == "teardown":
                teardowns[row] += duration
                state_of[row] = 2
            else:
                other(index)
                continue
            if start and (not firsts[row] or start < firsts[row]):
                firsts[row] = start
            lasts[row] = max(lasts[row], stop)

    def set_passed_tests(
        self,
        *,
        setups: Iterable[float],
        calls: Iterable[float],
        teardowns: Iterable[float],
        starts: Iterable[float],
        stops: Iterable[float],
        waits: Iterable[float],
        waits_measured: bool,
        done: Iterable[bool],
    ) -> None:
        """Every row's phases at once, in row order, for rows just made (``add_rows``):
        a row ``done`` is a test that ran once and passed, over; any other row is left
        empty, its reports to be added after (``add``, ``add_passed_phases``)."""
        count = len(self.nodeids)
        # One column at a time, each replacing its empty one as it is made: at 100,000
        # tests a column is 0.8 MB, and this is where a run's memory peaks.
        for name, numbers in (
            ("setups", setups),
            ("calls", calls),
            ("teardowns", teardowns),
            ("waits", waits),
            ("starts", starts),
            ("stops", stops),
        ):
            setattr(self, name, list(numbers))
            if len(getattr(self, name)) != count:
                raise ValueError(f"expected {count} rows of {name}")
        self.attempt_state = list(map(mul, done, repeat(2)))
        if len(self.attempt_state) != count:
            raise ValueError(f"expected {count} rows of states")
        self.waits_measured = self.waits_measured or waits_measured

    def mark_interrupted(self) -> None:
        """The run was interrupted: a test whose attempt has reports but no teardown
        was running then, and never finished (its setup report alone said "passed")."""
        for row, state in enumerate(self.attempt_state):
            if state == 1:
                self.outcomes[row] = "interrupted"

    def attempt(self, row: int) -> AttemptTuple:
        return (self.outcomes[row], self.setups[row], self.calls[row], self.teardowns[row])

    def attempts(self, row: int) -> list[AttemptTuple]:
        return [*self.earlier.get(row, ()), self.attempt(row)]

    def total(self, row: int) -> float:
        return self.setups[row] + self.calls[row] + self.teardowns[row]

    def totals(self) -> list[float]:
        return list(map(add, map(add, self.setups, self.calls), self.teardowns))

    def warmup(self) -> list[bool]:
        return first_per_process(self.workers, self.starts)

    def grouped(
        self,
        deselected: Mapping[str, Mapping[str, int]],
        warmup: list[bool],
        totals: list[float],
    ) -> GroupSections:
        """The classes and the modules (``groups``), each once: what the comparison and
        the record read of them.  ``deselected``: ``{"classes"|"modules": {id: n}}``."""
        return {
            "classes": self.groups(self.class_ids, warmup, deselected.get("classes", {}), totals),
            "modules": self.groups(self.module_ids, warmup, deselected.get("modules", {}), totals),
        }

    def groups(
        self,
        column: list[str | None],
        warmup: list[bool],
        deselected: Mapping[str, int],
        totals: list[float] | None = None,
    ) -> tuple[Groups, GroupColumns]:
        """The classes or modules (``column``) as the comparison sees them, and as the
        record writes them: id, tests, total, span, deselected and whole.  ``totals``:
        ``self.totals()``, when the caller has them already."""
        partial = frozenset(g for g, n in deselected.items() if n)
        totals = self.totals() if totals is None else totals
        column_runs = runs(column)  # one pass for both steps below
        groups = whole_groups(
            column, self.outcomes, warmup, totals, partial, column_runs=column_runs
        )
        index = {group: i for i, group in enumerate(groups.ids)}
        tests = [0] * len(groups.ids)
        starts = [0.0] * len(groups.ids)
        stops = [0.0] * len(groups.ids)
        end = 0
        for group, count in zip(*column_runs, strict=True):  # a step per run of tests
            first, end = end, end + count
            if group is None:
                continue
            at = index[group]
            tests[at] += count
            start = min(filter(None, self.starts[first:end]), default=0.0)  # 0: none
            if start and (not starts[at] or start < starts[at]):
                starts[at] = start
            stops[at] = max(stops[at], *self.stops[first:end])
        spans = [
            stop - start if start and stop else total
            for start, stop, total in zip(starts, stops, groups.total, strict=True)
        ]
        outside = [deselected.get(g, 0) for g in groups.ids]
        return groups, GroupColumns(groups.ids, tests, groups.total, spans, outside, groups.whole)

    def attempts_json(self) -> dict[str, list[dict[str, Any]]]:
        """Every attempt of the tests that had more than one (a rerun)."""
        return {
            self.nodeids[row]: [
                {"outcome": o, "setup": round(s, 6), "call": round(c, 6), "teardown": round(t, 6)}
                for o, s, c, t in self.attempts(row)
            ]
            for row in self.earlier
        }
