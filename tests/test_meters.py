"""The meter protocol (``perf.meters``): each meter begun and ended with the test's item,
at the span it names, whichever plugin runs the test's protocol."""

from __future__ import annotations

import pytest

CONFTEST = """
import pytest
from pytest_accel.outcomes import MEASURES_ATTR
from pytest_accel.perf.meters import add_meter

EVENTS = []


class Meter:
    read_at_end = False

    def __init__(self, span):
        self.span = span

    def begin(self, item):
        EVENTS.append(("begin", self.span, item.nodeid, isinstance(item, pytest.Item)))

    def end(self, item):
        EVENTS.append(("end", self.span, item.nodeid, isinstance(item, pytest.Item)))
        return {self.span + "_ends": sum(e[:2] == ("end", self.span) for e in EVENTS)}


def pytest_configure(config):
    add_meter(config, Meter("test"))
    add_meter(config, Meter("call"))


def pytest_runtest_logstart(nodeid):
    EVENTS.append(("logstart", nodeid))


def pytest_runtest_logreport(report):
    figures = getattr(report, MEASURES_ATTR, None)
    if figures and report.when in ("call", "teardown"):
        EVENTS.append(("report", report.when, report.nodeid, report.outcome, dict(figures)))


def pytest_unconfigure(config):
    import json
    with open("events.json", "w") as handle:
        json.dump(EVENTS, handle)
"""

TESTS = """
import pathlib

def test_steady():
    pass

def test_flaky():
    marker = pathlib.Path("tried")
    if not marker.exists():
        marker.write_text("")
        raise AssertionError("first attempt")
"""


FLAKY = "test_m.py::test_flaky"
BEGIN_TEST, BEGIN_CALL = ("begin", "test", FLAKY, True), ("begin", "call", FLAKY, True)
END_TEST, END_CALL = ("end", "test", FLAKY, True), ("end", "call", FLAKY, True)
LOGSTART = ("logstart", FLAKY)


def _reports(attempt: int, call: str) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """An attempt's call and teardown reports with their figures: test_steady's ran
    first, so the flaky test's first attempt ends each meter for the second time."""
    return (
        ("report", "call", FLAKY, call, {"call_ends": 1 + attempt}),
        ("report", "teardown", FLAKY, "passed", {"test_ends": 1 + attempt}),
    )


FAILED_CALL, FAILED_TEARDOWN = _reports(1, "failed")
RERUN_CALL, RERUN_TEARDOWN = _reports(1, "rerun")
PASSED_CALL, PASSED_TEARDOWN = _reports(2, "passed")
RAN_ONCE = [BEGIN_TEST, LOGSTART, BEGIN_CALL, END_CALL, FAILED_CALL, END_TEST, FAILED_TEARDOWN]
# The own reruns log a failed attempt's call as it ends and its teardown not at all.
OWN_RERUNS = [BEGIN_TEST, LOGSTART, BEGIN_CALL, END_CALL, END_TEST, RERUN_CALL]
OWN_RERUNS += [BEGIN_CALL, END_CALL, PASSED_CALL, END_TEST, PASSED_TEARDOWN]
# pytest-rerunfailures runs each attempt, then logs its start and reports.
RERUNFAILURES = [BEGIN_TEST, LOGSTART, BEGIN_CALL, END_CALL, END_TEST, RERUN_CALL, RERUN_TEARDOWN]
RERUNFAILURES += [LOGSTART, BEGIN_CALL, END_CALL, END_TEST, PASSED_CALL, PASSED_TEARDOWN]


@pytest.mark.parametrize(
    ("runner", "expected"),
    [
        pytest.param(["-p", "no:rerunfailures"], RAN_ONCE, id="once"),
        pytest.param(["-p", "no:rerunfailures", "--flaky-reruns=1"], OWN_RERUNS, id="own-reruns"),
        pytest.param(
            ["--reruns=1"],
            RERUNFAILURES,
            id="pytest-rerunfailures",
            marks=pytest.mark.requires("pytest_rerunfailures"),
        ),
    ],
)
def test_each_meter_is_begun_and_ended_with_the_tests_item_at_its_span(
    pytester: pytest.Pytester, runner: list[str], expected: list[tuple[object, ...]]
) -> None:
    """A whole test's meter is begun once, before anything of the test is logged, even
    where another plugin runs the protocol and its reruns, and ended at each attempt's
    teardown; a call's meter is begun and ended around each attempt's call; both are
    given the test's item, and the figures ride the reports of their span."""
    import json

    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_m=TESTS)
    result = pytester.runpytest_inprocess(*runner)
    outcomes = result.parseoutcomes()
    assert outcomes.get("rerun", 0) == (expected is not RAN_ONCE), outcomes
    events = [tuple(e) for e in json.loads((pytester.path / "events.json").read_text())]
    assert [e for e in events if FLAKY in e] == expected
    steady = "test_m.py::test_steady"
    assert [e[:2] for e in events if steady in e and e[0] != "report"] == [
        ("begin", "test"),
        ("logstart", steady),
        ("begin", "call"),
        ("end", "call"),
        ("end", "test"),
    ]
