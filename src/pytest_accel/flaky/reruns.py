"""``--flaky-reruns``: run a failed test again, in the same process, up to N times.

Each attempt gets a fresh test instance and fresh function-scoped fixtures; class,
module and session fixtures stay up (a collector or fixture whose own setup failed is
set up again).  A failed attempt that is tried again is logged with the outcome
``rerun`` (as pytest-rerunfailures does, so tools that know it understand ours), and
its teardown report is not logged, so JUnit XML keeps one ``<testcase>`` per test.

A test whose call passed but a subtest of it failed (pytest 9's ``subtests`` fixture,
``unittest``'s ``subTest``) failed, and is tried again as any failure is
(``attempts.call_holding_subtests``): a retried attempt's subtests are not logged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import pytest
from _pytest.runner import call_and_report

from pytest_accel.flaky.attempts import RERUN, call_holding_subtests, forget_failures
from pytest_accel.flaky.budget import Budget, MassFailure
from pytest_accel.flaky.options import RerunPolicy
from pytest_accel.outcomes import RERUN_TEARDOWN_ATTR, test_id

ATTEMPTS_PROPERTY = "attempts"


class Rerunner:
    """Reruns failures as the policy allows: filters on the failure, the session's
    budget, the mass-failure guard, a delay between attempts.  With ``new_tests`` it
    also runs each of those tests ``new_runs`` times (``--flaky-new-runs``)."""

    def __init__(
        self,
        config: pytest.Config,
        policy: RerunPolicy,
        budget: Budget | None = None,
        *,
        new_runs: int = 1,
        known_tests: frozenset[str] | None = None,
        quarantined: Mapping[str, object] | None = None,
        settled_failures: frozenset[str] = frozenset(),
    ) -> None:
        self.policy = policy
        self.budget = budget
        self.mass = MassFailure(policy.mass_failure)
        self.new_runs = new_runs
        self.known_tests = known_tests  # None: every test is known
        self.repeated: list[str] = []  # new tests run new_runs times here
        # pytest-rerunfailures, when installed: it reruns what it is configured for.
        self.rerunfailures: Any = config.pluginmanager.get_plugin("rerunfailures")
        self.deferred = 0
        self.refused = {"filter": 0, "mass failure": 0}
        # Quarantined tests (filled in at collection) and those of them to try once.
        self.quarantined: Mapping[str, object] = quarantined if quarantined is not None else {}
        self.settled_failures = settled_failures
        # Interactive and setup-only modes keep pytest's own protocol.
        self.off = any(
            config.getoption(name, False) for name in ("usepdb", "setuponly", "setupshow")
        )

    def defers_to_rerunfailures(self, item: pytest.Item) -> bool:
        count_for = getattr(self.rerunfailures, "get_reruns_count", None)
        if count_for is None:
            return False
        try:
            return bool(count_for(item))
        except Exception:  # its internals, not ours: then we rerun
            return False

    def is_new(self, item: pytest.Item) -> bool:
        return (
            self.new_runs > 1
            and self.known_tests is not None
            and test_id(item.nodeid) not in self.known_tests
        )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome in ("failed", RERUN):
            self.mass.failed.add(report.nodeid)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.mass.executed.add(nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        if self.off or item.get_closest_marker("xfail") is not None:
            return None  # never rerun an expected failure
        if self.is_new(item):
            from pytest_accel.flaky.repeats import run_repeated

            self.repeated.append(test_id(item.nodeid))
            run_repeated(item, nextitem, self.new_runs)
            return True
        if not self.policy.reruns:
            return None
        if self.defers_to_rerunfailures(item):
            self.deferred += 1
            return None
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        properties = list(item.user_properties)
        for attempt in range(1, self.policy.reruns + 2):
            item.user_properties[:] = properties  # record_property once per attempt
            retry = partial(self.retries, may_retry=attempt <= self.policy.reruns)
            if not _run_attempt(item, nextitem, attempt, retry):
                break
            if self.policy.delay:
                time.sleep(self.policy.delay)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def retries(self, item: pytest.Item, report: pytest.TestReport, may_retry: bool) -> bool:
        """Whether this failed attempt is tried again: the policy, in the order that
        spends nothing on a failure that is not to be rerun anyway."""
        if not (
            may_retry
            and report.failed
            and not hasattr(report, "wasxfail")
            and not (item.session.shouldfail or item.session.shouldstop)
        ):
            return False
        if self.settled_failures:
            nodeid = test_id(report.nodeid)
            if nodeid in self.settled_failures and nodeid in self.quarantined:
                return False  # the controller's findings say so (``Quarantined.not_rerun``)
        if not self.policy.allows(failure_text(report)):
            self.refused["filter"] += 1
            return False
        if self.mass.stops_reruns(report.nodeid):
            self.refused["mass failure"] += 1
            return False
        return self.budget is None or self.budget.take()


def failure_text(report: pytest.TestReport) -> str:
    """``ExceptionType: message``, as pytest's crash line shows it."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    return str(message if message is not None else report.longrepr or "")


def _run_attempt(
    item: pytest.Item,
    nextitem: pytest.Item | None,
    attempt: int,
    retries: Callable[[pytest.Item, pytest.TestReport], bool],
) -> bool:
    """Run setup, call and teardown once; True when the test is to be tried again."""
    log = item.ihook.pytest_runtest_logreport
    if hasattr(item, "_request") and not item._request:
        item._initrequest()  # type: ignore[attr-defined]  # as pytest's runtestprotocol does for a rerun item
    try:
        failing = None
        report = call_and_report(item, "setup", log=False)
        report.rerun = attempt - 1  # type: ignore[attr-defined]  # rerunfailures' field
        if retries(item, report):
            failing = report
        else:
            log(report=report)
            if report.passed:
                report, held = call_holding_subtests(item)
                report.rerun = attempt - 1  # type: ignore[attr-defined]
                if retries(item, held.first_failure() or report):
                    failing = report
                    held.supersede(report)
                else:
                    held.log_all(log)
                    log(report=report)
        if failing is not None:
            failing.outcome = RERUN  # type: ignore[assignment]
            teardown = call_and_report(item, "teardown", log=False, nextitem=_retry_boundary(item))
            setattr(failing, RERUN_TEARDOWN_ATTR, teardown.duration)
            log(report=failing)
            forget_failures(item)
            return True
        if attempt > 1:
            # Before the teardown report is made: JUnit XML reads properties from it.
            item.user_properties.append((ATTEMPTS_PROPERTY, attempt))
        if item.session.shouldfail or item.session.shouldstop:
            nextitem = None  # tear everything down, as pytest does
        teardown = call_and_report(item, "teardown", log=False, nextitem=nextitem)
        teardown.rerun = attempt - 1  # type: ignore[attr-defined]
        log(report=teardown)
        return False
    finally:
        if hasattr(item, "_request"):
            item._request = False
            item.funcargs = None  # type: ignore[attr-defined]


def _retry_boundary(item: pytest.Item) -> pytest.Item | None:
    """What the teardown before a retry keeps: the test's parents, up to (not including)
    the highest collector whose setup failed, which is set up again.

    pytest tears down what ``nextitem`` does not share; any node's chain serves.
    """
    stack: dict[Any, Any] = getattr(getattr(item.session, "_setupstate", None), "stack", {})
    for node, (_, failure) in stack.items():
        if failure is not None:
            return node.parent  # type: ignore[no-any-return]
    return item.parent  # type: ignore[return-value]
