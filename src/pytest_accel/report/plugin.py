"""``--accel-report PATH``: the HTML report of this session, written at its end.

Registered only with the option, and only in the process that owns the session.  It
renders each feature's one result of the session, asked for through
``pytest_accel_session_results`` (the timing feature's: the run as compared, the
baseline as read; the flaky feature's findings, with the history), after they finished: like
theirs its session-end hook is ``trylast``, and it is registered after them, so pluggy
calls it after them (and before the terminal summary, which reports the file).
"""

from __future__ import annotations

import pytest

from pytest_accel.files import InputError, check_writable, write_atomic
from pytest_accel.reports import is_xdist_worker, isolated
from pytest_accel.text import one_line

THIS_RUN = "this run"  # the session's record, as the page names it


class ReportWriter:
    def __init__(self, path: str) -> None:
        self.path = path
        self.written = False

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        with isolated(session, f"write the HTML report {self.path}"):
            self._write(session.config)

    def _write(self, config: pytest.Config) -> None:
        from pytest_accel.flaky.findings import Findings
        from pytest_accel.perf.result import TimingResult
        from pytest_accel.report.data import build_views, view_of_session
        from pytest_accel.report.page import render

        results = config.hook.pytest_accel_session_results(config=config)
        timing = next((r for r in results if isinstance(r, TimingResult)), None)
        flaky = next((r for r in results if isinstance(r, Findings)), None)
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
        if self.written:
            terminalreporter.write_line(
                one_line(f"pytest-accel: HTML report written to {self.path}")
            )


def register_feature(config: pytest.Config, path: str) -> None:
    if is_xdist_worker(config):
        return
    try:
        check_writable(path)
    except InputError as exc:
        raise pytest.UsageError(f"--accel-report: {exc}") from None
    config.pluginmanager.register(ReportWriter(path), "pytest_accel:report")
