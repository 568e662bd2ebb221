"""The ``--perf-record`` / ``--perf-baseline`` feature.

Registered in ``pytest_configure`` only when one of those options is on.  Under
pytest-xdist the workers attach each test's class, module, worker id and ``perf``
marker to its setup report (reports are what xdist sends to the controller); only the
controller compares, warns and writes files.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import ci_output
from pytest_accel.baseline import (
    GROUPS,
    Baseline,
    Timings,
    load_baseline,
    passing_timings,
    samples_of,
    update_baseline_file,
)
from pytest_accel.detection import Detection, framework_versions
from pytest_accel.options import PerfOptions
from pytest_accel.records import (
    RunInfo,
    TimingTable,
    aggregate,
    encode_record,
    env_key,
    record_head,
    vcs_info,
    xdist_worker_id,
)
from pytest_accel.regression import Comparison, Override, PerfRegressionWarning, compare
from pytest_accel.storage import InputError, write_atomic

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


Parents = tuple[str | None, str | None]  # class node id, module node id


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
    """Class and module node ids (unittest classes included) and ``perf`` marks.

    One tree lookup per parent node; a test's own marks are checked directly, its
    parents' once per parent.
    """
    by_parent: dict[int, tuple[Parents, PerfMark | None]] = {}
    nodes = CollectedNodes()
    for item in items:
        parent = item.parent
        cached = by_parent.get(id(parent))
        if cached is None:
            cls = item.getparent(pytest.Class)
            module = item.getparent(pytest.Module)
            parents = (
                cls.nodeid if cls is not None else None,
                module.nodeid if module is not None else None,
            )
            inherited = parent.get_closest_marker("perf") if parent is not None else None
            cached = by_parent[id(parent)] = (
                parents,
                perf_mark(item, inherited) if inherited is not None else None,
            )
        parents, inherited_mark = cached
        nodes.parents[item.nodeid] = parents
        own = next((m for m in item.own_markers if m.name == "perf"), None)
        mark = perf_mark(item, own) if own is not None else inherited_mark
        if mark is not None:
            nodes.marks[item.nodeid] = mark
    return nodes


class NodeInfoSender:
    """In an xdist worker: attach each test's node info to its setup report."""

    def __init__(self) -> None:
        self.nodes = CollectedNodes()
        self.worker = xdist_worker_id()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.nodes = collect_nodes(items)

    @pytest.hookimpl(tryfirst=True)  # before xdist serialises the report for the controller
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            setattr(report, NODE_INFO_ATTR, self.nodes.info(report.nodeid, self.worker))


_PHASES = {"setup": 0, "call": 1, "teardown": 2}


def _chronological(report: pytest.TestReport) -> tuple[float, int]:
    """Reports in the order they happened; xdist's crash reports (no start) come last."""
    start = getattr(report, "start", 0.0) or float("inf")
    return start, _PHASES.get(report.when or "", 3)


class ReportListener:
    """Collects reports as they arrive, for sessions without a terminal reporter."""

    def __init__(self, fold: Callable[[pytest.TestReport], None]) -> None:
        self.fold = fold

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.fold(report)


class PerfPlugin:
    """Runs in the process that owns the session: collects timings, then at the end
    compares them with the baseline, reports, writes the record and updates the baseline.
    """

    def __init__(
        self,
        config: pytest.Config,
        options: PerfOptions,
        detection: Detection,
        baseline: Baseline | None,
        shard: str | None = None,
    ) -> None:
        self.config = config
        self.shard = shard  # "K/N" with --accel-shard
        self.options = options
        self.detection = detection
        self.baseline = baseline
        self.key = env_key(detection, options.env_key)
        self.table = TimingTable()
        self.marks: dict[str, PerfMark] = {}
        self.workers: set[str] = set()
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit: str | None = None
        self.branch: str | None = None
        self.comparison: Comparison | None = None
        self.write_error: str | None = None
        # Filled at collection when this process runs the tests itself (no xdist).
        self.nodes = CollectedNodes()
        self.terminal: Any = None
        # Whether reports may come from xdist workers (the controller's DSession).
        self.relayed = config.pluginmanager.has_plugin("dsession") or bool(
            getattr(config.option, "numprocesses", None) or getattr(config.option, "tx", None)
        )

    # --- collecting -------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit, self.branch = vcs_info(os.environ, cwd=str(self.config.rootpath))
        # The terminal reporter keeps every report (pytest-xdist's relayed ones included):
        # reading them once at the end costs nothing per test.  Without it, listen.
        self.terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.terminal is None:
            self.config.pluginmanager.register(ReportListener(self.fold), "pytest_accel.reports")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self.workers.add(str(node.gateway.id))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.nodes = collect_nodes(items)
        self.marks = self.nodes.marks

    def location(self, nodeid: str) -> ci_output.Location | None:
        row = self.table.rows.get(nodeid)
        path = None if row is None else self.table.paths[row]
        return (
            None if row is None or path is None else ci_output.Location(path, self.table.lines[row])
        )

    def _take_node_info(self, row: int, info: NodeInfo) -> None:
        table = self.table
        table.class_ids[row], table.module_ids[row], table.workers[row], mark = info
        if mark is not None:
            self.marks[table.nodeids[row]] = mark

    def fold(self, report: pytest.TestReport) -> None:
        """Add one report (one phase of one attempt of one test) to the table."""
        nodeid = report.nodeid
        table = self.table
        row, new = table.row(nodeid)
        if new:
            path, line, _ = report.location
            table.paths[row], table.lines[row] = path, None if line is None else line + 1
            parents = self.nodes.parents.get(nodeid)  # collected in this process
            if parents is not None:
                table.class_ids[row], table.module_ids[row] = parents
        if self.relayed and table.workers[row] is None and hasattr(report, "node"):
            # Relayed by xdist: a setup report carries the node info, a crash report does not.
            info = getattr(report, NODE_INFO_ATTR, None)
            if info:
                self._take_node_info(row, info)
            else:
                table.workers[row] = str(report.node.gateway.id)
        table.add(
            row,
            report.when or "???",
            report.outcome,
            report.duration,
            start=getattr(report, "start", 0.0),
            stop=getattr(report, "stop", 0.0),
            wasxfail=hasattr(report, "wasxfail"),
        )

    # --- at the end -------------------------------------------------------------------

    def current_timings(self, test_metric: str = "call") -> Timings:
        """This run's timings to compare or fold (the rule is ``passing_timings``)."""
        table = self.table
        measure = (
            table.calls if test_metric == "call" else [table.total(r) for r in range(len(table))]
        )
        rows = zip(
            table.nodeids, table.outcomes, table.class_ids, table.module_ids, measure, strict=True
        )
        group_totals = {
            group: {i: float(v["total"]) for i, v in aggregate(table, column).items()}
            for group, column in (("classes", table.class_ids), ("modules", table.module_ids))
        }
        return passing_timings(rows, group_totals)

    def _compare(self) -> Comparison | None:
        if self.baseline is None:
            return None
        env = self.baseline.for_key(self.key)
        if env is None:
            return Comparison(self.key, available_envs=sorted(self.baseline.envs))
        overrides = {
            nodeid: Override(threshold, min_delta, ignore)
            for nodeid, (threshold, min_delta, ignore) in self.marks.items()
        }
        return compare(
            self.key,
            self.current_timings(env.test_metric),
            {g: env.group(g) for g in GROUPS},
            self.options.rule,
            overrides,
        )

    def _emit_warnings(self, comparison: Comparison) -> None:
        for finding in comparison.regressions:
            location = self.location(finding.id)
            message = warnings.WarningMessage(
                PerfRegressionWarning(ci_output.describe(finding)),
                PerfRegressionWarning,
                location.path if location else str(self.options.baseline),
                location.line or 0 if location else 0,
            )
            self.config.hook.pytest_warning_recorded.call_historic(
                kwargs={
                    "warning_message": message,
                    "when": "runtest",
                    "nodeid": finding.id if finding.kind == "test" else "",
                    "location": None,
                }
            )

    def _step_summary(self, comparison: Comparison, failing: bool) -> None:
        if not ci_output.in_github_actions():
            return
        try:
            ci_output.append_step_summary(ci_output.markdown(comparison, failing))
        except OSError as exc:
            sys.stderr.write(f"pytest-accel: could not append to GITHUB_STEP_SUMMARY: {exc}\n")

    def record_head(self, exitstatus: int) -> dict[str, Any]:
        run = RunInfo(
            started=self.started,
            duration=time.perf_counter() - self.started_monotonic,
            commit=self.commit,
            branch=self.branch,
            shard=self.shard,
            workers=len(self.workers),
            exitstatus=int(exitstatus),
        )
        head = record_head(run, self.detection, self.key, framework_versions(), pytest.__version__)
        if self.comparison is not None:
            head["comparison"] = self.comparison.to_json()
        return head

    @property
    def failing(self) -> bool:
        return bool(self.options.fail and self.comparison and self.comparison.regressions)

    def _fold_terminal_stats(self) -> None:
        if self.terminal is None:
            return
        reports = [
            report
            for group in self.terminal.stats.values()
            for report in group
            if isinstance(report, pytest.TestReport)
        ]
        reports.sort(key=_chronological)
        for report in reports:
            self.fold(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Also runs after failures, -x and Ctrl-C: the record is partial but valid.
        # What is built here has no reference cycles; a full collection set off by
        # building it would only walk the whole session's objects once more.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._finish(session)
        finally:
            if collecting:
                gc.enable()

    def _finish(self, session: pytest.Session) -> None:
        self._fold_terminal_stats()
        self.comparison = self._compare()
        if self.comparison is not None:
            self._emit_warnings(self.comparison)
            self._step_summary(self.comparison, self.failing)
            if self.failing and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.options.record:
            try:
                write_atomic(
                    self.options.record,
                    encode_record(self.table, self.record_head(session.exitstatus)),
                )
            except OSError as exc:
                self.write_error = f"{self.options.record}: {exc.strerror or exc}"
                sys.stderr.write(
                    f"pytest-accel: could not write the timing record {self.write_error}\n"
                )
        if self.options.update_baseline and self.options.baseline:
            interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
            if not interrupted:  # a cut-short run's timings are not a sample of the suite
                try:
                    update_baseline_file(
                        self.options.baseline,
                        [(self.key, samples_of(self.current_timings()))],
                        self.options.window,
                    )
                except (OSError, InputError) as exc:
                    sys.stderr.write(f"pytest-accel: could not update the baseline: {exc}\n")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        comparison = self.comparison
        if comparison is not None:
            terminalreporter.section("pytest-accel performance", sep="-")
            if (
                self.baseline is not None
                and not self.baseline.envs
                and self.options.update_baseline
            ):
                terminalreporter.write_line(
                    f"perf: no baseline yet; this run starts {self.options.baseline}"
                    f" with timings for {self.key!r}"
                )
            elif self.baseline is not None and self.baseline.for_key(self.key) is None:
                terminalreporter.write_line(
                    ci_output.missing_env_line(comparison, str(self.options.baseline))
                )
            else:
                for row in ci_output.terminal_rows(comparison, self.options.top):
                    terminalreporter.write_line(row, red=row.startswith("REGRESSION"))
                terminalreporter.write_line(
                    ci_output.summary_line(comparison, self.failing),
                    red=bool(comparison.regressions),
                    green=not comparison.regressions,
                )
            if ci_output.in_github_actions():
                # Workflow commands are read from the job's stdout, which is where the
                # terminal writer goes.
                for line in ci_output.workflow_commands(comparison, self.location):
                    terminalreporter.write_line(line)
        if self.options.record and self.write_error is None:
            terminalreporter.write_line(
                f"pytest-accel: timing record of {len(self.table)} test(s) written to"
                f" {self.options.record}"
            )


def load_for_session(options: PerfOptions) -> Baseline | None:
    """Read the baseline up front, so a malformed file stops the run before any test."""
    if options.baseline is None:
        return None
    if options.update_baseline and not Path(options.baseline).exists():
        return Baseline({})  # created on first use
    try:
        return load_baseline(options.baseline)
    except InputError as exc:
        raise pytest.UsageError(f"--perf-baseline: {exc}") from None
