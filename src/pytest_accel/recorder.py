"""The ``--perf-record`` / ``--perf-baseline`` feature.

Registered in ``pytest_configure`` only when one of those options is on.  Under
pytest-xdist the workers attach each test's class, module, worker id and ``perf``
marker to its setup report (reports are what xdist sends to the controller); only the
controller compares, warns and writes files.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import ci_output
from pytest_accel.baseline import Baseline, EnvSamples, update_baseline_file
from pytest_accel.detection import Detection
from pytest_accel.options import PerfOptions
from pytest_accel.records import (
    NodeTiming,
    RunInfo,
    aggregate,
    encode_record,
    env_key,
    framework_versions,
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


def perf_mark(item: pytest.Item) -> PerfMark | None:
    mark = item.get_closest_marker("perf")
    if mark is None:
        return None
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


def collect_node_info(items: list[pytest.Item], worker: str | None) -> dict[str, NodeInfo]:
    """Class and module node ids from the collection tree (unittest classes included).

    Done once per collected item, with one tree lookup per parent, instead of in a hook
    that runs for every phase of every test.
    """
    by_parent: dict[int, tuple[str | None, str | None]] = {}
    result: dict[str, NodeInfo] = {}
    for item in items:
        parents = by_parent.get(id(item.parent))
        if parents is None:
            cls = item.getparent(pytest.Class)
            module = item.getparent(pytest.Module)
            parents = (
                cls.nodeid if cls is not None else None,
                module.nodeid if module is not None else None,
            )
            by_parent[id(item.parent)] = parents
        result[item.nodeid] = (*parents, worker, perf_mark(item))
    return result


class NodeInfoSender:
    """In an xdist worker: attach each test's node info to its setup report."""

    def __init__(self) -> None:
        self.info: dict[str, NodeInfo] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.info = collect_node_info(items, xdist_worker_id())

    @pytest.hookimpl(tryfirst=True)  # before xdist serialises the report for the controller
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            setattr(report, NODE_INFO_ATTR, self.info.get(report.nodeid))


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
    ) -> None:
        self.config = config
        self.options = options
        self.detection = detection
        self.baseline = baseline
        self.key = env_key(detection, options.env_key)
        self.entries: dict[str, NodeTiming] = {}
        self.marks: dict[str, PerfMark] = {}
        self.locations: dict[str, ci_output.Location] = {}
        self.workers: set[str] = set()
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit: str | None = None
        self.branch: str | None = None
        self.comparison: Comparison | None = None
        self.write_error: str | None = None
        # Filled at collection when this process runs the tests itself (no xdist).
        self.node_info: dict[str, NodeInfo] = {}

    # --- collecting -------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit, self.branch = vcs_info(os.environ, cwd=str(self.config.rootpath))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self.workers.add(str(node.gateway.id))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.node_info = collect_node_info(items, None)

    def _take_node_info(self, entry: NodeTiming, info: NodeInfo) -> None:
        entry.class_id, entry.module_id, entry.worker, mark = info
        if mark is not None:
            self.marks[entry.nodeid] = mark

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        entry = self.entries.get(nodeid)
        if entry is None:
            entry = self.entries[nodeid] = NodeTiming(nodeid)
            path, line, _ = report.location
            self.locations[nodeid] = ci_output.Location(path, None if line is None else line + 1)
            if nodeid in self.node_info:  # collected in this process
                self._take_node_info(entry, self.node_info[nodeid])
        if entry.worker is None and hasattr(report, "node"):
            # Relayed by xdist: a setup report carries the node info, a crash report does not.
            info = getattr(report, NODE_INFO_ATTR, None)
            if info:
                self._take_node_info(entry, info)
            else:
                entry.worker = str(report.node.gateway.id)
        entry.add(
            report.when or "???",
            report.outcome,
            report.duration,
            getattr(report, "start", 0.0),
            getattr(report, "stop", 0.0),
            wasxfail=hasattr(report, "wasxfail"),
        )

    # --- at the end -------------------------------------------------------------------

    def current_samples(self, test_metric: str = "call") -> EnvSamples:
        """This run's passing timings: tests by ``test_metric``, classes and modules by total.

        A class or module with a test that did not pass is left out: its total would say
        more about the failure than about speed.
        """
        passed = [e for e in self.entries.values() if e.attempts and e.final.outcome == "passed"]
        failing_groups = {
            group
            for e in self.entries.values()
            if e.attempts and e.final.outcome in ("failed", "error", "crashed")
            for group in (e.class_id, e.module_id)
        }
        tests = {
            e.nodeid: [e.final.call if test_metric == "call" else e.to_json()["total"]]
            for e in passed
        }
        samples = EnvSamples(tests=tests)
        for group, key in (("classes", "class_id"), ("modules", "module_id")):
            totals = aggregate(self.entries.values(), key)
            samples.group(group).update(
                {
                    ident: [float(v["total"])]
                    for ident, v in totals.items()
                    if ident not in failing_groups
                }
            )
        return samples

    def _compare(self) -> Comparison | None:
        if self.baseline is None:
            return None
        env = self.baseline.for_key(self.key)
        if env is None:
            return Comparison(self.key, available_envs=sorted(self.baseline.envs))
        now = self.current_samples(env.test_metric)
        overrides = {
            nodeid: Override(threshold, min_delta, ignore)
            for nodeid, (threshold, min_delta, ignore) in self.marks.items()
        }
        return compare(
            self.key,
            {
                g: {i: s[0] for i, s in now.group(g).items()}
                for g in ("tests", "classes", "modules")
            },
            {g: env.group(g) for g in ("tests", "classes", "modules")},
            self.options.rule,
            overrides,
        )

    def _emit_warnings(self, comparison: Comparison) -> None:
        for finding in comparison.regressions:
            location = self.locations.get(finding.id)
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
            shard=None,
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

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Also runs after failures, -x and Ctrl-C: the record is partial but valid.
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
                    encode_record(self.entries, self.record_head(session.exitstatus)),
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
                        [(self.key, self.current_samples())],
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
            elif comparison.available_envs or (
                self.baseline is not None and self.baseline.for_key(self.key) is None
            ):
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
                for line in ci_output.workflow_commands(comparison, self.locations):
                    terminalreporter.write_line(line)
        if self.options.record and self.write_error is None:
            terminalreporter.write_line(
                f"pytest-accel: timing record of {len(self.entries)} test(s) written to"
                f" {self.options.record}"
            )


def load_for_session(options: PerfOptions) -> Baseline | None:
    """Read the baseline up front, so a malformed file stops the run before any test."""
    from pytest_accel.baseline import load_baseline

    if options.baseline is None:
        return None
    if options.update_baseline and not Path(options.baseline).exists():
        return Baseline({})  # created on first use
    try:
        return load_baseline(options.baseline)
    except InputError as exc:
        raise pytest.UsageError(f"--perf-baseline: {exc}") from None
