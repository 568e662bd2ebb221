"""Per-test meters: one protocol, one driver, one report attribute.

A meter measures each test while it runs: the CPU its call waited for
(``perf.waits``), the compilation it ran (``perf.compiles``), its peak device memory
(``perf.device_memory``).  Each measures one span:

- ``"call"``: inside the window pytest times the call in (``pytest_runtest_call``),
  so that nothing outside it, a report shown or made, is taken from a call that never
  paid it; each attempt of a rerun call is one span;
- ``"test"``: from the test's start (its ``pytest_runtest_protocol``, before
  anything of it is logged) to its teardown's report.

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
from time import time as wall_clock  # pytest's clock of reports, as pytest binds it
from typing import Any, Literal, Protocol, runtime_checkable

import pytest

from pytest_accel.outcomes import MEASURES_ATTR, is_subtest

Span = Literal["call", "test"]


class Meter(Protocol):
    """Measures one span of each test (``begin`` and ``end`` are given the test's item,
    which a meter reads no more of than it needs); ``end`` returns its figures for the
    report (plain values, keyed as ``outcomes.MEASURES_ATTR`` says), empty where it has
    none: a meter added while a test runs is ended without being begun for it.  The
    mapping is the driver's from then on (kept or put on the report, never copied): a
    new one each time.
    ``read_at_end``: nothing reads its figures before the session's end (the record),
    so a call's may wait in the process till then (``CallDriver``); a meter whose
    figures a conftest or a plugin may read as the report is logged says False."""

    span: Span
    read_at_end: bool

    def begin(self, item: pytest.Item) -> None: ...

    def end(self, item: pytest.Item) -> Mapping[str, Any]: ...


@runtime_checkable
class Checks(Protocol):
    """A meter whose figures can fail the test (a peak over ``--accel-max-device-memory``):
    ``check`` may set the report's outcome after its figures are on it."""

    def check(self, report: pytest.TestReport, measured: Mapping[str, Any]) -> None: ...


# A call's figures kept in the process that folds them: its test's node id, a moment in
# the call on the clock its report's start and stop are read on, the figures.
Kept = list[tuple[str, float, Mapping[str, Any]]]


class CallDriver:
    """Drives the meters of tests' calls: begun and ended inside the window pytest times
    the call in.  Their figures go on the call report as it is logged, before anything
    else reads it (pytest-xdist sends it on), in a worker and once a meter whose figures
    may be read then measures here (``relaying``).  Otherwise, in the process that
    folds the reports itself, with meters ``read_at_end`` alone (the CPU wait's), they
    are kept here (``kept``, in the order the calls ended) for the session's end, which
    spares a hook call per report: the timing feature's collector folds them, each on
    the call report whose start and stop hold its moment (a rerun's attempts each have
    theirs)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.meters: list[Meter] = []
        self.relaying = False
        self.measured: tuple[str, Mapping[str, Any]] | None = None  # the last call's, relayed
        self.kept: Kept = []
        if hasattr(config, "workerinput"):
            self.relay()

    def add(self, meter: Meter) -> None:
        self.meters.append(meter)
        if not meter.read_at_end:
            self.relay()

    def relay(self) -> None:
        """Put each call's figures on its report as it is logged, from now on."""
        if not self.relaying:
            self.relaying = True
            self.config.pluginmanager.register(_CallReports(self), "pytest_accel:call_reports")

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        meters = self.meters
        if self.measured is not None:
            self.measured = None  # a call that was never reported (interrupted)
        for meter in meters:
            meter.begin(item)
        try:
            return (yield)
        finally:
            if len(meters) == 1:  # the CPU wait's alone, in most suites: no merge
                measured = meters[0].end(item)
            else:
                measured = {}
                for meter in reversed(meters):  # the first begun ends last
                    measured.update(meter.end(item))
            # The node id (a property on pytest 9) only for a call with figures: most
            # calls of a suite of small tests have none.
            if measured and self.relaying:
                self.measured = (item.nodeid, measured)
            elif measured:  # before pytest reads the call's stop: within its start and stop
                self.kept.append((item.nodeid, wall_clock(), measured))

    def take_kept(self) -> Kept:
        """The figures kept so far, given up: the session's end folds them."""
        kept, self.kept = self.kept, []
        return kept


class _CallReports:
    """The hook that puts each call's figures on its report as it is logged."""

    def __init__(self, driver: CallDriver) -> None:
        self.driver = driver

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        driver = self.driver
        measured = driver.measured
        if (
            measured is not None
            and measured[0] == report.nodeid
            and report.when == "call"
            and not is_subtest(report)  # its subtests report during the call
        ):
            driver.measured = None
            _put(report, measured[1])


class WholeTestDriver:
    """Drives the meters of whole tests: begun as a test's protocol starts (around
    whichever plugin runs it, reruns included, before its start is logged), ended as its
    teardown's report is made, where a meter that checks its figures (``Checks``) may
    fail it; a rerun's attempts end it again, each with its teardown."""

    def __init__(self) -> None:
        self.meters: list[Meter] = []
        self.checking: list[Checks] = []  # of them, those that check their figures
        self.running: pytest.Item | None = None

    def add(self, meter: Meter) -> None:
        self.meters.append(meter)
        if isinstance(meter, Checks):
            self.checking.append(meter)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        self.running = item
        for meter in self.meters:
            meter.begin(item)
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when != "teardown" or is_subtest(report):
            return report
        if self.running is not item and self.running is not None:  # None: added during it
            return report
        measured: dict[str, Any] = {}  # each attempt's teardown, where reruns repeat it
        for meter in reversed(self.meters):
            measured.update(meter.end(item))
        _put(report, measured)
        for checker in self.checking:
            checker.check(report, measured)
        return report


def _put(report: pytest.TestReport, measured: Mapping[str, Any]) -> None:
    if measured:
        setattr(report, MEASURES_ATTR, measured)


def put_kept(report: pytest.TestReport, measured: Mapping[str, Any]) -> None:
    """A kept call's figures on its report, under those already there (a conftest's)."""
    already = getattr(report, MEASURES_ATTR, None)
    _put(report, {**measured, **already} if already else measured)


DRIVERS: dict[Span, str] = {
    "call": "pytest_accel:call_meters",
    "test": "pytest_accel:test_meters",
}


def add_meter(config: pytest.Config, meter: Meter) -> None:
    """Drive ``meter`` from now on, registering its span's driver with its first meter:
    a span no meter measures costs no hook."""
    name = DRIVERS[meter.span]
    driver = config.pluginmanager.get_plugin(name)
    if driver is None:
        driver = CallDriver(config) if meter.span == "call" else WholeTestDriver()
        config.pluginmanager.register(driver, name)
    driver.add(meter)


def call_driver(config: pytest.Config) -> CallDriver | None:
    """This process's call driver, where a meter of calls was ever added."""
    driver = config.pluginmanager.get_plugin(DRIVERS["call"])
    return driver if isinstance(driver, CallDriver) else None
