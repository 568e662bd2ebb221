"""The ``--flaky-*`` features: reruns, quarantine, cross-run history and the flaky share.

Registered in ``pytest_configure`` only when one of those options is on.
What runs wherever tests run (quarantine, status letters) is in ``runner``, the reruns
in ``reruns``.  ``FlakyPlugin`` runs only in the process that owns the session: it
updates the history, writes the report and shows the summary.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pytest

from pytest_accel.fields import utc_timestamp
from pytest_accel.files import InputError, check_writable, gc_paused, write_json_atomic
from pytest_accel.flaky.budget import WORKERINPUT_BUDGET, Budget, is_mass_failure
from pytest_accel.flaky.classify import settled_failures
from pytest_accel.flaky.findings import Findings, build_findings, outcomes_from_stats
from pytest_accel.flaky.history import (
    History,
    HistoryRead,
    RecordedRun,
    add_run,
    combine,
    load_history,
    read_history,
    run_letters,
    update_history_file,
)
from pytest_accel.flaky.options import FlakyOptions
from pytest_accel.flaky.output import summary_section, terminal_lines
from pytest_accel.flaky.quarantine import (
    Entry,
    load_quarantine,
)
from pytest_accel.flaky.runner import (
    WORKEROUTPUT_KEY,
    QuarantineByProtocol,
    QuarantineByReport,
    QuarantineRunner,
    register_status_letters,
)
from pytest_accel.hardware.detection import Detection
from pytest_accel.hardware.facts import session_facts
from pytest_accel.process_state import interrupt_on_sigterm
from pytest_accel.reports import (
    collected_ids,
    fail_session,
    is_xdist_worker,
    isolated,
    job_summary,
    report_stats,
    warn,
    write_section,
)
from pytest_accel.text import Line, Tone, one_line

if TYPE_CHECKING:
    from pytest_accel.flaky.reruns import Rerunner


# xdist ``workerinput``: what a worker needs of a history that is the store's runs.
WORKERINPUT_STORED_HISTORY = "pytest_accel_stored_history"


class FlakyQuarantineWarning(pytest.PytestWarning):
    """A quarantine entry that expired or matches no test."""


class FlakyPlugin:
    """In the process that owns the session: history, report, summary, exit status."""

    def __init__(
        self,
        config: pytest.Config,
        options: FlakyOptions,
        detection: Detection,
        runner: QuarantineRunner,
        *,
        key: str,
        rerunner: Rerunner | None,
        history_read: HistoryRead | None = None,
    ) -> None:
        self.config = config
        self.options = options
        self.platform = detection.platform
        self.key = key
        self.runner = runner
        self.rerunner = rerunner
        self.stats: dict[str, list[Any]] = {}
        self.findings: Findings | None = None
        self.history_written = False
        self.report_written = False
        self.started = datetime.now(timezone.utc).timestamp()
        self.budget: Budget | None = None
        self.settled_failures: frozenset[str] = frozenset()  # quarantined ones tried once
        # The history as read before the run: reused at the end if the file is unchanged.
        self.history_read = history_read
        # With --accel-store and no --flaky-history: what xdist workers need of the
        # store's history (settled failures, known tests); the history itself is the
        # store's runs, to which this run's record adds itself.
        self.stored_history: dict[str, Any] | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.stats = report_stats(self.config)
        if self.rerunner is not None:
            # pytest's JUnit XML exists once every plugin is configured: now.
            from pytest_accel.flaky import junit

            junit.register(self.config)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.history_read is not None and session.items:  # xdist's controller has none
            self.history_read[1].share_ids(collected_ids(session))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: each worker takes reruns from the session's one budget."""
        if self.budget is not None:
            node.workerinput[WORKERINPUT_BUDGET] = self.budget.path
        if self.stored_history is not None:
            node.workerinput[WORKERINPUT_STORED_HISTORY] = self.stored_history

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: merge what each worker saw of the quarantine."""
        seen = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if seen:
            self.runner.matched.update(seen["matched"])
            self.runner.files.update(seen["files"])

    def _stale(self) -> list[Entry]:
        """Entries that cover no collected test, among files that were collected or
        that do not exist (running one file must not call every other entry stale)."""
        quarantine = self.runner.quarantine
        if quarantine is None:
            return []
        root = self.config.rootpath
        stale = []
        for index, entry in enumerate(quarantine.entries):
            if index in self.runner.matched:
                continue
            path = entry.test.split("::", 1)[0]
            if path in self.runner.files or not (root / path).exists():
                stale.append(entry)
        return stale

    def _quarantined_tests(self, tests: list[str]) -> dict[str, Entry]:
        known = dict(self.runner.quarantined)
        matcher = self.runner.matcher
        if matcher and self.runner.relayed:
            for test in tests:  # under xdist the controller collected nothing itself
                if test not in known:
                    entry = matcher.match(test)
                    if entry is not None:
                        known[test] = entry
        return known

    def _history(
        self, letters: Mapping[str, str], session: pytest.Session, *, mass_failure: bool
    ) -> History | None:
        """This run added to the history (not an interrupted one), or the history as it
        was; None without a history, or when it could not be updated.  A mass failure
        is recorded as a run without outcomes: nothing is inferred from it."""
        path = self.options.history
        if path is None and self.stored_history is not None and self.history_read is not None:
            return self._stored_with_this_run(letters, session, mass_failure=mass_failure)
        if path is None:
            return None
        history = None
        with isolated(session, f"update the flaky history {path}"):
            if session.exitstatus == pytest.ExitCode.INTERRUPTED:
                if self.history_read is not None and self.history_read[0] is not None:
                    return self.history_read[1]
                return load_history(path) if os.path.exists(path) else None
            run: dict[str, Any] = {
                "started": utc_timestamp(self.started),
                "exitstatus": int(session.exitstatus),
                "tests": len(letters),
            }
            if mass_failure:
                run["mass_failure"] = True
                letters = {}
            history = update_history_file(
                path,
                [(self.key, self.platform, letters, run)],
                self.options.window,
                read_before=self.history_read,
            )
            self.history_read = None  # folded into: not to be reused again
            self.history_written = True
        return history

    def _stored_with_this_run(
        self, letters: Mapping[str, str], session: pytest.Session, *, mass_failure: bool
    ) -> History:
        """The store's history with this run added in memory (its record adds it to the
        store): what this run's findings are judged on."""
        assert self.history_read is not None
        stored = self.history_read[1]
        if session.exitstatus != pytest.ExitCode.INTERRUPTED:
            add_run(
                stored,
                self.key,
                platform=self.platform,
                outcomes={} if mass_failure else letters,
                run={"started": utc_timestamp(self.started), "source": "this run"},
                window=self.options.window,
            )
        return stored

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # Also after failures, -x and Ctrl-C. What is built here has no reference cycles.
        with gc_paused(), isolated(session, "finish the flaky report"):
            self._finish(session)

    def _finish(self, session: pytest.Session) -> None:
        run = outcomes_from_stats(self.stats, new_runs=self.options.new_runs > 1)
        letters = run.letters
        failed = run.first_attempt_failures
        mass = is_mass_failure(len(letters), failed, self.options.policy.mass_failure)
        history = self._history(letters, session, mass_failure=mass)
        budget = None
        if self.budget is not None:
            budget = (self.budget.total, *self.budget.counts())
            self.budget.remove()
        findings = self.findings = build_findings(
            key=self.key,
            platform=self.platform,
            run=run,
            quarantined=self._quarantined_tests(list(letters)),
            messages=self.runner.messages,
            stale=self._stale(),
            expired=self.runner.expired,
            history=history,
            max_pct=self.options.max_pct,
            mass_failure=(len(letters), failed) if mass else None,
            budget=budget,
            not_rerun=self.settled_failures,
        )
        self._warn(session, findings)
        if self.options.report:
            from pytest_accel.flaky.report import report_json

            with isolated(session, f"write the flaky report {self.options.report}"):
                write_json_atomic(self.options.report, report_json(findings))
                self.report_written = True
        summary = job_summary(self.config)
        if summary is not None:
            summary.add(summary_section(findings))
        if findings.over_limit:
            share = findings.share
            fail_session(
                session,
                f"the flaky share {share.pct:.2f}% on {share.platform} is over"
                f" --flaky-max-pct {findings.max_pct:g}",
            )

    def _warn(self, session: pytest.Session, findings: Findings, most: int = 20) -> None:
        """One warning per expired or stale entry, up to ``most``; then one for the rest."""
        path = self.runner.quarantine.path if self.runner.quarantine else ""
        notes = [
            (e.line, f"quarantine entry expired on {e.expires}; its failures count again: {e.test}")
            for e in findings.expired
        ] + [
            (e.line, f"stale quarantine entry, it matches no collected test: {e.test}")
            for e in findings.stale
        ]
        if len(notes) > most:
            rest = len(notes) - most
            notes = [*notes[:most], (None, f"{rest} more expired or stale quarantine entries")]
        warned = [
            warn(session.config, FlakyQuarantineWarning(one_line(text)), path, line)
            for line, text in notes
        ]
        escalated = [w.escalated_by for w in warned if w.escalated_by]
        if escalated:
            fail_session(
                session,
                f"{len(escalated)} FlakyQuarantineWarning(s) turned into errors by {escalated[0]}",
            )

    def pytest_accel_flaky_findings(self) -> Findings | None:
        return self.findings

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        findings = self.findings
        if findings is None:
            return
        lines = terminal_lines(findings)
        if self.history_written:
            lines.append(
                Line(
                    Tone.FILE,
                    f"pytest-accel: flaky history for {self.key!r} updated in"
                    f" {self.options.history}",
                )
            )
        if self.report_written:
            lines.append(
                Line(Tone.FILE, f"pytest-accel: flaky report written to {self.options.report}")
            )
        rerunner = self.rerunner
        if rerunner is not None and rerunner.deferred:
            lines.append(
                Line(
                    Tone.NOTE,
                    f"pytest-accel: {rerunner.deferred} test(s) left to pytest-rerunfailures'"
                    " reruns",
                )
            )
        write_section(terminalreporter, "pytest-accel flaky tests", lines)


def register_feature(config: pytest.Config, options: FlakyOptions) -> None:
    """The runner wherever tests run, the rest in the process that owns the session."""
    facts = session_facts(config)
    quarantine = None
    if options.quarantine:
        try:
            quarantine = load_quarantine(options.quarantine, facts.options.known_platforms)
        except InputError as exc:
            raise pytest.UsageError(f"--flaky-quarantine: {exc}") from None
    worker = is_xdist_worker(config)
    # A worker needs the history only to tell new tests and settled quarantined
    # failures; the controller validates it.
    settles = bool(options.reruns) and quarantine is not None
    needed = not worker or options.new_runs > 1 or settles
    history_read = _read_history(options) if needed else None
    stored = _stored_history(config, options) if options.history is None and not worker else None
    history_read = history_read if stored is None else (None, stored)
    handed = getattr(config, "workerinput", {}).get(WORKERINPUT_STORED_HISTORY)
    settled = (
        settled_failures(history_read[1], facts.key)
        if settles and history_read is not None
        else frozenset(handed["settled"] if handed is not None else ())
    )
    runner = QuarantineRunner(config, quarantine, facts.detection.platform)
    if quarantine is not None:
        config.pluginmanager.register(runner, "pytest_accel:quarantine")
        by_report = (
            runner.relayed or options.reruns or options.new_runs > 1 or _others_run_tests(config)
        )
        hook = QuarantineByReport(runner) if by_report else QuarantineByProtocol(runner)
        config.pluginmanager.register(hook, "pytest_accel:quarantine_reports")
    if options.reruns or options.new_runs > 1 or config.pluginmanager.has_plugin("rerunfailures"):
        register_status_letters(config)  # else the quarantine does, at its first report
    rerunner = None
    budget = _budget(config, options)
    if options.reruns or options.new_runs > 1:
        from pytest_accel.flaky.reruns import Rerunner

        known = _known_tests(history_read, facts.key) if options.new_runs > 1 else None
        if handed is not None and handed["known"] is not None:  # a worker, from the store
            known = frozenset(handed["known"])
        rerunner = Rerunner(
            config,
            options.policy,
            budget,
            new_runs=options.new_runs,
            known_tests=known,
            quarantined=runner.quarantined,
            settled_failures=settled,
        )
        config.pluginmanager.register(rerunner, "pytest_accel:reruns")
    if worker:
        return
    outputs = (
        ("--flaky-history", options.history, "history.json"),
        ("--flaky-report", options.report, "flaky.json"),
    )
    for flag, path, example in outputs:
        if path:
            try:
                check_writable(path, example)
            except InputError as exc:
                raise pytest.UsageError(f"{flag}: {exc}") from None
    job_summary(config)  # checked before any test runs
    interrupt_on_sigterm(config)
    plugin = FlakyPlugin(
        config,
        options,
        facts.detection,
        runner,
        key=facts.key,
        rerunner=rerunner,
        history_read=history_read,
    )
    plugin.budget = budget
    plugin.settled_failures = settled
    if stored is not None:
        known_here = _known_tests(history_read, facts.key)
        plugin.stored_history = {
            "settled": sorted(settled),
            "known": None if known_here is None else sorted(known_here),
        }
    config.pluginmanager.register(plugin, "pytest_accel:flaky")


def _stored_history(config: pytest.Config, options: FlakyOptions) -> History | None:
    """The history of the store's runs (``--accel-store``: the timing feature read them),
    as a history file of those runs would hold it; None without a store."""
    stored = config.hook.pytest_accel_stored_outcomes(config=config)
    if stored is None:
        return None
    runs = [
        RecordedRun(
            run.started,
            run.source,
            run.key,
            run.platform,
            run_letters(run.outcomes, run.attempts),
        )
        for run in stored
    ]
    return combine([], runs, options.window)


def _others_run_tests(config: pytest.Config) -> bool:
    """Another plugin runs the tests' protocol itself (pytest-rerunfailures and the
    like): then the quarantine checks each report as it is logged, whoever ran it."""
    return any(
        not (impl.hookwrapper or impl.wrapper) and impl.plugin_name != "runner"
        for impl in config.hook.pytest_runtest_protocol.get_hookimpls()
    )


def _read_history(options: FlakyOptions) -> HistoryRead | None:
    """The history before any test runs: a malformed one stops the session now, and the
    one read serves the end of the run (and ``--flaky-new-runs``) if nothing changed it."""
    path = options.history
    if path is None or not os.path.exists(path):
        return None
    try:
        return read_history(path)
    except InputError as exc:
        raise pytest.UsageError(f"--flaky-history: {exc}") from None


def _budget(config: pytest.Config, options: FlakyOptions) -> Budget | None:
    """The session's rerun budget: made by the process that owns the session, shared
    with xdist workers through a file they are told of."""
    total = options.policy.budget
    if total is None or not options.reruns:
        return None
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        return Budget(total, workerinput.get(WORKERINPUT_BUDGET))
    return Budget.create(total)


def _known_tests(history_read: HistoryRead | None, key: str) -> frozenset[str] | None:
    """The tests the history has seen under this key; None when it has no run yet (a
    first run makes nothing "new": there is nothing to be new against)."""
    if history_read is None:
        return None
    env = history_read[1].envs.get(key)
    if env is None or not env.runs:
        return None
    return frozenset(env.tests)
