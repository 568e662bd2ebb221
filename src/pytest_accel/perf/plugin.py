"""The ``--perf-record`` / ``--perf-baseline`` feature's hooks.

Registered in ``pytest_configure`` only when one of those options is on.  In an xdist
worker it only annotates reports (and counts what its collection deselected); in the
process that owns the session it compares, warns and writes files from what the
``ResultsCollector`` gathered.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_accel import github, vcs
from pytest_accel.fields import utc_timestamp
from pytest_accel.files import InputError, check_writable, resolved, write_atomic
from pytest_accel.hardware.detection import Detection, framework_versions
from pytest_accel.hardware.facts import session_facts
from pytest_accel.outcomes import RecordedOutcomes, RunColumns
from pytest_accel.perf.collector import NodeInfoSender, ResultsCollector
from pytest_accel.perf.formats.record import TIMING_SECTIONS, RunInfo, culprits
from pytest_accel.perf.model.overrides import Override
from pytest_accel.perf.model.table import GroupSections, RunCompilation, TimingTable
from pytest_accel.perf.model.timings import (
    RunIdentity,
    RunTimings,
    busiest,
    layout_of,
    new_run_id,
    without_pauses,
    without_waits,
)
from pytest_accel.perf.options import PerfOptions
from pytest_accel.perf.pauses import pauses_key
from pytest_accel.perf.pauses import register as register_pauses
from pytest_accel.perf.result import TimingResult
from pytest_accel.perf.waits import register as register_waits
from pytest_accel.process_state import interrupt_on_sigterm
from pytest_accel.reports import (
    collected_ids,
    fail_session,
    is_xdist_worker,
    isolated,
    job_summary,
    runs_tests_here,
    warn,
    write_section,
)
from pytest_accel.text import Line, Tone

if TYPE_CHECKING:  # the comparison and its output load only with a baseline
    from pytest_accel.perf.analysis.causes import CommitRange
    from pytest_accel.perf.device_memory import DeviceMemoryMeter
    from pytest_accel.perf.formats.baseline import Baseline
    from pytest_accel.perf.model.findings import Comparison
    from pytest_accel.perf.offline import StoredBaseline
    from pytest_accel.session_end import RunResult


@dataclass
class _Built:
    """The timing result's first half, built once at the session's end."""

    identity: RunIdentity
    table: TimingTable
    warmup: list[bool]
    totals: list[float]
    groups: GroupSections
    run: RunTimings | None
    comparison: Comparison | None
    compilation: RunCompilation | None
    info: RunInfo
    earlier_starts: list[str]
    columns: RunColumns | None  # built where some feature reads them


class PerfPlugin:
    """Runs in the process that owns the session: at the end builds the session's one
    ``TimingResult`` (the table, its groups, the comparison with the baseline, the
    record's header) and renders it: warnings, job summary, record, terminal; then folds
    the run into the baseline.
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
        stored: StoredBaseline | None = None,
    ) -> None:
        self.config = config
        self.options = options
        self.detection = detection
        self.baseline = baseline
        self.results = results
        self.key = key
        self.wanted = wanted  # another feature reads this run's timings (the HTML report)
        self.slice = session_facts(config).slice  # one host of several, or None
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.run_id = new_run_id()
        self.result: TimingResult | None = None
        self.built: _Built | None = None  # the result's first half (``_build``)
        self.build_failed = False
        self.blanket: str | None = None  # an "error" filter the alarms' warnings did not obey
        self.record_written = False
        # Tests the baseline update left without a sample (its window of runs).
        self.dropped: list[tuple[str, str]] = []
        # No baseline file yet (a cold CI cache), or a store with no run of this key: not
        # an error, the run says so.
        self.stored = stored
        self.baseline_name = stored.name if stored is not None else str(options.baseline)
        self.baseline_missing = (
            options.baseline is not None and not Path(options.baseline).exists()
        ) or (stored is not None and not stored.runs)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.time()
        self.started_monotonic = time.perf_counter()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.baseline is not None and session.items:  # xdist's controller has none
            self.baseline.share_ids(collected_ids(session))

    # --- at the end: the result, built once ---------------------------------------------

    # The core's session end (``session_end``) asks for the run's tests, then finishes
    # the result with the other features' results: this plugin never calls them.

    def pytest_accel_run_columns(self, session: pytest.Session) -> RunColumns | None:
        with isolated(session, "finish the timing record and comparison"):
            built = self._build(session)
            if built.columns is None:
                built.columns = self._run_columns(
                    built.info, built.identity, built.earlier_starts, built.totals
                )
            return built.columns
        return None

    def pytest_accel_finish_timing(
        self, session: pytest.Session, results: Sequence[RunResult]
    ) -> bool:
        if self.built is None and self.build_failed:
            return True  # its first half failed, and said so once
        with isolated(session, "finish the timing record and comparison"):
            self._complete(session, self._build(session), tuple(results))
        return True

    def _build(self, session: pytest.Session) -> _Built:
        """The result's first half, once: the table, the comparison (with the changed
        code its alarms' tests ran), the job summary's timing rows."""
        if self.built is not None:
            return self.built
        self.build_failed = True  # until it is built
        commit, branch = vcs.vcs_info(os.environ, cwd=str(self.config.rootpath))
        identity = RunIdentity(commit, branch, utc_timestamp(self.started), self.run_id)
        shard = self.config.hook.pytest_accel_shard(config=self.config)
        env = self.baseline.for_key(self.key) if self.baseline is not None else None
        earlier_starts = [r.identity.started for r in env.runs if r.identity.started] if env else []
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        table = self.results.session_table(interrupted)
        warmup, totals = table.warmup(), table.totals()
        groups = table.grouped(self.results.deselected, warmup, totals)
        # What the baseline compares and keeps and the page draws; a record alone does not.
        run = None
        if self.options.baseline is not None or self.wanted:
            run = self._run_timings(
                table, identity, shard, warmup=warmup, totals=totals, groups=groups
            )
        comparison = None
        if run is not None:
            with isolated(session, "compare the timings with the baseline"):
                comparison = self._compare(run)
        if comparison is not None and comparison.alarms:
            with isolated(session, "name the changed code the alarms' tests run"):
                commits = [run.identity.commit for run in env.runs[-2:]] if env else []
                comparison = self._with_changed_code(comparison, commit, commits)
        compilation = table.compilation()
        info = self._run_info(session.exitstatus, identity, shard)
        # Perf's rows first in the job summary; the features' results add theirs after.
        self._summarize(comparison, compilation)
        columns = None
        if self.wanted:
            columns = self._run_columns(info, identity, earlier_starts, totals)
        self.built = _Built(
            identity,
            table,
            warmup,
            totals,
            groups,
            run,
            comparison,
            compilation,
            info,
            earlier_starts,
            columns,
        )
        self.build_failed = False
        return self.built

    def _complete(
        self, session: pytest.Session, built: _Built, results: tuple[RunResult, ...]
    ) -> None:
        """The result with the other features' results; rendered: warnings and
        --perf-fail, the record; then the run folded into the baseline."""
        sections: dict[str, Any] = {}
        for other in results:
            with isolated(session, f"encode the {other.name} record section"):
                if other.name in TIMING_SECTIONS:
                    raise ValueError(
                        f"a feature adds the timing record's own section {other.name!r}"
                    )
                section = other.record_section()
                if section is not None:
                    sections[other.name] = section
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        comparison, run = built.comparison, built.run
        result = self.result = TimingResult(
            self.key,
            built.table,
            built.warmup,
            built.totals,
            built.groups,
            built.info,
            self.detection,
            framework_versions(),
            pytest.__version__,
            self.options.rule,
            overrides=self.overrides(),
            new_slow=self.options.new_slow,
            run=run,
            comparison=comparison,
            compilation=built.compilation,
            results=results,
            sections=sections,
            columns=built.columns,
            baseline=self.baseline if self.wanted else None,
            baseline_missing=self.baseline_missing,
            compile_problem=self.results.compile_problem(),
            memory_problem=self.results.memory_problem(),
        )
        if comparison is not None:
            from pytest_accel.perf import output

            annotations = tuple(output.workflow_commands(comparison, self.location))
            result = self.result = replace(result, annotations=annotations)
        if not self.wanted:
            # Nothing reads it again (an update re-reads the file under its lock): its
            # samples go before the record and the history are written, the peak.
            self.baseline = self.config.stash[baseline_key] = None
        if comparison is not None:
            with isolated(session, "report the comparison"):
                self._warn(session, result)
        if self.options.record:
            with isolated(session, f"write the timing record {self.options.record}"):
                write_atomic(self.options.record, result.record())
                self.record_written = True
        # A cut-short run's timings are not a sample of the suite.
        baseline = self.options.baseline
        if run is not None and baseline and self.options.update_baseline and not interrupted:
            with isolated(session, f"update the baseline {baseline}"):
                from pytest_accel.perf.analysis.summary import summary_to_write
                from pytest_accel.perf.formats.baseline import update_baseline_file

                update_baseline_file(
                    baseline,
                    [run],
                    self.options.window,
                    summarise=summary_to_write,
                    time=self.options.rule.time,
                    dropped=self.dropped,
                )

    def _run_timings(
        self,
        table: TimingTable,
        identity: RunIdentity,
        shard: str | None,
        *,
        warmup: list[bool],
        totals: list[float],
        groups: GroupSections,
    ) -> RunTimings:
        deselected = self.results.deselected.get("modules", {})
        measured = RunTimings(
            key=self.key,
            identity=identity,
            ids=table.nodeids,
            outcome=table.outcomes,
            call=list(table.calls),
            total=totals,
            cls=table.class_ids,
            module=table.module_ids,
            warmup=warmup,
            classes=groups["classes"][0],
            modules=groups["modules"][0],
            partial_modules=frozenset(g for g, n in deselected.items() if n),
            shard=shard,
            layout=layout_of(len(self.results.workers), [shard]),
        )
        if table.compiles:
            measured = replace(
                measured,
                compiling=table.compile_seconds(),
                call_compiling=table.call_compile_seconds(),
                recompiles=table.recompiles(),
                tracing=table.trace_seconds(),
                # As the record gives them offline (``timings``): one verdict either way.
                tracing_waits=table.trace_waits() or None,
                repeats=table.repeats(),
                recompiling=culprits(table.recompiling_json()),
            )
        if table.device_memory:
            measured = replace(
                measured,
                device_memory=busiest(table.device_memory_json() or {}),
                memory_bounded=frozenset(table.memory_bounds()),
            )
        threads = self.results.threads_wait()
        if threads is not None and sum(threads) > 0:
            # As the record gives it offline (``record.threads_share``): one verdict.
            ran, waited = round(threads[0], 6), round(threads[1], 6)
            measured = replace(measured, threads_wait_share=waited / (ran + waited))
        waits = table.waits if table.waits_measured else None
        return without_waits(without_pauses(measured, table.pauses), waits)

    def overrides(self) -> dict[str, Override]:
        """Each test's ``@pytest.mark.perf`` override of the rule."""
        return {
            nodeid: Override(threshold, min_delta, ignore)
            for nodeid, (threshold, min_delta, ignore) in self.results.marks.items()
        }

    def _compare(self, run: RunTimings) -> Comparison | None:
        if self.baseline is None:
            return None
        from pytest_accel.perf.analysis.comparison import compare_with_baseline

        return compare_with_baseline(
            run, self.baseline, self.options.rule, self.overrides(), new_slow=self.options.new_slow
        )

    def _with_changed_code(
        self, comparison: Comparison, commit: str | None, baseline_commits: list[str | None]
    ) -> Comparison:
        """``comparison`` with the changed code each alarm's tests ran, where a feature
        can say (the selection's dependency map: ``pytest_accel_changed_code``);
        ``baseline_commits``: its runs' commits, the newest last."""
        from pytest_accel.perf.analysis.causes import changed_code_of, code_questions

        *_, before_newest, newest = [None, None, *baseline_commits]
        questions = code_questions(
            comparison, run_commit=commit, baseline_commit=newest, before_newest=before_newest
        )
        asked: dict[CommitRange, set[str]] = {}
        for question in questions.values():
            asked.setdefault(question.between, set()).update(question.tests)
        answers = {}
        for (since, until), tests in asked.items():
            found = self.config.hook.pytest_accel_changed_code(
                config=self.config, since=since, until=until, tests=sorted(tests)
            )
            if found is None:
                return comparison  # nothing answers: no map
            answers[(since, until)] = found
        found_code = changed_code_of(questions, answers)
        return replace(comparison, changed_code=found_code) if found_code else comparison

    def _run_info(self, exitstatus: int, identity: RunIdentity, shard: str | None) -> RunInfo:
        return RunInfo(
            started=self.started,
            duration=time.perf_counter() - self.started_monotonic,
            commit=identity.commit,
            branch=identity.branch,
            shard=shard,
            workers=len(self.results.workers),
            exitstatus=int(exitstatus),
            run_id=identity.run_id,
            threads_wait=self.results.threads_wait(),
            host=None if self.slice is None else self.slice.host,
            hosts=None if self.slice is None else self.slice.hosts,
            slice_name=None if self.slice is None else self.slice.name,
        )

    def _run_columns(
        self,
        info: RunInfo,
        identity: RunIdentity,
        earlier_starts: list[str],
        totals: list[float],
    ) -> RunColumns:
        """The run's tests as the features that account for runs read them."""
        table = self.results.table
        return RunColumns(
            self.key,
            self.detection.platform,
            self.detection.device_count,
            info.workers,
            info.duration,
            table.nodeids,
            table.outcomes,
            totals,
            table.module_ids,
            table.earlier_seconds(),
            frozenset(table.quarantined_failures()),
            table.platform_skip_reasons(),
            started=identity.started,
            earlier_starts=earlier_starts,
            compiles=table.compile_counts(),
            interrupted=info.exitstatus == pytest.ExitCode.INTERRUPTED,
            reruns={table.nodeids[row]: len(tries) for row, tries in table.earlier.items()},
            left_out=self.config.hook.pytest_accel_left_out(config=self.config) or {},
            cut=frozenset(self.config.hook.pytest_accel_budget_cut(config=self.config) or ()),
        )

    def pytest_accel_timing_result(self) -> TimingResult | None:
        return self.result

    def pytest_accel_stored_outcomes(self) -> Sequence[RecordedOutcomes] | None:
        return None if self.stored is None else self.stored.outcomes

    # --- rendering the result ---------------------------------------------------------

    def failing(self, comparison: Comparison) -> bool:
        """Whether --perf-fail fails this run: it found an alarm."""
        return self.options.fail and bool(comparison.alarms)

    def location(self, kind: str, ident: str) -> github.Location | None:
        """Where a finding points: a test at its line; a class at its first test; a
        module, or the suite (at the module that took longest), at the file."""
        table = self.results.table
        if kind == "test":
            row = table.rows.get(ident)
        elif kind == "class":
            row = next((r for r, c in enumerate(table.class_ids) if c == ident), None)
        else:
            if kind == "session":
                run = self.result.run if self.result is not None else None
                if run is None or not run.modules.ids:
                    return None
                ident = max(zip(run.modules.total, run.modules.ids, strict=True))[1]
            return github.Location(ident.split("::", 1)[0], 1)
        found = None if row is None else table.location(row)
        return None if found is None else github.Location(*found)

    def _summarize(self, comparison: Comparison | None, compilation: RunCompilation | None) -> None:
        """The comparison's and the compilation's sections of the job summary."""
        summary = job_summary(self.config)
        if summary is None or (comparison is None and compilation is None):
            return
        from pytest_accel.perf import output

        if comparison is not None:
            summary.add(output.summary_section(comparison, self.failing(comparison)))
        if compilation is not None:
            summary.add(output.compilation_section(compilation))

    def _warn(self, session: pytest.Session, result: TimingResult) -> None:
        """One PerfRegressionWarning per alarm, at the test's file (a recompiling
        function's, where it was called); then --perf-fail."""
        from pytest_accel.perf import output
        from pytest_accel.perf.model.findings import PerfRegressionWarning

        comparison = result.comparison
        assert comparison is not None
        escalated: list[str] = []
        for alarm in comparison.alarm_list:
            where = output.culprit_location(alarm) or self.location(alarm.scope, alarm.id)
            path = where.path if where else str(self.options.baseline)
            warning = PerfRegressionWarning(output.describe_alarm(alarm))
            warned = warn(self.config, warning, path, where.line if where else None)
            if warned.escalated_by:
                escalated.append(warned.escalated_by)
            self.blanket = self.blanket or warned.blanket
        if escalated:
            fail_session(
                session,
                f"{len(escalated)} PerfRegressionWarning(s) turned into errors by {escalated[0]}",
            )
        if self.failing(comparison):
            fail_session(session, f"{output.alarm_count(comparison)} with --perf-fail")

    @pytest.hookimpl(tryfirst=True)  # the timings, then the flaky section
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        result = self.result
        if result is None:
            return  # the session's end did not get as far (its error says why)
        write_section(terminalreporter, "pytest-accel performance", self.terminal_lines(result))
        if github.in_github_actions():
            # Workflow commands are read from the job's stdout, where the terminal writes.
            for line in result.annotations:
                terminalreporter.write_line(line)

    def terminal_lines(self, result: TimingResult) -> list[Line]:
        """The section's lines, each with its tone (``text.Tone``).  The comparison's
        wording (``perf.output``, and the findings with it) is loaded only where there is
        something to word: a run that only records names its file without them."""
        lines: list[Line] = []
        comparison = result.comparison
        if result.baseline_missing and self.stored is not None:
            missing = f"perf: no run of {self.key} in the store {self.stored.name} yet"
            lines.append(Line(Tone.FILE, f"{missing} (this run starts it)"))
        elif result.baseline_missing:
            starts = " (this run starts it)" if self.options.update_baseline else ""
            missing = f"perf: no baseline at {self.options.baseline} yet{starts}"
            lines.append(Line(Tone.FILE, missing))
        elif comparison is not None and not comparison.found:
            from pytest_accel.perf import output

            lines.append(Line(Tone.CHANGE, output.missing_env_line(comparison, self.baseline_name)))
        elif comparison is not None:
            from pytest_accel.perf import output

            lines += output.terminal_rows(comparison, self.options.top)
            lines.append(
                Line(
                    output.summary_tone(comparison),
                    output.summary_line(comparison, self.failing(comparison)),
                )
            )
        if self.stored is not None and self.stored.runs:
            lines.append(
                Line(
                    Tone.NOTE,
                    f"perf: baseline: the newest {self.stored.runs} run(s) of {self.key} in the"
                    f" store {self.stored.name}",
                )
            )
        if self.stored is not None:
            lines += [Line(Tone.CHANGE, f"perf: {note}") for note in self.stored.notes]
        if result.compilation is not None and result.compilation.count:
            from pytest_accel.perf import output

            lines.append(Line(Tone.NOTE, output.compilation_line(result.compilation)))
        if result.table.device_memory and (
            comparison is None or comparison.device_memory.peak is None
        ):
            from pytest_accel.perf import output

            lines.append(Line(Tone.NOTE, output.device_memory_line(result.table)))
        if result.memory_problem is not None:
            lines.append(
                Line(Tone.CHANGE, f"device memory: not measured ({result.memory_problem})")
            )
        if result.compile_problem is not None:
            lines.append(
                Line(
                    Tone.CHANGE,
                    f"compilation: not measured ({result.compile_problem}); tests are"
                    " timed whole, compilation included",
                )
            )
        if self.dropped:
            from pytest_accel.perf import output

            lines.append(Line(Tone.CHANGE, output.dropped_line(self.dropped, self.options.window)))
        if self.blanket:
            lines.append(
                Line(
                    Tone.NOTE,
                    f"warnings: {self.blanket} does not fail a run on timings: the alarms are"
                    " shown as warnings; fail on them with --perf-fail, or name the class"
                    " ('error::pytest_accel.PerfRegressionWarning')",
                )
            )
        if self.record_written:
            lines.append(
                Line(
                    Tone.FILE,
                    f"pytest-accel: timing record of {len(result.table)} test(s) written to"
                    f" {self.options.record}",
                )
            )
        return lines


def load_for_session(options: PerfOptions) -> Baseline | None:
    """Read the baseline up front, so a malformed file stops the run before any test.
    A missing one is an empty baseline: a cold CI cache is normal."""
    if options.baseline is None:
        return None
    from pytest_accel.perf.formats.baseline import Baseline, load_baseline

    try:
        if not resolved(options.baseline).exists():
            return Baseline({})
        baseline = load_baseline(options.baseline)
    except InputError as exc:
        raise pytest.UsageError(f"--perf-baseline: {exc}") from None
    if options.update_baseline and baseline.source != "baseline":
        # Refused now, not after the whole suite ran (the update would refuse it then).
        raise pytest.UsageError(
            f"--perf-update-baseline: {options.baseline} is a {baseline.source} file, not a"
            " baseline; give --perf-baseline a baseline path to update (it is created on"
            " first use), or drop --perf-update-baseline to compare with it"
        )
    return baseline


baseline_key = pytest.StashKey["Baseline | None"]()


def register_feature(config: pytest.Config, options: PerfOptions, *, wanted: bool) -> None:
    facts = session_facts(config)
    if options.baseline is not None:
        expected = ExpectedDurations(config, options.baseline, facts.key)
        config.pluginmanager.register(expected, "pytest_accel:expected_durations")
    if config.option.collectonly:
        return  # nothing runs: no timings to show, compare or write (shards still plan)
    register_pauses(config)  # by module path: pytester reruns import it afresh
    counter = meter = threads = None
    if runs_tests_here(config):  # not xdist's controller
        from pytest_accel.perf.compiles import CompileCounter

        counter = CompileCounter(config.stash.get(pauses_key, None))
        config.pluginmanager.register(counter, "pytest_accel:compiles")
        counter.start(config)
        threads = register_waits(config)
        meter = register_meter(config, options)
    if is_xdist_worker(config):
        # Workers only annotate reports; the controller compares and writes.
        config.pluginmanager.register(NodeInfoSender(config), "pytest_accel:node_info")
        return
    outputs = [("--perf-record", options.record, "record.json")]
    if options.update_baseline:
        outputs.append(("--perf-baseline", options.baseline, "baseline.json"))
    for flag, path, example in outputs:
        if path:
            try:
                check_writable(path, example)
            except InputError as exc:
                raise pytest.UsageError(f"{flag}: {exc}") from None
    job_summary(config)  # checked before any test runs
    interrupt_on_sigterm(config)
    baseline = load_for_session(options)
    stored = None
    if baseline is None:  # the store's runs, where --accel-store names one
        runs = config.hook.pytest_accel_stored_runs(
            config=config, key=facts.key, count=options.window
        )
        if runs is not None:
            from pytest_accel.perf.offline import baseline_of_stored

            stored = baseline_of_stored(
                runs.name, runs.key, runs.objects, options.window, options.rule.time
            )
            baseline = stored.baseline
    config.stash[baseline_key] = baseline
    results = ResultsCollector(config, counter, meter, threads)
    config.pluginmanager.register(results, "pytest_accel:results")
    plugin = PerfPlugin(
        config,
        options,
        facts.detection,
        baseline,
        key=facts.key,
        results=results,
        wanted=wanted,
        stored=stored,
    )
    config.pluginmanager.register(plugin, "pytest_accel:perf")


def register_meter(config: pytest.Config, options: PerfOptions) -> DeviceMemoryMeter | None:
    """Each test's peak device memory, wherever tests run (not xdist's controller)."""
    if not runs_tests_here(config):
        return None
    from pytest_accel.perf.device_memory import DeviceMemoryMeter

    meter = DeviceMemoryMeter(options.max_device_memory)
    config.pluginmanager.register(meter, "pytest_accel:device_memory")
    meter.start(config)
    return meter


class ExpectedDurations:
    """Answers ``pytest_accel_expected_durations`` from the baseline, read only if
    something asks (sharding; an xdist worker that shards reads the baseline itself, the
    controller reuses its own)."""

    def __init__(self, config: pytest.Config, path: str, key: str) -> None:
        self.config, self.path, self.key = config, path, key

    def pytest_accel_expected_durations(self) -> dict[str, float]:
        from pytest_accel.perf.analysis.summary import expected_durations
        from pytest_accel.perf.formats.baseline import load_baseline

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
