"""The ``--perf-record`` / ``--perf-baseline`` feature.

Registered in ``pytest_configure`` only when one of those options is on, and only in
the process that owns the session (never in an xdist worker): it compares, warns and
writes files from what the ``ResultsCollector`` gathered.
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
)
from pytest_accel.regression import Comparison, Override, PerfRegressionWarning, compare
from pytest_accel.results import ResultsCollector
from pytest_accel.storage import InputError, gc_paused, write_atomic


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
        results: ResultsCollector,
        shard: str | None = None,
    ) -> None:
        self.config = config
        self.shard = shard  # "K/N" with --accel-shard
        self.options = options
        self.detection = detection
        self.baseline = baseline
        self.results = results
        self.key = env_key(detection, options.env_key)
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit: str | None = None
        self.branch: str | None = None
        self.comparison: Comparison | None = None
        self.write_error: str | None = None

    @property
    def table(self) -> TimingTable:
        return self.results.table

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit, self.branch = vcs_info(os.environ, cwd=str(self.config.rootpath))

    def location(self, nodeid: str) -> ci_output.Location | None:
        row = self.table.rows.get(nodeid)
        path = None if row is None else self.table.paths[row]
        return (
            None if row is None or path is None else ci_output.Location(path, self.table.lines[row])
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
            for nodeid, (threshold, min_delta, ignore) in self.results.marks.items()
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
        with gc_paused():
            self._finish(session)

    def _finish(self, session: pytest.Session) -> None:
        self.results.folded_table()
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
