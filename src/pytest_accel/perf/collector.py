"""What a session's tests took: every report added to a ``TimingTable``.

Reports are read once, at session end, from the terminal reporter, which keeps them
all (``reports.report_stats``), and folded in the order they happened.  Full garbage
collections are placed in the call phase they started in (``perf.pauses``).  Under
pytest-xdist the workers attach each test's class, module, worker id and ``perf``
marker to its setup report (reports are what xdist sends to the controller).
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice, repeat
from typing import TYPE_CHECKING, Any

import pytest

from pytest_accel.outcomes import (
    MEASURES_ATTR,
    OUTCOME_RANK,
    PLATFORM_SKIP_PROPERTY,
    QUARANTINED_ATTR,
    RERUN_TEARDOWN_ATTR,
    Parents,
    is_subtest,
    phase_outcome,
    test_id,
    test_ids,
)
from pytest_accel.perf.compiles import WORKEROUTPUT_PROBLEM
from pytest_accel.perf.device_memory import WORKEROUTPUT_MEMORY_PROBLEM
from pytest_accel.perf.meters import call_driver, put_kept
from pytest_accel.perf.model.table import TimingTable
from pytest_accel.perf.pauses import WORKEROUTPUT_PAUSES, Pause, attribute, pauses_key
from pytest_accel.perf.waits import WORKEROUTPUT_THREADS
from pytest_accel.reports import (
    node_parents,
    parent_runs,
    parents_of,
    report_stats,
    reports_are_relayed,
    xdist_worker_id,
)

if TYPE_CHECKING:
    from pytest_accel.perf.compiles import CompileCounter
    from pytest_accel.perf.device_memory import DeviceMemoryMeter
    from pytest_accel.perf.waits import ThreadsWait

# The report attribute that carries collection-tree facts from a worker to the controller.
NODE_INFO_ATTR = "pytest_accel_node"

# (class node id, module node id, xdist worker, perf marker as (threshold, min_delta,
# ignore) or None): plain tuples, which cross xdist's channel as they are.
PerfMark = tuple[float | None, float | None, bool]
NodeInfo = tuple[str | None, str | None, str | None, PerfMark | None]


def perf_mark(item: pytest.Item, mark: pytest.Mark) -> PerfMark:
    """A ``perf(...)`` mark's values, validated (a usage error naming the test)."""
    extra = set(mark.kwargs) - {"threshold", "min_delta", "ignore"}
    threshold, min_delta = mark.kwargs.get("threshold"), mark.kwargs.get("min_delta")
    ignore = mark.kwargs.get("ignore", False)
    problems = []
    if mark.args or extra:
        problems.append("takes only threshold=, min_delta= and ignore=")
    if threshold is not None and (not isinstance(threshold, (int, float)) or threshold < 1):
        problems.append(f"threshold must be a number >= 1, got {threshold!r}")
    if min_delta is not None and (not isinstance(min_delta, (int, float)) or min_delta < 0):
        problems.append(f"min_delta must be a number >= 0, got {min_delta!r}")
    if not isinstance(ignore, bool):
        problems.append(f"ignore must be True or False, got {ignore!r}")
    if problems:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.perf {'; '.join(problems)}")
    return (
        None if threshold is None else float(threshold),
        None if min_delta is None else float(min_delta),
        ignore,
    )


@dataclass
class CollectedNodes:
    """What the collection tree says about each test, computed once per session."""

    # One shared (class, module) tuple per parent node, not one object per test.
    parents: dict[str, Parents] = field(default_factory=dict)
    marks: dict[str, PerfMark] = field(default_factory=dict)  # only tests that have one

    def info(self, nodeid: str, worker: str | None) -> NodeInfo | None:
        parents = self.parents.get(nodeid)
        if parents is None:
            return None
        return (*parents, worker, self.marks.get(nodeid))


def collect_nodes(items: list[pytest.Item]) -> CollectedNodes:
    """Class and module node ids and ``perf`` marks, a run of one parent node's tests at
    a time (``reports.parent_runs``): a parent is looked up once, and only a test with
    marks of its own is looked at alone."""
    nodeids = test_ids(list(map(_NODEID, items)))
    nodes = CollectedNodes()
    known: dict[int, tuple[Parents, PerfMark | None]] = {}
    at = 0
    for parent, tests in parent_runs(items):
        ids = nodeids[at : at + len(tests)]
        at += len(tests)
        found = known.get(id(parent))
        if found is None:
            mark = parent.get_closest_marker("perf") if parent is not None else None
            inherited = perf_mark(tests[0], mark) if mark is not None else None
            found = known[id(parent)] = (parents_of(parent), inherited)
        nodes.parents.update(zip(ids, repeat(found[0])))
        if found[1] is not None:
            nodes.marks.update(zip(ids, repeat(found[1])))
        for item in filter(_OWN_MARKERS, tests):
            own = next((m for m in item.own_markers if m.name == "perf"), None)
            if own is not None:
                nodes.marks[test_id(item.nodeid)] = perf_mark(item, own)
    return nodes


Deselected = dict[str, dict[str, int]]  # {"classes"|"modules": {id: tests deselected}}
WORKEROUTPUT_DESELECTED = "pytest_accel_deselected"


def count_deselected(items: list[pytest.Item], into: Deselected) -> None:
    """Add the deselected ``items`` to their class's and module's counts: those groups
    did not run whole here (``-k``, ``-m``, ``--accel-only``, another shard)."""
    for cls, module in node_parents(items).values():
        for section, group in (("classes", cls), ("modules", module)):
            if group is not None:
                counts = into.setdefault(section, {})
                counts[group] = counts.get(group, 0) + 1


class NodeInfoSender:
    """In an xdist worker: attach each test's node info to its setup report, and tell
    the controller what this worker's collection deselected."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.nodes = CollectedNodes()
        self.worker = xdist_worker_id()
        self.deselected: Deselected = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.nodes = collect_nodes(items)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        count_deselected(items, self.deselected)

    def pytest_sessionfinish(self) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKEROUTPUT_DESELECTED] = self.deselected

    @pytest.hookimpl(tryfirst=True)  # before xdist serialises the report for the controller
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            info = self.nodes.info(test_id(report.nodeid), self.worker)
            setattr(report, NODE_INFO_ATTR, info)


class ResultsCollector:
    """Runs in the process that owns the session and folds its reports into a table."""

    def __init__(
        self,
        config: pytest.Config,
        counter: CompileCounter | None = None,
        meter: DeviceMemoryMeter | None = None,
        threads: ThreadsWait | None = None,
    ) -> None:
        self.config = config
        self.threads = threads  # this process's threads' waits, where tests run here
        self.workers_threads: list[tuple[float, float]] = []  # ... each xdist worker's
        self.counter = counter  # this process's compile listener, where tests run here
        self.meter = meter  # ... and its device memory meter
        self.compile_problems: set[str] = set()  # an xdist worker's, from its output
        self.memory_problems: set[str] = set()
        self.table = TimingTable()
        self.marks: dict[str, PerfMark] = {}
        self.workers: set[str] = set()
        # Filled at collection when this process runs the tests itself (no xdist).
        self.nodes = CollectedNodes()
        self.stats: dict[str, list[Any]] = {}
        self.complete = False
        self.relayed = reports_are_relayed(config)
        self.deselected: Deselected = {}
        # Full collections per process (None: this one, serial), matched to tests at the end.
        self.pauses: dict[str | None, list[Pause]] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.stats = report_stats(self.config)

    def threads_wait(self) -> tuple[float, float] | None:
        """Seconds the threads of the processes that ran the tests ran and waited for a
        CPU: this process's, or every worker's summed; None where not measured."""
        if self.workers_threads:
            return (
                sum(ran for ran, _ in self.workers_threads),
                sum(waited for _, waited in self.workers_threads),
            )
        return None if self.threads is None else self.threads.measured

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self.workers.add(str(node.gateway.id))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.nodes = collect_nodes(items)
        self.marks = self.nodes.marks

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        count_deselected(items, self.deselected)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: every worker collects (and deselects) the same tests; take the counts
        of any that reported them."""
        output = getattr(node, "workeroutput", {})
        if output.get(WORKEROUTPUT_PROBLEM):
            self.compile_problems.add(str(output[WORKEROUTPUT_PROBLEM]))
        if output.get(WORKEROUTPUT_MEMORY_PROBLEM):
            self.memory_problems.add(str(output[WORKEROUTPUT_MEMORY_PROBLEM]))
        threads = output.get(WORKEROUTPUT_THREADS)
        if threads:
            self.workers_threads.append((float(threads[0]), float(threads[1])))
        pauses = output.get(WORKEROUTPUT_PAUSES)
        if pauses:
            self.pauses[str(node.gateway.id)] = [(float(t), float(s)) for t, s in pauses]
        counts = output.get(WORKEROUTPUT_DESELECTED) or {}
        for section, groups in counts.items():
            mine = self.deselected.setdefault(section, {})
            for group, count in groups.items():
                mine[group] = max(mine.get(group, 0), count)

    def compile_problem(self) -> str | None:
        """Why this run's compilation was not measured, where JAX's monitoring failed."""
        problems = set(self.compile_problems)
        if self.counter is not None:
            problems.update(self.counter.problems())
        return "; ".join(sorted(problems)) or None

    def memory_problem(self) -> str | None:
        """Why device memory was not measured, where a framework failed to answer."""
        problems = set(self.memory_problems)
        if self.meter is not None and self.meter.problem is not None:
            problems.add(self.meter.problem)
        return "; ".join(sorted(problems)) or None

    def _take_node_info(self, row: int, info: NodeInfo) -> None:
        table = self.table
        table.class_ids[row], table.module_ids[row], table.workers[row], mark = info
        if mark is not None:
            self.marks[table.nodeids[row]] = mark

    def add_report(self, report: pytest.TestReport, row: int | None = None) -> None:
        """Add one report (one phase of one attempt of one test) to the table."""
        table = self.table
        if row is None:
            row = self._new_row(report)
        if self.relayed and table.workers[row] is None and hasattr(report, "node"):
            # Relayed by xdist: a setup report carries the node info, a crash report does not.
            info = getattr(report, NODE_INFO_ATTR, None)
            if info:
                self._take_node_info(row, info)
            else:
                table.workers[row] = str(report.node.gateway.id)
        quarantined = getattr(report, QUARANTINED_ATTR, None)
        if quarantined is not None:
            table.quarantined.add(row)
        measured = getattr(report, MEASURES_ATTR, None) or _NOTHING_MEASURED
        compiles = measured.get("compiles")
        if compiles is not None:
            table.add_compilation(row, compiles)
        recompiling = measured.get("recompiling")
        if recompiling is not None and len(recompiling) in (4, 5):
            table.recompiling[row] = recompiling
        peaks = measured.get("device_memory")
        if peaks:
            table.add_device_memory(row, peaks)
        if report.skipped:
            reason = next(
                (v for k, v in report.user_properties if k == PLATFORM_SKIP_PROPERTY), None
            )
            if reason is not None:
                table.platform_skips[row] = str(reason)
        table.add(
            row,
            report.when or "???",
            quarantined or report.outcome,
            report.duration,
            start=getattr(report, "start", 0.0),
            stop=getattr(report, "stop", 0.0),
            wasxfail=quarantined is None and hasattr(report, "wasxfail"),
            compiling=measured.get("compile_seconds"),
            waited=measured.get("cpu_wait"),
        )
        rerun_teardown = getattr(report, RERUN_TEARDOWN_ATTR, None)
        if rerun_teardown:
            table.teardowns[row] += rerun_teardown

    def session_table(self, interrupted: bool = False) -> TimingTable:
        """The table with every report of the session in it (added once, at the end);
        of an ``interrupted`` session, the test that was running said so."""
        if self.complete:
            return self.table
        self.complete = True
        gathered = gather_reports(self.stats)
        self._put_kept_figures(gathered)
        collections = self.config.stash.get(pauses_key, None)
        if not self.relayed and collections is not None and collections.pauses:
            self.pauses[None] = collections.pauses
        rows = self._fold_gathered(gathered)
        if rows is None:  # two ids written alike, or rows made before: every report in order
            reports = gathered.every_report()
            _chronological(reports)
            rows = self._fold(reports)
        self._fold_subtests(gathered.subtests, rows)
        if self.pauses and gathered.order is not None and list(self.pauses) == [None]:
            self._place_serial_pauses(gathered, gathered.order, rows)
        elif self.pauses:  # placed in the phases in order
            reports = gathered.every_report()
            self._place_pauses(reports, _chronological(reports), rows)
        if interrupted:
            self.table.mark_interrupted()
        return self.table

    def _put_kept_figures(self, gathered: GatheredReports) -> None:
        """The calls' figures this process kept (``meters.CallDriver.take_kept``), each
        for the call report whose start and stop hold its moment (a call never reported,
        interrupted, has none).  The CPU wait alone of a test whose phases are folded
        from the phases' dicts goes straight into its column (``kept_waits``), where no
        plain report carries figures of its own; any other is put on its report, and a
        test whose figures are more than the CPU wait is folded report by report, as
        one whose report carried them would be."""
        driver = call_driver(self.config)
        if driver is None or not driver.kept:
            return
        setups, calls, teardowns = gathered.phases
        slow = gathered.slow
        # Where a plain report carries figures of its own (relayed from some call on,
        # or a conftest's), every kept one joins it on its report: one column source.
        straight = None if gathered.measured else gathered.kept_waits
        plain = _PLAIN_MEASURES.issuperset
        left: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
        for nodeid, at, figures in driver.take_kept():
            report = calls.get(nodeid)
            if report is not None and report.start <= at <= report.stop:
                # Folded from the dicts (``slow_tests``): its three phases there, alone.
                if (
                    plain(figures)
                    and nodeid in setups
                    and nodeid in teardowns
                    and nodeid not in slow
                ):
                    if straight is None:
                        put_kept(report, figures)
                    else:
                        straight[nodeid] = figures["cpu_wait"]
                    continue
                slow.add(nodeid)  # folded report by report, as it would be with its figures
                put_kept(report, figures)
                continue
            left.setdefault(nodeid, []).append((at, figures))
        if not left:
            return
        # A rerun's attempts, a failed call: among the reports not folded from the dicts.
        for report in gathered.others:
            kept = left.get(report.nodeid) if report.when == "call" else None
            for at, figures in kept or ():
                if report.start <= at <= report.stop:
                    put_kept(report, figures)
                    if not plain(figures):
                        slow.add(report.nodeid)

    def _fold_gathered(self, gathered: GatheredReports) -> dict[str, int] | None:
        """Fold the session's reports as ``_fold`` would fold them in order: the tests
        whose three phases each passed once with nothing attached (nearly all of a run)
        column by column from the phases' dicts, with C-level maps; the others report by
        report, in order, into rows made with theirs.  Rows are in the order the tests
        started.  None, folding nothing, where that cannot be done (``_fold`` can)."""
        table = self.table
        if table.rows:
            return None
        setups, calls, teardowns = gathered.phases
        slow = gathered.slow_tests()
        # A report left in a phase's dict is moved with the rest of its test's.
        moved = gathered.others
        moved += [
            report
            for nodeid in slow
            for phase in gathered.phases
            if (report := phase.pop(nodeid, None)) is not None
        ]
        _chronological(moved)
        first: dict[str, pytest.TestReport] = {}  # each slow test's first report
        for report in moved:
            first.setdefault(report.nodeid, report)
        # Rows in the order ``_fold`` makes them, the order the tests started: a test
        # that ran once and passed at its setup's start (pytest reads its clock in phase
        # order), a slow one at its first report's (a crash report alone, no start: last).
        order, starts, firsts = _in_start_order(
            (list(setups), list(map(_START, setups.values())), list(setups.values())),
            (list(first), [r.start or math.inf for r in first.values()], list(first.values())),
        )
        keys = test_ids(order)
        if keys is not order and len(set(keys)) != len(keys):
            return None
        table.add_rows(keys, firsts, self.nodes.parents)
        gathered.order = order
        del firsts
        rows = table.rows if keys is order else dict(zip(order, range(len(order)), strict=True))

        def measured() -> Iterator[dict[str, Any]]:  # each call's meters' figures
            in_call = map(calls.get, order, repeat(_ABSENT))
            return map(getattr, in_call, repeat(MEASURES_ATTR), repeat(_NOTHING_MEASURED))

        waits: Iterable[float] = repeat(0.0, len(order))  # no call carries a figure
        waits_measured = False
        if gathered.measured:
            waits = map(_CPU_WAIT_OR_ZERO, measured())
            waits_measured = any(map(operator.contains, measured(), repeat("cpu_wait")))
        elif gathered.kept_waits:  # the kept CPU waits alone: straight from their dict
            waits = map(gathered.kept_waits.get, order, waits)
            waits_measured = True
        # Each column read straight from the phases' dicts as it is made: lists of the
        # phases' reports in row order would be 0.8 MB each at 100,000 tests.
        table.set_passed_tests(
            setups=map(_DURATION, map(setups.get, order, repeat(_ABSENT))),
            calls=map(_DURATION, map(calls.get, order, repeat(_ABSENT))),
            teardowns=map(_DURATION, map(teardowns.get, order, repeat(_ABSENT))),
            starts=starts,
            stops=map(_STOP, map(teardowns.get, order, repeat(_ABSENT))),
            waits=waits,
            waits_measured=waits_measured,
            done=map(setups.__contains__, order),
        )
        if moved:
            self._fold_in_order(moved, list(map(_NODEID, moved)), rows)
        return rows

    def _fold_subtests(self, subtests: list[pytest.TestReport], rows: dict[str, int]) -> None:
        """A subtest (``self.subTest``, pytest's ``subtests``) is a part of its test's
        call, which its time is in already: only a failing one counts, as the test's
        outcome."""
        table = self.table
        for report in subtests:
            row = rows.get(report.nodeid)
            if row is None or report.outcome == "passed":
                continue
            result = phase_outcome("call", report.outcome, hasattr(report, "wasxfail"))
            if OUTCOME_RANK[result] > OUTCOME_RANK[table.outcomes[row]]:
                table.outcomes[row] = result

    def _place_pauses(
        self, reports: list[pytest.TestReport], starts: list[float], rows: dict[str, int]
    ) -> None:
        """Each full collection out of the phase it started in (``perf.pauses``): one in
        a call is kept apart (``pauses``), one in a setup or teardown leaves its seconds.
        ``reports`` in order, their ``starts``: only the phases a pause is matched to are
        read again (a pass over 30,000 reports costs more than the handful of pauses)."""

        def stop(at: int) -> float:
            return reports[at].stop

        def owner(at: int) -> str:
            return str(reports[at].node.gateway.id)

        for process, pauses in self.pauses.items():
            found = attribute(pauses, starts, stop, owner if self.relayed else None, process)
            self._take_pauses({reports[at]: seconds for at, seconds in found.items()}, rows)

    def _place_serial_pauses(
        self, gathered: GatheredReports, order: list[str], rows: Mapping[str, int]
    ) -> None:
        """The pauses of a run whose tests ran here one after another, each given to the
        phase it started in, as ``_place_pauses`` gives them, without a sort of the
        session's reports (300,000 at 100,000 tests) for a handful of pauses.  The last
        phase to start before a pause is the later of two: of the test that started last
        before it (a bisection in the table's starts: rows are in start order, an
        untimed one last), where that test ran once and passed, its last phase to start
        before the pause; and of the other tests' reports (few, in order), the last."""
        starts = self.table.starts
        timed = len(starts)
        while timed and not starts[timed - 1]:
            timed -= 1
        setups, calls, teardowns = gathered.phases
        slow = [report for report in gathered.others if report.start]  # in order
        slow_starts = list(map(_START, slow))
        found: dict[pytest.TestReport, float] = {}
        for when, seconds in self.pauses[None]:
            began: list[tuple[pytest.TestReport, bool]] = []  # a phase, and if it is slow
            row = bisect.bisect_right(starts, when, 0, timed) - 1
            nodeid = order[row] if row >= 0 else None
            if nodeid in setups:
                phases = (setups[nodeid], calls[nodeid], teardowns[nodeid])
                began += [(phase, False) for phase in phases if phase.start <= when][-1:]
            at = bisect.bisect_right(slow_starts, when) - 1
            if at >= 0:
                began.append((slow[at], True))
            if not began:
                continue
            # As the sort in order would: by start, then phase, a slow test's report last.
            phase = max(began, key=lambda b: (b[0].start, _PHASE_RANK[b[0].when], b[1]))[0]
            if when <= phase.stop:
                found[phase] = found.get(phase, 0.0) + seconds
        self._take_pauses(found, rows)

    def _take_pauses(
        self, found: Mapping[pytest.TestReport, float], rows: Mapping[str, int]
    ) -> None:
        """Each phase's pauses out of its seconds: a call's kept apart, a setup's or a
        teardown's taken from it."""
        table = self.table
        for report, seconds in found.items():
            row = rows[report.nodeid]
            if report.when == "call":
                table.pauses[row] += seconds
            elif report.when == "setup":
                table.setups[row] = max(table.setups[row] - seconds, 0.0)
            elif report.when == "teardown":
                table.teardowns[row] = max(table.teardowns[row] - seconds, 0.0)

    def _fold(self, reports: list[pytest.TestReport]) -> dict[str, int]:
        """Add ``reports`` in the order they happened; each node id's row.  A passed
        phase with nothing attached but its CPU wait (``_PLAIN_FIELDS``) is folded from
        its fields, read with C-level maps; any other through ``add_report``."""
        nodeids = list(map(_NODEID, reports))  # a property on pytest 9: read once
        rows = self._rows(nodeids, reports)
        self._fold_in_order(reports, nodeids, rows)
        return rows

    def _fold_in_order(
        self, reports: list[pytest.TestReport], nodeids: list[str], rows: Mapping[str, int]
    ) -> None:
        """Fold ``reports`` (in order, their ``nodeids``) into their ``rows``."""

        def other(index: int) -> None:
            self.add_report(reports[index], rows[nodeids[index]])

        def measured() -> Iterator[dict[str, Any]]:  # read twice, never held as a list
            return map(getattr, reports, repeat(MEASURES_ATTR), repeat(_NOTHING_MEASURED))

        # Read as the loop goes: a list per field would add 2.4 MB each at 100,000 tests,
        # at the end of the run, where its peak memory is.
        self.table.add_passed_phases(
            map(rows.__getitem__, nodeids),
            whens=map(_WHEN, reports),
            durations=map(_DURATION, reports),
            starts=map(getattr, reports, repeat("start"), repeat(0.0)),
            stops=map(getattr, reports, repeat("stop"), repeat(0.0)),
            waits=map(_CPU_WAIT, measured()),
            plain=map(
                operator.and_,
                map(
                    operator.and_,
                    map(_PLAIN_FIELDS.issuperset, map(vars, reports)),
                    map(_PLAIN_MEASURES.issuperset, measured()),
                ),
                map(operator.eq, map(_OUTCOME, reports), repeat("passed")),
            ),
            other=other,
        )

    def _rows(self, nodeids: list[str], reports: list[pytest.TestReport]) -> dict[str, int]:
        """Each report's node id -> its table row.  The tests new to the table get rows
        in the order they first reported, made together (``TimingTable.add_rows``)."""
        table = self.table
        order = list(dict.fromkeys(nodeids))
        # The first report of each test: a dict keeps the last value given to a key.
        first = dict(zip(reversed(nodeids), reversed(reports), strict=True))
        keys = test_ids(order)
        if table.rows or len(set(keys)) != len(keys):  # two ids written alike: one by one
            return {nodeid: self._new_row(first[nodeid]) for nodeid in order}
        table.add_rows(keys, list(map(first.__getitem__, order)), self.nodes.parents)
        if keys is order:  # every id as pytest wrote it: the table's own index will do
            return table.rows
        return dict(zip(order, range(len(order)), strict=True))

    def _new_row(self, report: pytest.TestReport) -> int:
        table = self.table
        nodeid = test_id(report.nodeid)
        row, new = table.row(nodeid)
        if new:
            table.located[row] = report
            parents = self.nodes.parents.get(nodeid)  # collected in this process
            if parents is not None:
                table.class_ids[row], table.module_ids[row] = parents
        return row


_NODEID = operator.attrgetter("nodeid")
_OWN_MARKERS = operator.attrgetter("own_markers")
_OUTCOME = operator.attrgetter("outcome")
_WHEN = operator.attrgetter("when")
_DURATION = operator.attrgetter("duration")
# What a ``TestReport`` holds of its own (pytest 8; pytest 9 keeps its node id as
# ``_id``), and the meters' figures where they are the CPU wait alone.  A report with any
# other field or figure (xdist's, a rerun's, ours: quarantine, compilations, memory;
# ``wasxfail``) is folded by ``add_report``, which reads them.  A field a later pytest
# adds sends its reports there too: slower, never wrong.
_PLAIN_FIELDS = frozenset(
    {
        "nodeid",
        "_id",
        "location",
        "keywords",
        "outcome",
        "longrepr",
        "when",
        "user_properties",
        "sections",
        "duration",
        "start",
        "stop",
        MEASURES_ATTR,
    }
)
_PLAIN_MEASURES = frozenset({"cpu_wait"})  # of the meters' figures, the only one folded so


def _bare_report_size() -> int:
    """How many fields pytest gives a test report with nothing attached.
    ``TestReport.__init__`` sets every one of them, so a report with that many has no
    other: ``len`` tells it for about 100 instructions, where checking each field
    against ``_PLAIN_FIELDS`` takes 1,700 (29,400 reports at 10,000 tests).  0 where
    this pytest gives a field ``_PLAIN_FIELDS`` lacks: every report checked field by
    field (slower, never wrong)."""
    fields = vars(pytest.TestReport("t.py::t", ("t.py", 0, "t"), {}, "passed", None, "call"))
    return len(fields) if _PLAIN_FIELDS.issuperset(fields) and MEASURES_ATTR not in fields else 0


_BARE_REPORT_SIZE = _bare_report_size()
_NOTHING_MEASURED: dict[str, Any] = {}  # never written to
_CPU_WAIT = operator.methodcaller("get", "cpu_wait")
_CPU_WAIT_OR_ZERO = operator.methodcaller("get", "cpu_wait", 0.0)
_START = operator.attrgetter("start")
_STOP = operator.attrgetter("stop")


def _chronological(reports: list[pytest.TestReport]) -> list[float]:
    """Sort the reports in the order the phases happened: by start time, a tie in
    phase order; xdist's crash reports (no start) last.  In place, by a C-level key:
    a 10,000-test run has 30,000 reports, and a tuple per report is 3 MB.  Returns
    the starts of those that have one (they come first), in order."""
    reports.sort(key=_START)
    starts = list(map(_START, reports))
    if any(map(operator.eq, starts, islice(starts, 1, None))):  # one clock reading, two phases
        reports.sort(key=lambda r: (r.start, _PHASE_RANK[r.when]))
    untimed = starts.count(0.0)  # no start (a crash report): they sorted first, go last
    reports[:] = reports[untimed:] + reports[:untimed]
    return starts[untimed:]


Ordered = tuple[list[str], list[float], list[pytest.TestReport]]  # ids, starts, reports


def _in_start_order(fast: Ordered, slow: Ordered) -> Ordered:
    """The tests that ran once and passed (``fast``: ids, starts, setup reports) and the
    others (``slow``: ids, starts, first reports, in start order; no start: infinite)
    in the order they started, as a stable sort of the two would put them; a slow
    test's start as none, for its reports to give.  The fast of a serial run are in order
    and the slow are few: merged by bisection, without the 3.6 MB of a sort's indices at
    100,000 tests, at the run's peak of memory."""
    ids, starts, firsts = fast
    if not all(map(operator.le, starts, islice(starts, 1, None))):
        index = sorted(range(len(ids)), key=starts.__getitem__)
        ids = list(map(ids.__getitem__, index))
        starts = list(map(starts.__getitem__, index))
        firsts = list(map(firsts.__getitem__, index))
    if not slow[0]:
        return ids, starts, firsts
    order: list[str] = []
    order_starts: list[float] = []
    order_firsts: list[pytest.TestReport] = []
    done = 0
    for nodeid, start, report in zip(*slow, strict=True):
        at = bisect.bisect_right(starts, start, done)
        order += [*ids[done:at], nodeid]
        order_starts += [*starts[done:at], 0.0]
        order_firsts += [*firsts[done:at], report]
        done = at
    order += ids[done:]
    order_starts += starts[done:]
    order_firsts += firsts[done:]
    return order, order_starts, order_firsts


class _PhaseRank(dict[str, int]):
    def __missing__(self, key: str) -> int:
        return 3  # "???": after a test's own phases


_PHASE_RANK = _PhaseRank(setup=0, call=1, teardown=2)


# The terminal reporter's categories of passed phases: "" for a setup or a teardown.
_PASSED_CATEGORIES = frozenset({"passed", ""})


@dataclass
class GatheredReports:
    """A session's test reports, read once from the terminal's categories: each passed
    phase with nothing attached, by phase and node id, the first of its kind per test
    (``phases``); every other test report (``others``) and the tests they are of
    (``slow``); subtests' reports apart."""

    phases: tuple[dict[str, pytest.TestReport], ...]
    others: list[pytest.TestReport] = field(default_factory=list)
    slow: set[str] = field(default_factory=set)
    subtests: list[pytest.TestReport] = field(default_factory=list)
    order: list[str] | None = None  # the tests' node ids in row order, once folded
    # A plain phase carries meters' figures (its call's CPU wait): only then are the
    # calls' figures read into a column.
    measured: bool = False
    # The CPU waits this process kept of the tests folded from the phases' dicts, by
    # node id, where no plain phase carries figures (``measured``).
    kept_waits: dict[str, float] = field(default_factory=dict)

    def slow_tests(self) -> set[str]:
        """The tests that cannot be folded from the phases' dicts alone: a report of
        theirs is elsewhere, or a phase of theirs is missing."""
        setups, calls, teardowns = self.phases
        return self.slow | (setups.keys() ^ calls.keys()) | (setups.keys() ^ teardowns.keys())

    def add_other(self, report: pytest.TestReport) -> None:
        """A report that is not a plain passed phase: a subtest's, or one of a slow test."""
        if is_subtest(report):
            self.subtests.append(report)
        else:
            self.others.append(report)
            self.slow.add(report.nodeid)

    def every_report(self) -> list[pytest.TestReport]:
        """Every test report but the subtests', in no order."""
        return [report for phase in self.phases for report in phase.values()] + self.others


def gather_reports(stats: Mapping[str, list[Any]]) -> GatheredReports:
    """The session's test reports out of the terminal's ``stats``, in one loop."""
    setups: dict[str, pytest.TestReport] = {}
    calls: dict[str, pytest.TestReport] = {}
    teardowns: dict[str, pytest.TestReport] = {}
    by_phase = {"setup": setups, "call": calls, "teardown": teardowns}
    gathered = GatheredReports((setups, calls, teardowns))
    others, slow = gathered.others, gathered.slow
    plain, plain_measures = _PLAIN_FIELDS.issuperset, _PLAIN_MEASURES.issuperset
    test_report, bare_size = pytest.TestReport, _BARE_REPORT_SIZE
    for category, group in stats.items():
        if category not in _PASSED_CATEGORIES:
            for report in group:
                if isinstance(report, test_report):
                    gathered.add_other(report)
            continue
        for report in group:
            if type(report) is test_report:
                fields = vars(report)
                if fields.get("outcome") != "passed":
                    gathered.add_other(report)
                    continue
                if len(fields) != bare_size:  # more than pytest's own fields: which?
                    measured = fields.get(MEASURES_ATTR)
                    if not plain(fields) or (measured is not None and not plain_measures(measured)):
                        gathered.add_other(report)
                        continue
                    if measured is not None:
                        gathered.measured = True
                # pytest 8 keeps the id's text; pytest 9 a NodeId that caches it once
                # read (its report's ``nodeid`` is a property, two Python calls): the
                # cache read where it is there.
                nodeid = (
                    fields.get("nodeid")
                    or getattr(fields.get("_id"), "_str_cache", None)
                    or report.nodeid
                )
                phase = by_phase.get(fields.get("when", ""))
                if phase is not None and phase.setdefault(nodeid, report) is report:
                    continue
                others.append(report)  # a rerun's phase, or one of no known phase
                slow.add(nodeid)
            elif isinstance(report, test_report):
                gathered.add_other(report)
    return gathered


class _Absent:
    """A phase a test has no plain report of: nothing to add (its reports are folded
    one by one after)."""

    duration = start = stop = 0.0


_ABSENT = _Absent()
