"""A session's reports and its end, on pytest's side of the report contract
(``outcomes``): where the reports are read from, the GitHub job summary the features
share, and how a piece of session-end work that fails sets the exit status in one line.
"""

from __future__ import annotations

import contextlib
import operator
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby, repeat
from operator import attrgetter
from typing import Any

import pytest

from pytest_accel.files import InputError, check_writable
from pytest_accel.github import JobSummary, in_github_actions
from pytest_accel.outcomes import Parents, test_id, test_ids
from pytest_accel.text import Line, Tone, line_start, one_line, problem


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def xdist_worker_id() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")


def reports_are_relayed(config: pytest.Config) -> bool:
    """Whether reports may come from xdist workers (this is the controller's session)."""
    return config.pluginmanager.has_plugin("dsession") or bool(
        getattr(config.option, "numprocesses", None) or getattr(config.option, "tx", None)
    )


def runs_tests_here(config: pytest.Config) -> bool:
    """Whether this process runs tests: an xdist worker, or a session without xdist
    (not its controller: at ``pytest_configure`` its ``dsession`` may not be registered
    yet, so the options say it)."""
    return is_xdist_worker(config) or not reports_are_relayed(config)


def collected_ids(session: pytest.Session) -> dict[str, str]:
    """Each collected test's id (as our files write it) to itself: what a file read
    before collection can hold its ids as (``Baseline.share_ids``,
    ``History.share_ids``), so that each is held once, not once for the file and once
    for the test (about 10 MB a file at 100,000 tests).  Made once per collection for
    every feature that asks."""
    items = session.items
    kept = session.stash.get(_COLLECTED_IDS, None)
    if kept is not None and kept[0] is items and kept[1] == len(items):
        return kept[2]
    listed = list(map(test_id, map(_NODEID, items)))
    ids = dict(zip(listed, listed, strict=True))
    session.stash[_COLLECTED_IDS] = (items, len(items), ids)
    return ids


_COLLECTED_IDS = pytest.StashKey[tuple[list[pytest.Item], int, dict[str, str]]]()


_NODEID = operator.attrgetter("nodeid")
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


def node_parents(items: list[pytest.Item]) -> dict[str, Parents]:
    """Each test's class and module node ids (unittest classes included), with one
    collection-tree lookup per parent node: ten thousand tests share a few hundred.
    Keys and values are ``test_id``\\ s."""
    known: dict[int, Parents] = {}
    found: list[Parents] = []
    for parent, tests in parent_runs(items):
        parents = known.get(id(parent))
        if parents is None:
            parents = known[id(parent)] = parents_of(parent)
        found += repeat(parents, len(tests))
    return dict(zip(test_ids(list(map(_NODEID, items))), found, strict=True))


def parent_runs(
    items: list[pytest.Item],
) -> Iterator[tuple[pytest.Collector | None, list[pytest.Item]]]:
    """The tests in order, a run of one parent node's at a time: a module's or a
    class's tests are collected together, so a few hundred runs hold ten thousand."""
    for parent, run in groupby(items, key=_PARENT):
        yield parent, list(run)


def parents_of(node: pytest.Collector | None) -> Parents:
    """The class and the module a test whose parent is ``node`` is in."""
    if node is None:
        return (None, None)
    cls = node.getparent(pytest.Class)
    module = node.getparent(pytest.Module)
    return (
        test_id(cls.nodeid) if cls is not None else None,
        test_id(module.nodeid) if module is not None else None,
    )


_NODEID = attrgetter("nodeid")  # a property on pytest 9: read once, from C
_PARENT = attrgetter("parent")


@dataclass(frozen=True)
class Warned:
    """What became of a warning ``warn`` issued: shown, or turned into an error by the
    filter that names its class; a blanket ``error`` filter (``error``,
    ``error::Warning``) it does not obey is named too, for a note."""

    escalated_by: str | None = None  # the filter, as the user wrote it, and where
    blanket: str | None = None  # an ``error`` filter that would have, had it named it


def warn(config: pytest.Config, warning: Warning, path: str, line: int | None) -> Warned:
    """Issue ``warning`` at ``path:line`` through Python's warnings machinery (pytest
    captures warnings issued while ``pytest_sessionfinish`` runs), so that ``-W`` and
    ``filterwarnings`` show, hide or count it as any warning.  Only a filter that names
    its class (``error::pytest_accel.PerfRegressionWarning``) turns it into an error:
    a project's blanket ``filterwarnings = ["error"]`` is strictness about its own
    code, not a request to fail on timings (``--perf-fail`` is).  Under
    ``-p no:warnings`` a test's warnings are never shown, and neither is this one."""
    if config.pluginmanager.is_blocked("warnings"):
        return Warned()
    category = type(warning)
    effective = _effective_filter(category, str(warning), path, line or 0)
    if effective is not None and effective[0] == "error":
        named = issubclass(effective[2], category)
        written = _as_written(config, effective)
        if named:
            try:
                warnings.warn_explicit(warning, category, line_start(path), line or 0)
            except category:
                return Warned(escalated_by=written)
            return Warned()
        with warnings.catch_warnings():  # shown and recorded, as pytest records any
            warnings.simplefilter("always", category)
            warnings.warn_explicit(warning, category, line_start(path), line or 0)
        return Warned(blanket=written)
    warnings.warn_explicit(warning, category, line_start(path), line or 0)
    return Warned()


def _effective_filter(
    category: type[Warning], text: str, path: str, line: int
) -> tuple[Any, ...] | None:
    """The entry of ``warnings.filters`` that applies, as Python picks it (the first
    that matches)."""
    module = path[:-3] if path.endswith(".py") else path
    for entry in warnings.filters:
        _, message, kind, module_pattern, lineno = entry
        if (
            (message is None or message.match(text))
            and issubclass(category, kind)
            and (module_pattern is None or module_pattern.match(module))
            and lineno in (0, line)
        ):
            return entry
    return None


def _as_written(config: pytest.Config, entry: tuple[Any, ...]) -> str:
    """The user's filter behind ``entry`` and where it was given: ``-W 'error'``,
    ``filterwarnings 'error' (pyproject.toml)``; else Python's own (``python -W``,
    ``PYTHONWARNINGS``)."""
    from _pytest.config import parse_warning_filter

    action, message, kind = entry[0], entry[1], entry[2]
    pattern = message.pattern if message is not None else ""
    ini = [str(v) for v in config.getini("filterwarnings")]
    command_line = [str(v) for v in (config.known_args_namespace.pythonwarnings or [])]
    where = config.inipath.name if config.inipath else "the ini file"
    # pytest applies the ini's, then -W's: the last applied is the first that matches.
    for source, given in (("-W", command_line[::-1]), (f"filterwarnings ({where})", ini[::-1])):
        for text in given:
            try:
                parsed = parse_warning_filter(text, escape=False)
            except (pytest.UsageError, ValueError):
                continue
            if parsed[0] == action and parsed[2] is kind and (parsed[1] or "") in (pattern, ""):
                return f"{source} {text!r}"
    return f"Python's warning filter {action}::{kind.__name__} (python -W, PYTHONWARNINGS)"


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
        fail_session(session, f"could not {what}: {problem(exc, what)}")


def write_exit_reasons(config: pytest.Config) -> None:
    """After pytest's own last line: why a plugin option set the exit status."""
    for reason in config.stash.get(exit_reasons_key, []):
        last_line(config, f"pytest-accel: exit status 1: {reason}", red=True)


summary_key = pytest.StashKey[JobSummary]()
_no_summary_key = pytest.StashKey[str]()


def job_summary(config: pytest.Config) -> JobSummary | None:
    """The run's job summary wherever ``GITHUB_STEP_SUMMARY`` names a file (GitHub
    Actions sets it; so can anyone); features add sections and ``write_job_summary``
    writes them once, after all of them.  None elsewhere; under GitHub Actions without
    the variable, the run's last lines say why nothing was written."""
    found = config.stash.get(summary_key, None)
    if found is None:
        path = os.environ.get("GITHUB_STEP_SUMMARY")
        if not path:
            if in_github_actions():
                config.stash[_no_summary_key] = (
                    "no job summary written: GITHUB_ACTIONS is true but GITHUB_STEP_SUMMARY"
                    " names no file"
                )
            return None
        try:
            check_writable(path, example="summary.md")
        except InputError as exc:
            raise pytest.UsageError(f"GITHUB_STEP_SUMMARY: {exc}") from None
        found = config.stash[summary_key] = JobSummary(path)
    return found


def kept_job_summary(config: pytest.Config) -> JobSummary:
    """The run's job summary, kept even where no ``GITHUB_STEP_SUMMARY`` names a file
    (a run in a pod, whose store hands it to the runner): called while the session
    configures, before any feature adds a section."""
    found = job_summary(config)
    if found is None:
        found = config.stash[summary_key] = JobSummary(None)
    return found


def write_job_summary(session: pytest.Session) -> None:
    summary = session.config.stash.get(summary_key, None)
    why_not = session.config.stash.get(_no_summary_key, None)
    if summary is not None:
        with isolated(session, f"append to GITHUB_STEP_SUMMARY {summary.path}"):
            why_not = summary.write()
    if why_not is not None:
        last_line(session.config, f"pytest-accel: {why_not}")


def last_line(config: pytest.Config, line: str, *, red: bool = False) -> None:
    """A line after pytest's own last line (the terminal, or stderr without it)."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.write_line(one_line(line), red=red)
    else:
        sys.stderr.write(one_line(line) + "\n")


# A tone's colour in the terminal, as pytest colours its own statuses.
MARKUP: dict[Tone, dict[str, bool]] = {
    Tone.ALARM: {"red": True, "bold": True},
    Tone.CHANGE: {"yellow": True},
    Tone.OK: {"green": True},
    Tone.NOTE: {},
    Tone.FILE: {},
    Tone.DETAIL: {},
}
# The lowest verbosity (``-q`` is -1, ``-qq`` -2) at which a tone's lines are shown:
# alarms always, verdicts and files from -q on, notes at the default, details from -v on.
LEAST_VERBOSITY = {
    Tone.ALARM: -99,
    Tone.CHANGE: -1,
    Tone.OK: -1,
    Tone.FILE: -1,
    Tone.NOTE: 0,
    Tone.DETAIL: 1,
}


def shown_at(lines: list[Line], verbosity: int) -> list[Line]:
    """The lines a run at ``verbosity`` shows."""
    return [line for line in lines if verbosity >= LEAST_VERBOSITY[line.tone]]


def write_section(terminal: pytest.TerminalReporter, title: str, lines: list[Line]) -> None:
    """A feature's section of the terminal summary: its lines coloured by tone, those
    the verbosity shows; the section's title bar only at the default verbosity and
    above (``-q`` keeps pytest's own output to what matters, and so does this)."""
    verbosity = terminal.config.get_verbosity()
    kept = shown_at(lines, verbosity)
    if not kept:
        return
    # pytest ended the progress line before its summary but still counts it open
    # (``currentfspath``): the first ``write_line`` would end it again, a blank line
    # under the bar. It is closed here, as ``ensure_newline`` would, without the line.
    if getattr(terminal, "currentfspath", None) is not None:
        terminal.currentfspath = None
    if verbosity >= 0:
        terminal.section(title, sep="-")
    for line in kept:
        terminal.write_line(line.text, **MARKUP[line.tone])
