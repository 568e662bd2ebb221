"""``--flaky-new-runs N``: a test the history has never seen runs N times in a row.

New tests are the likeliest to be flaky (Datadog's early flake detection runs them
several times before trusting them).  All N attempts run first; then their reports are
logged so that the run reads as it would with reruns:

- every attempt passed: one passing test (its JUnit ``<testcase>`` says how many runs);
- mixed: the failed attempts are logged as ``rerun`` and a passing one last, so the test
  is flaky (``K``) and new, and does not fail the session;
- every attempt failed: the first N-1 as ``rerun``, the last as the failure.
"""

from __future__ import annotations

import pytest
from _pytest.runner import call_and_report

from pytest_accel.outcomes import NEW_RUNS_ATTR, RERUN_TEARDOWN_ATTR

RUNS_PROPERTY = "new_test_runs"
Attempt = tuple[pytest.TestReport, pytest.TestReport | None, pytest.TestReport]


def run_repeated(item: pytest.Item, nextitem: pytest.Item | None, times: int) -> None:
    from pytest_accel.flaky.reruns import RERUN, forget_failures

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    attempts: list[Attempt] = []
    for run in range(times):
        last = run == times - 1
        if hasattr(item, "_request") and not item._request:
            item._initrequest()  # type: ignore[attr-defined]
        try:
            setup = call_and_report(item, "setup", log=False)
            call = call_and_report(item, "call", log=False) if setup.passed else None
            if last:
                item.user_properties.append((RUNS_PROPERTY, times))
            keep = None if last or item.session.shouldstop else item.parent
            teardown = call_and_report(item, "teardown", log=False, nextitem=keep or nextitem)
        finally:
            if hasattr(item, "_request"):
                item._request = False
                item.funcargs = None  # type: ignore[attr-defined]
        for report in (setup, call, teardown):
            if report is not None:
                report.rerun = run  # type: ignore[attr-defined]  # rerunfailures' field
        attempts.append((setup, call, teardown))
        if not last:
            forget_failures(item)
    log = item.ihook.pytest_runtest_logreport
    passing = [a for a in attempts if _passed(a)]
    final = passing[-1] if passing else attempts[-1]
    for attempt in attempts:
        if attempt is final or _passed(attempt):
            continue
        setup, call, teardown = attempt
        failing = setup if setup.failed else call
        assert failing is not None
        failing.outcome = RERUN  # type: ignore[assignment]
        setattr(failing, RERUN_TEARDOWN_ATTR, teardown.duration)
        log(report=failing)
    for report in final:
        if report is not None:
            setattr(report, NEW_RUNS_ATTR, times)
            log(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _passed(attempt: Attempt) -> bool:
    setup, call, _ = attempt
    return setup.passed and call is not None and call.passed
