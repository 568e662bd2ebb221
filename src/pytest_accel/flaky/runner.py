"""The flaky features' part that runs wherever tests run (an xdist worker included).

``QuarantineRunner`` notes which entries matched a collected test and turns a
quarantined failure into a report that does not fail the session (hooked in by
``QuarantineByProtocol`` or ``QuarantineByReport``); ``StatusLetters`` gives reruns,
flaky passes and quarantined failures their letters.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_accel.flaky.quarantine import Entry, Matcher, Quarantine, candidate_keys, utc_today
from pytest_accel.outcomes import QUARANTINED_ATTR, test_id
from pytest_accel.reports import reports_are_relayed

QUARANTINE_PROPERTY = "quarantined"
# What a worker tells the controller about its collection (xdist ``workeroutput``).
WORKEROUTPUT_KEY = "pytest_accel_quarantine"


def _short_message(report: pytest.TestReport) -> str | None:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or (str(report.longrepr) if report.longrepr else "")
    first = message.strip().splitlines()[0] if message.strip() else ""
    return first[:200] or None


class StatusLetters:
    """``R``/RERUN, ``K``/FLAKY and ``Q``/QUARANTINED, and their summary-line counts.

    Registered only when something produces those reports (our reruns, a quarantined
    failure, pytest-rerunfailures): the hook runs for every report.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Any:
        # Called for every report: the common case (a passing phase) returns first.
        if report.outcome == "passed":
            # The report's own fields: an absent attribute costs an exception per test.
            if report.when == "call" and report.__dict__.get("rerun"):
                return "flaky", "K", ("FLAKY", {"yellow": True})
            return None
        if getattr(report, QUARANTINED_ATTR, None):
            return "quarantined", "Q", ("QUARANTINED", {"yellow": True})
        if report.outcome not in ("failed", "skipped"):  # "rerun": not pytest's own
            return "rerun", "R", ("RERUN", {"yellow": True})
        return None


STATUS_LETTERS = "pytest_accel:status_letters"


def register_status_letters(config: pytest.Config) -> None:
    """Once: the hook runs for every report from then on, so it is registered only when
    something produces such reports (reruns from the start, a quarantine at its first)."""
    if not config.pluginmanager.has_plugin(STATUS_LETTERS):
        config.pluginmanager.register(StatusLetters(), STATUS_LETTERS)


class QuarantineRunner:
    """Quarantine where the tests run: its collection hook is registered only with a
    quarantine list; otherwise it is just empty state.  A quarantined failure is
    rewritten either as its test runs (``QuarantineByProtocol``, when nothing else
    runs the tests' protocol) or as each report is logged (``QuarantineByReport``)."""

    def __init__(self, config: pytest.Config, quarantine: Quarantine | None, platform: str):
        self.config = config
        self.quarantine = quarantine
        applying, self.expired = quarantine.split(platform, utc_today()) if quarantine else ([], [])
        self.matcher = Matcher(applying)
        self.all_entries: dict[str, list[int]] = {}
        for index, entry in enumerate(quarantine.entries if quarantine else ()):
            self.all_entries.setdefault(entry.test, []).append(index)
        self.matched: set[int] = set()  # entries covering a collected test
        self.files: set[str] = set()  # files tests were collected from
        self.quarantined: dict[str, Entry] = {}  # collected tests an entry applies to
        self.items: dict[pytest.Item, Entry] = {}  # the same, by item (hashed by identity)
        self.messages: dict[str, str] = {}  # quarantined failure -> its message
        # The xdist controller: reports arrive from workers, already quarantined there.
        self.relayed = reports_are_relayed(config)

    @pytest.hookimpl(tryfirst=True)  # before -k, -m and sharding deselect anything
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.quarantine is None:
            return
        all_entries, matcher, files = self.all_entries, self.matcher, self.files
        entry_files = {test.split("::", 1)[0] for test in all_entries}
        by_parent: dict[int, bool] = {}  # parent node -> whether an entry names its file
        for item in items:
            named = by_parent.get(id(item.parent))
            if named is None:
                path = test_id(item.nodeid).partition("::")[0]
                files.add(path)
                named = by_parent[id(item.parent)] = path in entry_files
            if not named:
                continue  # most tests: no entry names their file
            nodeid = test_id(item.nodeid)
            entry = None  # the most specific entry that applies here
            for key in candidate_keys(nodeid):
                indices = all_entries.get(key)
                if indices:
                    self.matched.update(indices)
                    entry = entry or matcher.by_test.get(key)
            if entry is not None:
                self.quarantined[nodeid] = self.items[item] = entry
                item.user_properties.append((QUARANTINE_PROPERTY, entry.reason or "true"))

    def apply(self, report: pytest.TestReport, entry: Entry | None = None) -> None:
        """A failed report of a quarantined test reads like an expected failure, so
        nothing counts it as one: the session, -x, xdist's --maxfail, JUnit XML (a
        ``<skipped>``).  The real outcome travels along."""
        if report.outcome != "failed" or not self.matcher:
            return
        nodeid = test_id(report.nodeid)
        entry = entry or self.quarantined.get(nodeid) or self.matcher.match(nodeid)
        if entry is None:
            return
        setattr(report, QUARANTINED_ATTR, "failed")
        register_status_letters(self.config)  # before the terminal asks for the letter
        self.note_message(report)
        report.outcome = "skipped"
        report.wasxfail = f"quarantined: {entry.describe()}"

    def note_message(self, report: pytest.TestReport) -> None:
        message = _short_message(report)
        nodeid = test_id(report.nodeid)
        if message and nodeid not in self.messages:  # the first failure tells most
            self.messages[nodeid] = message

    def pytest_sessionfinish(self) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKEROUTPUT_KEY] = {
                "matched": sorted(self.matched),
                "files": sorted(self.files),
            }


class QuarantineByProtocol:
    """Runs a quarantined test's phases and rewrites its failed reports before they are
    logged; every other test goes its usual way after one dict lookup.  (A hook on every
    report would cost a call per phase of every test: three per test.)"""

    def __init__(self, runner: QuarantineRunner) -> None:
        self.runner = runner

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        entry = self.runner.items.get(item)
        if entry is None:
            return None
        from _pytest.runner import runtestprotocol

        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for report in runtestprotocol(item, log=False, nextitem=nextitem):
            self.runner.apply(report, entry)
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


class QuarantineByReport:
    """Rewrites each failed report as it is logged: where something else runs the tests'
    protocol (our reruns, pytest-rerunfailures), and on the xdist controller, which
    notes the messages of the reports its workers quarantined."""

    def __init__(self, runner: QuarantineRunner) -> None:
        self.runner = runner

    @pytest.hookimpl(tryfirst=True)  # before the session, xdist and the terminal see it
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        runner = self.runner
        if runner.relayed:
            if report.__dict__.get(QUARANTINED_ATTR):  # from a worker
                register_status_letters(runner.config)
                runner.note_message(report)
            return
        runner.apply(report)
