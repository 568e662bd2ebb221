"""The ``--perf-record`` / ``--perf-baseline`` feature's hooks.

Registered in ``pytest_configure`` only when one of those options is on.  In an xdist
worker it only annotates reports (and counts what its collection deselected); in the
process that owns the session it compares, warns and writes files from what the
``ResultsCollector`` gathered.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_accel import github
from pytest_accel.fields import utc_timestamp
from pytest_accel.files import (
    InputError,
    check_writable,
    gc_paused,
    parse_json,
    resolved,
    write_atomic,
)
from pytest_accel.hardware.detection import Detection, framework_versions
from pytest_accel.outcomes import RunColumns
from pytest_accel.perf.collector import NodeInfoSender, ResultsCollector
from pytest_accel.perf.formats.record import RunInfo, check_record, encode_record, record_head
from pytest_accel.perf.model.table import TimingTable
from pytest_accel.perf.model.timings import (
    RunIdentity,
    RunTimings,
    layout_of,
    vcs_info,
    without_pauses,
)
from pytest_accel.perf.options import PerfOptions
from pytest_accel.perf.pauses import pauses_key
from pytest_accel.perf.pauses import register as register_pauses
from pytest_accel.process_state import interrupt_on_sigterm
from pytest_accel.reports import (
    fail_session,
    is_xdist_worker,
    isolated,
    job_summary,
    session_outputs,
    warn,
)
from pytest_accel.session import session_key
from pytest_accel.text import one_line

if TYPE_CHECKING:  # the comparison and its output load only with a baseline
    from pytest_accel.perf.formats.baseline import Baseline
    from pytest_accel.perf.model.findings import Comparison


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
        wanted: bool = False,
    ) -> None:
        self.config = config
        self.options = options
        self.detection = detection
        self.baseline = baseline
        self.results = results
        self.key = key
        self.wanted = wanted  # another feature reads this run's timings (the HTML report)
        self.shard: str | None = None  # "K/N" when this session runs one CI shard
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.identity = RunIdentity()
        self.comparison: Comparison | None = None
        self.record_written = False
        self.earlier_starts: list[str] = []  # when the baseline's runs of this key started
        self.compilation: dict[str, float | int] | None = None  # with JAX: the run's
        # No baseline file yet (a cold CI cache) is not an error: the run says so.
        self.baseline_missing = options.baseline is not None and not Path(options.baseline).exists()

    @property
    def table(self) -> TimingTable:
        return self.results.table

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.time()
        self.started_monotonic = time.perf_counter()

    # --- at the end -------------------------------------------------------------------

    def run_timings(self) -> RunTimings:
        table = self.table
        warmup, totals = table.warmup(), table.totals()
        deselected = self.results.deselected
        classes, _ = table.groups(table.class_ids, warmup, deselected.get("classes", {}), totals)
        modules, _ = table.groups(table.module_ids, warmup, deselected.get("modules", {}), totals)
        measured = RunTimings(
            key=self.key,
            identity=self.identity,
            ids=table.nodeids,
            outcome=table.outcomes,
            call=table.calls,
            total=totals,
            cls=table.class_ids,
            module=table.module_ids,
            warmup=warmup,
            classes=classes,
            modules=modules,
            partial_modules=frozenset(g for g, n in deselected.get("modules", {}).items() if n),
            shard=self.shard,
            layout=layout_of(len(self.results.workers), [self.shard]),
        )
        if table.compiles:
            measured = replace(
                measured,
                compiling=table.compile_seconds(),
                call_compiling=table.call_compile_seconds(),
                recompiles=table.recompiles(),
            )
        return without_pauses(measured, table.pauses)

    def _compare(self, run: RunTimings) -> Comparison | None:
        if self.baseline is None:
            return None
        from pytest_accel.perf.analysis.comparison import compare
        from pytest_accel.perf.model.findings import Comparison, Override

        env = self.baseline.for_key(self.key)
        if env is None:
            return Comparison(self.key, found=False, available_envs=sorted(self.baseline.envs))
        overrides = {
            nodeid: Override(threshold, min_delta, ignore)
            for nodeid, (threshold, min_delta, ignore) in self.results.marks.items()
        }
        return compare(run, env, self.options.rule, overrides, new_slow=self.options.new_slow)

    def location(self, kind: str, ident: str) -> github.Location | None:
        """Where a finding points: a test at its line; a class at its first test; a
        module, or the suite (at the module that took longest), at the file."""
        table = self.table
        if kind == "test":
            row = table.rows.get(ident)
        elif kind == "class":
            row = next((r for r, c in enumerate(table.class_ids) if c == ident), None)
        else:
            if kind == "session":
                modules = self.run_timings().modules
                if not modules.ids:
                    return None
                ident = max(zip(modules.total, modules.ids, strict=True))[1]
            return github.Location(ident.split("::", 1)[0], 1)
        path = None if row is None else table.paths[row]
        return None if row is None or path is None else github.Location(path, table.lines[row])

    def _emit_warnings(self, session: pytest.Session, comparison: Comparison) -> None:
        """One PerfRegressionWarning per regression and slowdown change, at the test file."""
        from pytest_accel.perf import output
        from pytest_accel.perf.model.findings import PerfRegressionWarning

        escalated = 0
        alarms: list[tuple[str, str, str]] = [
            (f.kind, f.id, output.describe(f)) for f in comparison.regressions
        ]
        alarms += [(c.kind, c.id, output.describe_change(c)) for c in comparison.slowdowns]
        alarms += [("test", r.id, output.describe_recompiled(r)) for r in comparison.recompiled]
        for kind, ident, text in alarms:
            where = self.location(kind, ident)
            path = where.path if where else str(self.options.baseline)
            if not warn(
                self.config, PerfRegressionWarning(text), path, where.line if where else None
            ):
                escalated += 1
        if escalated:
            fail_session(session, f"{escalated} PerfRegressionWarning(s) turned into errors by -W")

    def record_head(self, exitstatus: int) -> dict[str, Any]:
        run = RunInfo(
            started=self.started,
            duration=time.perf_counter() - self.started_monotonic,
            commit=self.identity.commit,
            branch=self.identity.branch,
            shard=self.shard,
            workers=len(self.results.workers),
            exitstatus=int(exitstatus),
        )
        head = record_head(run, self.detection, self.key, framework_versions(), pytest.__version__)
        if self.comparison is not None:
            head["comparison"] = self.comparison.to_json()
        if self.compilation is not None:
            head["compilation"] = self.compilation
        return head

    @property
    def failing(self) -> bool:
        return bool(self.options.fail and self.comparison and self.comparison.alarms)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Also after failures, -x and Ctrl-C. What is built here has no reference cycles.
        with gc_paused(), isolated(session, "finish the timing record and comparison"):
            self._finish(session)

    def _finish(self, session: pytest.Session) -> None:
        """Compare, write the record, update the baseline: each isolated from the others."""
        commit, branch = vcs_info(os.environ, cwd=str(self.config.rootpath))
        self.identity = RunIdentity(commit, branch, utc_timestamp(self.started))
        self.shard = self.config.hook.pytest_accel_shard(config=self.config)
        env = self.baseline.for_key(self.key) if self.baseline is not None else None
        runs = env.runs if env is not None else []
        self.earlier_starts = [r.identity.started for r in runs if r.identity.started]
        self.results.session_table()
        # What the baseline compares and keeps; a record alone does not need it.
        run = self.run_timings() if self.options.baseline is not None else None
        if run is not None:
            with isolated(session, "compare the timings with the baseline"):
                self.comparison = self._compare(run)
                if self.comparison is not None:
                    self._report(session, self.comparison)
            if not self.wanted:
                # Nothing reads it again (an update re-reads the file under its lock): its
                # samples go before the record and the history are written, the peak.
                self.baseline = self.config.stash[baseline_key] = None
        self.compilation = self.table.compilation()
        if self.compilation is not None:
            summary = job_summary(self.config)
            if summary is not None:
                from pytest_accel.perf import output

                summary.add(output.compilation_section(self.compilation))
        head = self.record_head(session.exitstatus)
        with isolated(session, "account for the run (cost, coverage)"):
            self._add_sections(session, head)
        if self.options.record:
            with isolated(session, f"write the timing record {self.options.record}"):
                chunks = encode_record(self.table, head, self.results.deselected)
                write_atomic(self.options.record, chunks)
                self.record_written = True
        self._publish(head)
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        # A cut-short run's timings are not a sample of the suite.
        baseline = self.options.baseline
        if run is not None and baseline and self.options.update_baseline and not interrupted:
            with isolated(session, f"update the baseline {baseline}"):
                from pytest_accel.perf.formats.baseline import update_baseline_file

                update_baseline_file(
                    baseline, [run], self.options.window, time=self.options.rule.time
                )

    def _add_sections(self, session: pytest.Session, head: dict[str, Any]) -> None:
        """The sections other features add to the record (``pytest_accel_record_sections``),
        from this run's tests."""
        hook = self.config.hook.pytest_accel_record_sections
        if not hook.get_hookimpls():
            return
        table = self.table
        run = RunColumns(
            self.key,
            self.detection.platform,
            self.detection.device_count,
            int(head["run"]["workers"]),
            float(head["run"]["duration"]),
            table.nodeids,
            table.outcomes,
            table.totals(),
            table.module_ids,
            table.earlier_seconds(),
            frozenset(table.quarantined_failures()),
            table.platform_skip_reasons(),
            started=self.identity.started,
            earlier_starts=self.earlier_starts,
            compiles=table.compile_counts(),
        )
        for sections in hook(session=session, run=run):
            for name, section in (sections or {}).items():
                if name in head:
                    raise ValueError(f"two features add the record section {name!r}")
                head[name] = section

    def _publish(self, head: dict[str, Any]) -> None:
        """The record, baseline and rule, for the HTML report (``SessionOutputs``)."""
        if not self.wanted:
            return  # no report asked for them

        def record() -> dict[str, Any]:
            chunks = encode_record(self.table, head, self.results.deselected)
            what = "the timing record"  # read back as any record is: every column a list
            return check_record(what, parse_json(what, b"".join(chunks)))

        outputs = session_outputs(self.config)
        outputs.record, outputs.baseline, outputs.rule = record, self.baseline, self.options.rule
        outputs.comparison = self.comparison

    def _report(self, session: pytest.Session, comparison: Comparison) -> None:
        from pytest_accel.perf import output

        self._emit_warnings(session, comparison)
        summary = job_summary(self.config)
        if summary is not None:
            summary.add(output.summary_section(comparison, self.failing))
        if self.failing:
            fail_session(session, f"{output.alarm_count(comparison)} with --perf-fail")

    @pytest.hookimpl(tryfirst=True)  # the timings, then the flaky section
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        if self.options.baseline is not None:
            from pytest_accel.perf import output

            terminalreporter.section("pytest-accel performance", sep="-")
        comparison = self.comparison
        if self.baseline_missing:
            starts = " (this run starts it)" if self.options.update_baseline else ""
            write(one_line(f"perf: no baseline at {self.options.baseline} yet{starts}"))
        elif comparison is not None and not comparison.found:
            write(output.missing_env_line(comparison, str(self.options.baseline)))
        elif comparison is not None:
            for row in output.terminal_rows(comparison, self.options.top):
                write(row, red=row.startswith(("REGRESSION", "CHANGED")) and "slower" in row)
            write(
                output.summary_line(comparison, self.failing),
                red=bool(comparison.alarms),
                green=not comparison.alarms,
            )
            if github.in_github_actions():
                # Workflow commands are read from the job's stdout, which is where the
                # terminal writer goes.
                for line in output.workflow_commands(comparison, self.location):
                    write(line)
        if self.compilation is not None:
            from pytest_accel.perf import output

            write(output.compilation_line(self.compilation))
        if self.record_written:
            write(
                one_line(
                    f"pytest-accel: timing record of {len(self.table)} test(s) written to"
                    f" {self.options.record}"
                )
            )


def load_for_session(options: PerfOptions) -> Baseline | None:
    """Read the baseline up front, so a malformed file stops the run before any test.
    A missing one is an empty baseline: a cold CI cache is normal."""
    if options.baseline is None:
        return None
    from pytest_accel.perf.formats.baseline import Baseline, load_baseline

    try:
        if not resolved(options.baseline).exists():
            return Baseline({})
        return load_baseline(options.baseline)
    except InputError as exc:
        raise pytest.UsageError(f"--perf-baseline: {exc}") from None


baseline_key = pytest.StashKey["Baseline | None"]()


def register_feature(config: pytest.Config, options: PerfOptions, *, wanted: bool) -> None:
    facts = config.stash[session_key]
    if options.baseline is not None:
        expected = ExpectedDurations(config, options.baseline, facts.key)
        config.pluginmanager.register(expected, "pytest_accel:expected_durations")
    if config.option.collectonly:
        return  # nothing runs: no timings to show, compare or write (shards still plan)
    register_pauses(config)  # by module path: pytester reruns import it afresh
    if not config.pluginmanager.has_plugin("dsession"):  # where tests run, not xdist's controller
        from pytest_accel.perf.compiles import CompileCounter

        counter = CompileCounter(config.stash.get(pauses_key, None))
        config.pluginmanager.register(counter, "pytest_accel:compiles")
    if is_xdist_worker(config):
        # Workers only annotate reports; the controller compares and writes.
        config.pluginmanager.register(NodeInfoSender(config), "pytest_accel:node_info")
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
    job_summary(config)  # checked before any test runs
    interrupt_on_sigterm(config)
    baseline = config.stash[baseline_key] = load_for_session(options)
    results = ResultsCollector(config)
    config.pluginmanager.register(results, "pytest_accel:results")
    plugin = PerfPlugin(
        config, options, facts.detection, baseline, key=facts.key, results=results, wanted=wanted
    )
    config.pluginmanager.register(plugin, "pytest_accel:perf")


class ExpectedDurations:
    """Answers ``pytest_accel_expected_durations`` from the baseline, read only if
    something asks (sharding; an xdist worker that shards reads the baseline itself, the
    controller reuses its own)."""

    def __init__(self, config: pytest.Config, path: str, key: str) -> None:
        self.config, self.path, self.key = config, path, key

    def pytest_accel_expected_durations(self) -> dict[str, float]:
        from pytest_accel.perf.formats.baseline import expected_durations, load_baseline

        config = self.config
        if baseline_key in config.stash:
            baseline = config.stash[baseline_key]
        elif os.path.exists(self.path):
            try:
                baseline = config.stash[baseline_key] = load_baseline(self.path)
            except InputError as exc:
                raise pytest.UsageError(f"--perf-baseline: {exc}") from None
        else:
            baseline = None
        env = baseline.for_key(self.key) if baseline is not None else None
        return {} if env is None else expected_durations(env)
