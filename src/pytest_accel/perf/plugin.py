"""The ``--perf-record`` / ``--perf-baseline`` feature's hooks.

Registered in ``pytest_configure`` only when one of those options is on.  In an xdist
worker it only annotates reports; in the process that owns the session it compares,
warns and writes files from what the ``ResultsCollector`` gathered.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import github
from pytest_accel.files import InputError, check_writable, gc_paused, write_atomic
from pytest_accel.hardware.detection import Detection, framework_versions
from pytest_accel.perf import output
from pytest_accel.perf.baseline import (
    GROUPS,
    Baseline,
    load_baseline,
    median_durations,
    samples_of,
    update_baseline_file,
)
from pytest_accel.perf.collector import NodeInfoSender, ResultsCollector
from pytest_accel.perf.options import PerfOptions
from pytest_accel.perf.record import (
    RunInfo,
    Timings,
    encode_record,
    passing_timings,
    record_head,
    vcs_info,
)
from pytest_accel.perf.regression import Comparison, Override, PerfRegressionWarning, compare
from pytest_accel.perf.table import TimingTable, aggregate
from pytest_accel.reports import fail_session, is_xdist_worker, isolated, warn
from pytest_accel.session import durations_key, interrupt_on_sigterm, session_key, shard_key
from pytest_accel.text import one_line


class PerfPlugin:
    """Runs in the process that owns the session: at the end compares the collected
    timings with the baseline, reports, writes the record and updates the baseline.
    """

    def __init__(
        self,
        config: pytest.Config,
        options: PerfOptions,
        detection: Detection,
        baseline: Baseline | None,
        *,
        key: str,
        results: ResultsCollector,
    ) -> None:
        self.config = config
        self.options = options
        self.detection = detection
        self.baseline = baseline
        self.results = results
        self.key = key
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit: str | None = None
        self.branch: str | None = None
        self.comparison: Comparison | None = None
        self.record_written = False

    @property
    def table(self) -> TimingTable:
        return self.results.table

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit, self.branch = vcs_info(os.environ, cwd=str(self.config.rootpath))

    def location(self, nodeid: str) -> github.Location | None:
        row = self.table.rows.get(nodeid)
        path = None if row is None else self.table.paths[row]
        return None if row is None or path is None else github.Location(path, self.table.lines[row])

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
            for nodeid, (threshold, min_delta, ignore) in self.results.marks.items()
        }
        return compare(
            self.key,
            self.current_timings(env.test_metric),
            {g: env.group(g) for g in GROUPS},
            self.options.rule,
            overrides,
        )

    def _emit_warnings(self, session: pytest.Session, comparison: Comparison) -> None:
        """One PerfRegressionWarning per regression, at the test's file and line."""
        escalated = 0
        for finding in comparison.regressions:
            location = self.location(finding.id)
            path = location.path if location else str(self.options.baseline)
            line = location.line if location else None
            if not warn(PerfRegressionWarning(output.describe(finding)), path, line):
                escalated += 1
        if escalated:
            fail_session(session, f"{escalated} PerfRegressionWarning(s) turned into errors by -W")

    def record_head(self, exitstatus: int) -> dict[str, Any]:
        run = RunInfo(
            started=self.started,
            duration=time.perf_counter() - self.started_monotonic,
            commit=self.commit,
            branch=self.branch,
            shard=self.config.stash.get(shard_key, None),
            workers=len(self.results.workers),
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
        # Also after failures, -x and Ctrl-C. What is built here has no reference cycles.
        with gc_paused(), isolated(session, "finish the timing record and comparison"):
            self._finish(session)

    def _finish(self, session: pytest.Session) -> None:
        """Compare, write the record, update the baseline: each isolated from the others."""
        self.results.session_table()
        with isolated(session, "compare the timings with the baseline"):
            self.comparison = self._compare()
            if self.comparison is not None:
                self._report(session, self.comparison)
        if self.options.record:
            with isolated(session, f"write the timing record {self.options.record}"):
                head = self.record_head(session.exitstatus)
                write_atomic(self.options.record, encode_record(self.table, head))
                self.record_written = True
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        # A cut-short run's timings are not a sample of the suite.
        if self.options.update_baseline and self.options.baseline and not interrupted:
            with isolated(session, f"update the baseline {self.options.baseline}"):
                update_baseline_file(
                    self.options.baseline,
                    [(self.key, samples_of(self.current_timings()))],
                    self.options.window,
                )

    def _report(self, session: pytest.Session, comparison: Comparison) -> None:
        self._emit_warnings(session, comparison)
        summary = github.job_summary(self.config)
        if summary is not None:
            summary.add(output.summary_section(comparison, self.failing))
        if self.failing:
            fail_session(session, f"{len(comparison.regressions)} regression(s) with --perf-fail")

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
                    one_line(
                        f"perf: no baseline yet; this run starts {self.options.baseline}"
                        f" with timings for {self.key!r}"
                    )
                )
            elif self.baseline is not None and self.baseline.for_key(self.key) is None:
                terminalreporter.write_line(
                    output.missing_env_line(comparison, str(self.options.baseline))
                )
            else:
                for row in output.terminal_rows(comparison, self.options.top):
                    terminalreporter.write_line(row, red=row.startswith("REGRESSION"))
                terminalreporter.write_line(
                    output.summary_line(comparison, self.failing),
                    red=bool(comparison.regressions),
                    green=not comparison.regressions,
                )
            if github.in_github_actions():
                # Workflow commands are read from the job's stdout, which is where the
                # terminal writer goes.
                for line in output.workflow_commands(comparison, self.location):
                    terminalreporter.write_line(line)
        if self.record_written:
            terminalreporter.write_line(
                one_line(
                    f"pytest-accel: timing record of {len(self.table)} test(s) written to"
                    f" {self.options.record}"
                )
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


def register_feature(config: pytest.Config, options: PerfOptions) -> None:
    facts = config.stash[session_key]
    if options.baseline is not None:
        _publish_durations(config, options, facts.key)
    if is_xdist_worker(config):
        # Workers only annotate reports; the controller compares and writes.
        config.pluginmanager.register(NodeInfoSender(), "pytest_accel:node_info")
        return
    outputs = [("--perf-record", options.record)]
    if options.update_baseline:
        outputs.append(("--perf-baseline", options.baseline))
    for flag, path in outputs:
        if path:
            try:
                check_writable(path)
            except InputError as exc:
                raise pytest.UsageError(f"{flag}: {exc}") from None
    github.job_summary(config)  # checked before any test runs
    interrupt_on_sigterm(config)
    baseline = config.stash[baseline_key] = load_for_session(options)
    results = ResultsCollector(config)
    config.pluginmanager.register(results, "pytest_accel:results")
    plugin = PerfPlugin(config, options, facts.detection, baseline, key=facts.key, results=results)
    config.pluginmanager.register(plugin, "pytest_accel:perf")


baseline_key = pytest.StashKey[Baseline | None]()


def _publish_durations(config: pytest.Config, options: PerfOptions, key: str) -> None:
    """Expected durations for sharding, loaded only if something asks (an xdist worker
    that shards reads the baseline itself; the controller reuses its own)."""
    path = options.baseline
    assert path is not None

    def durations() -> dict[str, float]:
        if baseline_key in config.stash:
            baseline = config.stash[baseline_key]
        elif os.path.exists(path):
            try:
                baseline = config.stash[baseline_key] = load_baseline(path)
            except InputError as exc:
                raise pytest.UsageError(f"--perf-baseline: {exc}") from None
        else:
            baseline = None
        env = baseline.for_key(key) if baseline is not None else None
        return {} if env is None else median_durations(env)

    config.stash[durations_key] = durations
