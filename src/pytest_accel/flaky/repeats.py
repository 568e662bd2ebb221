"""``--flaky-new-runs N``: a test the history has never seen runs N times in a row.

New tests are the likeliest to be flaky (Datadog's early flake detection runs them
several times before trusting them).  All N attempts run first; then their reports are
logged so that the run reads as it would with reruns:

- every attempt passed: one passing test, not a flaky one (its JUnit ``<testcase>`` says
  how many runs);
- mixed: the failed attempts are logged as ``rerun`` and a passing one last, so the test
  is flaky (``K``) and new, and does not fail the session;
- every attempt failed: the first N-1 as ``rerun``, the last as the failure.
"""

from __future__ import annotations

import pytest
from _pytest.runner import call_and_report

from pytest_accel.flaky.attempts import (
    RERUN,
    HeldSubtests,
    call_holding_subtests,
    forget_failures,
)
from pytest_accel.outcomes import (
    NEW_OUTCOMES_ATTR,
    NEW_RUNS_ATTR,
    OUTCOME_RANK,
    RERUN_TEARDOWN_ATTR,
    phase_outcome,
)

RUNS_PROPERTY = "new_test_runs"
Attempt = tuple[pytest.TestReport, pytest.TestReport | None, pytest.TestReport]


def run_repeated(item: pytest.Item, nextitem: pytest.Item | None, times: int) -> None:
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    attempts, subtests = _run_each(item, nextitem, times)
    log = item.ihook.pytest_runtest_logreport
    passing = [run for run, attempt in enumerate(attempts) if _passed(attempt)]
    final_run = passing[-1] if passing else len(attempts) - 1
    final = attempts[final_run]
    outcomes = [_outcome(attempt) for attempt in attempts]
    for run, held in subtests.items():
        call = attempts[run][1]
        if run != final_run and call is not None:
            held.supersede(call)
    logged_failures = 0
    for attempt in attempts:
        if attempt is final or _passed(attempt):
            continue
        setup, call, teardown = attempt
        failing = setup if setup.failed else call
        assert failing is not None
        failing.outcome = RERUN  # type: ignore[assignment]
        failing.rerun = logged_failures  # type: ignore[attr-defined]
        setattr(failing, RERUN_TEARDOWN_ATTR, teardown.duration)
        log(report=failing)
        logged_failures += 1
    final_subtests = subtests.get(final_run)
    for report in final:
        if report is not None:
            if report.when == "call" and final_subtests is not None:
                final_subtests.log_all(log)  # as they would have been: before their call
            # Counted as rerunfailures counts: a passing final report with reruns before
            # it is flaky; one that passed every time is a pass.
            report.rerun = logged_failures  # type: ignore[attr-defined]
            setattr(report, NEW_RUNS_ATTR, times)
            setattr(report, NEW_OUTCOMES_ATTR, outcomes)
            log(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _run_each(
    item: pytest.Item, nextitem: pytest.Item | None, times: int
) -> tuple[list[Attempt], dict[int, HeldSubtests]]:
    """Every run's reports, none logged yet, and each run's subtests, held until it is
    known which run is logged as the test's."""
    attempts: list[Attempt] = []
    subtests: dict[int, HeldSubtests] = {}
    for run in range(times):
        last = run == times - 1
        if hasattr(item, "_request") and not item._request:
            item._initrequest()  # type: ignore[attr-defined]
        try:
            setup = call_and_report(item, "setup", log=False)
            call = None
            if setup.passed:
                call, subtests[run] = call_holding_subtests(item)
            if last:
                item.user_properties.append((RUNS_PROPERTY, times))
            keep = None if last or item.session.shouldstop else item.parent
            teardown = call_and_report(item, "teardown", log=False, nextitem=keep or nextitem)
        finally:
            if hasattr(item, "_request"):
                item._request = False
                item.funcargs = None  # type: ignore[attr-defined]
        attempts.append((setup, call, teardown))
        if not last:
            forget_failures(item)
    return attempts, subtests


def _outcome(attempt: Attempt) -> str:
    """What one run came to: its worst phase, as the record ranks outcomes."""
    worst = "passed"
    for report in attempt:
        if report is not None:
            phase = phase_outcome(report.when, report.outcome, hasattr(report, "wasxfail"))
            if OUTCOME_RANK[phase] > OUTCOME_RANK[worst]:
                worst = phase
    return worst


def _passed(attempt: Attempt) -> bool:
    setup, call, _ = attempt
    return setup.passed and call is not None and call.passed
