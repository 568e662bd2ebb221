"""``--accel-report PATH``: the HTML report of this session, written at its end.

Registered only with the option, and only in the process that owns the session.  It
renders each feature's one result of the session, asked for through typed hooks
(``pytest_accel_timing_result``: the run as compared, the baseline as read;
``pytest_accel_flaky_findings``: the findings, with the history), after they finished:
its session end is the innermost ``pytest_sessionfinish`` wrapper, whose second half runs
after every plain implementation (theirs) and before the outer wrappers (the terminal
summary, which reports the file), whatever order the plugins were registered in.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from pytest_accel.files import InputError, check_writable, write_atomic
from pytest_accel.reports import is_xdist_worker, isolated, shown_at
from pytest_accel.text import Line, Tone, one_line

THIS_RUN = "this run"  # the session's record, as the page names it


class ReportWriter:
    def __init__(self, path: str) -> None:
        self.path = path
        self.written = False

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None]:
        result = yield  # every feature's session end, this run's results built
        with isolated(session, f"write the HTML report {self.path}"):
            self._write(session.config)
        return result

    def _write(self, config: pytest.Config) -> None:
        from pytest_accel.report.data import build_views, view_of_session
        from pytest_accel.report.page import render

        timing = config.hook.pytest_accel_timing_result(config=config)
        flaky = config.hook.pytest_accel_flaky_findings(config=config)
        view = view_of_session(THIS_RUN, timing) if timing is not None else None
        data = build_views(
            [view] if view is not None else [],
            timing.baseline if timing is not None else None,
            flaky.history if flaky is not None else None,
            timing.rule if timing is not None else None,
        )
        write_atomic(self.path, [render(data).encode("utf-8")])
        self.written = True

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.written:
            return
        line = Line(Tone.FILE, one_line(f"pytest-accel: HTML report written to {self.path}"))
        for kept in shown_at([line], terminalreporter.config.get_verbosity()):  # not at -qq
            terminalreporter.write_line(kept.text)


def register_feature(config: pytest.Config, path: str) -> None:
    if is_xdist_worker(config):
        return
    try:
        check_writable(path, example="report.html")
    except InputError as exc:
        raise pytest.UsageError(f"--accel-report: {exc}") from None
    config.pluginmanager.register(ReportWriter(path), "pytest_accel:report")
