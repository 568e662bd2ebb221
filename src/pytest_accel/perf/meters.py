"""Per-test meters: one protocol, one driver, one report attribute.

A meter measures each test while it runs: the CPU its call waited for
(``perf.waits``), the compilation it ran (``perf.compiles``), its peak device memory
(``perf.device_memory``).  Each measures one span:

- ``"call"``: inside the window pytest times the call in (``pytest_runtest_call``),
  so that nothing outside it, a report shown or made, is taken from a call that never
  paid it; each attempt of a rerun call is one span;
- ``"test"``: from the test's start (``pytest_runtest_logstart``) to its teardown's
  report.

One driver per span (``CallDriver``, ``WholeTestDriver``) begins and ends every meter of
it, skips subtests' reports (a subtest is a part of its test's call, measured with it)
and puts what the meters measured on the report as one plain mapping
(``outcomes.MEASURES_ATTR``), which pytest-xdist carries to the controller unchanged.
A meter is added when it has something to measure (JAX imported, a device in use): a
suite without it pays nothing per test for it, and a span's driver is registered with
its first meter.  Session-wide figures (full collections, all threads' waits) are no
meter's: they are read at a session's start and end.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import pytest

from pytest_accel.outcomes import MEASURES_ATTR, is_subtest

Span = Literal["call", "test"]


class Meter(Protocol):
    """Measures one span of each test; ``end`` returns its figures for the report
    (plain values, keyed as ``outcomes.MEASURES_ATTR`` says), empty where it has none:
    a meter added while a test runs is ended without being begun for it."""

    span: Span

    def begin(self, nodeid: str) -> None: ...

    def end(self, nodeid: str) -> Mapping[str, Any]: ...


@runtime_checkable
class Checks(Protocol):
    """A meter whose figures can fail the test (a peak over ``--accel-max-device-memory``):
    ``check`` may set the report's outcome after its figures are on it."""

    def check(self, report: pytest.TestReport, measured: Mapping[str, Any]) -> None: ...


class CallDriver:
    """Drives the meters of tests' calls: begun and ended inside the window pytest times
    the call in, their figures put on the call report before anything else reads it
    (pytest-xdist sends it on)."""

    def __init__(self) -> None:
        self.meters: list[Meter] = []
        self.measured: tuple[str, dict[str, Any]] | None = None  # the last call's

    def add(self, meter: Meter) -> None:
        self.meters.append(meter)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        nodeid, meters = item.nodeid, self.meters  # a property on pytest 9: read once
        self.measured = None
        for meter in meters:
            meter.begin(nodeid)
        try:
            return (yield)
        finally:
            if len(meters) == 1:  # the CPU wait's alone, in most suites: no merge
                measured = meters[0].end(nodeid)
            else:
                measured = {}
                for meter in reversed(meters):  # the first begun ends last
                    measured.update(meter.end(nodeid))
            self.measured = (nodeid, dict(measured)) if measured else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        measured = self.measured
        if (
            measured is not None
            and measured[0] == report.nodeid
            and report.when == "call"
            and not is_subtest(report)  # its subtests report during the call
        ):
            self.measured = None
            _put(report, measured[1])


class WholeTestDriver:
    """Drives the meters of whole tests: begun as a test starts, ended as its teardown's
    report is made, where a meter that checks its figures (``Checks``) may fail it."""

    def __init__(self) -> None:
        self.meters: list[Meter] = []
        self.checking: list[Checks] = []  # of them, those that check their figures
        self.running: str | None = None

    def add(self, meter: Meter) -> None:
        self.meters.append(meter)
        if isinstance(meter, Checks):
            self.checking.append(meter)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running = nodeid
        for meter in self.meters:
            meter.begin(nodeid)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when != "teardown" or is_subtest(report):
            return report
        if self.running not in (item.nodeid, None):  # None: added during this test
            return report
        measured: dict[str, Any] = {}  # each attempt's teardown, where reruns repeat it
        for meter in reversed(self.meters):
            measured.update(meter.end(item.nodeid))
        _put(report, measured)
        for checker in self.checking:
            checker.check(report, measured)
        return report


def _put(report: pytest.TestReport, measured: dict[str, Any]) -> None:
    if measured:
        setattr(report, MEASURES_ATTR, measured)


DRIVERS: dict[Span, tuple[str, type[CallDriver | WholeTestDriver]]] = {
    "call": ("pytest_accel:call_meters", CallDriver),
    "test": ("pytest_accel:test_meters", WholeTestDriver),
}


def add_meter(config: pytest.Config, meter: Meter) -> None:
    """Drive ``meter`` from now on, registering its span's driver with its first meter:
    a span no meter measures costs no hook."""
    name, kind = DRIVERS[meter.span]
    driver = config.pluginmanager.get_plugin(name)
    if not isinstance(driver, kind):
        driver = kind()
        config.pluginmanager.register(driver, name)
    driver.add(meter)
