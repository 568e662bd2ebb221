"""The report contract the features share: what an outcome is, which attributes our
features attach to pytest's reports, and where a session's reports are read from.

The features never read each other's state: the flaky feature marks a quarantined
failure or a rerun's teardown on the report itself, and the timing feature reads those
marks from the report.  Report attributes are plain values, so pytest-xdist carries
them from a worker to the controller unchanged.  At session end, each feature leaves
what it made in ``SessionOutputs`` for the HTML report.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_accel.text import line_start, one_line

if TYPE_CHECKING:
    from pytest_accel.flaky.history import History
    from pytest_accel.perf.baseline import Baseline
    from pytest_accel.perf.rule import Rule

# Set on a report by the flaky feature, read by the timing feature:
# the real outcome of a quarantined failure (reported as an expected failure),
QUARANTINED_ATTR = "pytest_accel_quarantined"
# and the teardown time of an attempt that was rerun (its teardown report is not logged).
RERUN_TEARDOWN_ATTR = "pytest_accel_teardown"
# pytest-rerunfailures' field, which our reruns set too: the attempt number (0 = first).
RERUN_ATTR = "rerun"

PHASES = ("setup", "call", "teardown")
# A test's final outcome that counts as a failure of the run.
FAILING = frozenset({"failed", "error", "crashed"})
# Outcomes ranked by how bad they are: the worst phase decides an attempt's outcome.
# A failed call outranks the teardown error that may follow it.
OUTCOME_RANK = {
    "passed": 0,
    "skipped": 1,
    "xfailed": 1,
    "xpassed": 1,
    "error": 2,
    "failed": 3,
    "crashed": 4,
}
OUTCOMES = frozenset(OUTCOME_RANK)  # what a record may say of a test


def phase_outcome(when: str, outcome: str, wasxfail: bool) -> str:
    """A report's contribution to its test's outcome, as pytest's summary counts it."""
    if when == "???":  # pytest-xdist's report for a test that took its worker down
        return "crashed"
    if outcome in ("failed", "rerun"):  # "rerun": a failed attempt that is tried again
        return "failed" if when == "call" else "error"
    if outcome == "skipped":
        return "xfailed" if wasxfail else "skipped"
    return "xpassed" if wasxfail and when == "call" else "passed"


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def xdist_worker_id() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")


def reports_are_relayed(config: pytest.Config) -> bool:
    """Whether reports may come from xdist workers (this is the controller's session)."""
    return config.pluginmanager.has_plugin("dsession") or bool(
        getattr(config.option, "numprocesses", None) or getattr(config.option, "tx", None)
    )


_STATS_LISTENER = "pytest_accel:stats"


def report_stats(config: pytest.Config) -> dict[str, list[Any]]:
    """The session's reports by status category: the terminal reporter keeps them all
    (pytest-xdist's relayed ones included), so reading them at the end costs nothing per
    test; without it (``-p no:terminal``) a listener keeps them the same way."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        stats: dict[str, list[Any]] = terminal.stats
        return stats
    listener = config.pluginmanager.get_plugin(_STATS_LISTENER)
    if listener is None:
        listener = StatsListener(config)
        config.pluginmanager.register(listener, _STATS_LISTENER)
    return listener.stats


class StatsListener:
    """Keeps reports by status category, as the terminal reporter does."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.stats: dict[str, list[Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        status = self.config.hook.pytest_report_teststatus(report=report, config=self.config)
        if status:
            category = status[0]
        else:  # the terminal plugin's own fallback is gone with it
            failed_phase = report.failed and report.when != "call"
            category = "error" if failed_phase else report.outcome
        self.stats.setdefault(category, []).append(report)


def test_id(nodeid: str) -> str:
    """A node id as our files and output carry it.

    A file name that is not valid UTF-8 reaches Python with lone surrogates, which no
    JSON, XML or terminal encoder takes; its bytes are written escaped, ``test_\\xff.py``,
    as Python shows them.  Every other id is returned as it is.
    """
    if nodeid.isascii():
        return nodeid
    try:
        nodeid.encode()
    except UnicodeEncodeError:
        return nodeid.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return nodeid


def test_ids(nodeids: list[str]) -> list[str]:
    """``test_id`` of each: the list itself when every id is ASCII (the usual case, one
    pass in C over a session's ids)."""
    return nodeids if all(map(str.isascii, nodeids)) else list(map(test_id, nodeids))


Parents = tuple[str | None, str | None]  # class node id, module node id


def node_parents(items: list[pytest.Item]) -> dict[str, Parents]:
    """Each test's class and module node ids (unittest classes included), with one
    collection-tree lookup per parent node: ten thousand tests share a few hundred.
    Keys and values are ``test_id``\\ s."""
    by_parent: dict[int, Parents] = {}
    parents: dict[str, Parents] = {}
    for item in items:
        found = by_parent.get(id(item.parent))
        if found is None:
            cls = item.getparent(pytest.Class)
            module = item.getparent(pytest.Module)
            found = by_parent[id(item.parent)] = (
                test_id(cls.nodeid) if cls is not None else None,
                test_id(module.nodeid) if module is not None else None,
            )
        parents[test_id(item.nodeid)] = found
    return parents


def warn(config: pytest.Config, warning: Warning, path: str, line: int | None) -> bool:
    """Issue ``warning`` at ``path:line`` through Python's warnings machinery, so that
    ``-W`` and ``filterwarnings`` apply to it as to any warning (pytest captures
    warnings issued while ``pytest_sessionfinish`` runs).  Under ``-p no:warnings`` a
    test's warnings are never shown, and neither is this one.

    False when a filter turned it into an error: the caller fails the session.
    """
    if config.pluginmanager.is_blocked("warnings"):
        return True
    try:
        warnings.warn_explicit(warning, type(warning), line_start(path), line or 0)
    except type(warning):
        return False
    return True


@dataclass
class SessionOutputs:
    """What the features made of this session, filled as each finishes, for the ones
    that show it all (the HTML report)."""

    record: Callable[[], dict[str, Any]] | None = None  # the timing record, as written
    baseline: Baseline | None = None  # the baseline as read, before this run was added
    rule: Rule | None = None  # the regression rule the run was judged by
    history: History | None = None  # the flaky history, with this run


outputs_key = pytest.StashKey[SessionOutputs]()


def session_outputs(config: pytest.Config) -> SessionOutputs:
    return config.stash.setdefault(outputs_key, SessionOutputs())


exit_reasons_key = pytest.StashKey[list[str]]()


def fail_session(session: pytest.Session, reason: str) -> None:
    """A plugin option fails a session whose tests passed; the last line says why."""
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    session.config.stash.setdefault(exit_reasons_key, []).append(reason)


@contextlib.contextmanager
def isolated(session: pytest.Session, what: str) -> Iterator[None]:
    """One piece of a feature's session-end work: if it fails, the rest still runs
    (every other file is still written), the failure is one line naming what and why
    (never a traceback), and the exit status says the run did not go through."""
    try:
        yield
    except Exception as exc:  # the last line of defence at session end
        fail_session(session, f"could not {what}: {problem(exc)}")


def problem(exc: BaseException) -> str:
    """An exception as one line: the file and the OS's words, or our own message."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    if isinstance(exc, ValueError | LookupError | TypeError):
        return f"{type(exc).__name__}: {exc}"  # a bug of ours: say so, in one line
    return str(exc) or type(exc).__name__


def write_exit_reasons(config: pytest.Config) -> None:
    """After pytest's own last line: why a plugin option set the exit status."""
    reasons = config.stash.get(exit_reasons_key, [])
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    for reason in reasons:
        line = one_line(f"pytest-accel: exit status 1: {reason}")
        if terminal is not None:
            terminal.write_line(line, red=True)
        else:
            sys.stderr.write(line + "\n")
