"""What trying a test again needs, for reruns and for a new test's repeats alike: the
outcome a failed attempt is logged with, forgetting what the attempt left cached, and
a call whose subtests are held until it is known which attempt they belong to."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from _pytest.runner import call_and_report
from pluggy import HookImpl

from pytest_accel.outcomes import RERUN_ATTR, is_subtest

RERUN = RERUN_ATTR  # a failed attempt that is tried again: pytest-rerunfailures' word too


def forget_failures(item: pytest.Item) -> None:
    """Drop cached fixture failures (they would be re-raised) and the old test instance."""
    info = getattr(item, "_fixtureinfo", None)
    for definitions in getattr(info, "name2fixturedefs", {}).values():
        for definition in definitions:
            cached = getattr(definition, "cached_result", None)
            if cached is not None and cached[2] is not None:
                # Finished as at the end of its scope, so the next attempt runs it again.
                with contextlib.suppress(Exception):
                    definition.finish(getattr(item, "_request", None))
    if isinstance(item, pytest.Function) and isinstance(item.parent, pytest.Class):
        # A fresh instance of the test class, as pytest gives every test.
        for cached_attribute in ("_instance", "_obj"):
            item.__dict__.pop(cached_attribute, None)


def call_holding_subtests(item: pytest.Item) -> tuple[pytest.TestReport, HeldSubtests]:
    """Run the test's call, its subtests' reports held back (``HeldSubtests``).  A call
    that passed with a failed subtest failed, as pytest shows it (``contains 1 failed
    subtest``): so it reads to whatever decides on another attempt, and is counted so."""
    with HeldSubtests.during(item) as held:
        report = call_and_report(item, "call", log=False)
    failed = len(held.failures())
    if report.passed and failed:
        report.outcome = "failed"
        report.longrepr = f"contains {failed} failed subtest{'s' if failed > 1 else ''}"
    return report, held


class HeldSubtests:
    """The subtest reports a test's call logs (pytest 9's ``subtests`` fixture,
    ``unittest``'s ``subTest``), held back until it is known whether the attempt is
    tried again: they are logged while the call runs, before anything can decide, and a
    superseded attempt's must reach no output and no xdist controller.

    They are taken where pluggy runs every hook (``PluginManager._inner_hookexec``, the
    seam its own ``add_hookcall_monitoring`` wraps), which a conftest's subset hook
    caller goes through too.  Held on pytest 9 and later, whose built-in subtests count
    each test's failed subtests (``failed_subtests_key``): a superseded attempt's are
    taken off that count, which would fail the next attempt.  Before pytest 9 nothing
    is held."""

    def __init__(self, item: pytest.Item, counts: dict[Any, int] | None) -> None:
        self.item = item
        self.counts = counts  # pytest's failed subtests per test; None: nothing held
        self.reports: list[pytest.TestReport] = []

    @classmethod
    @contextlib.contextmanager
    def during(cls, item: pytest.Item) -> Iterator[HeldSubtests]:
        counts = _failed_subtest_counts(item.config)
        manager = item.config.pluginmanager
        inner = getattr(manager, "_inner_hookexec", None)
        if counts is None or inner is None:
            yield cls(item, None)
            return
        held = cls(item, counts)

        def holding(
            hook_name: str,
            hook_impls: Sequence[HookImpl],
            caller_kwargs: Mapping[str, object],
            firstresult: bool,
        ) -> object:
            report = caller_kwargs.get("report")
            if (
                hook_name == "pytest_runtest_logreport"
                and isinstance(report, pytest.TestReport)
                and is_subtest(report)
            ):
                held.reports.append(report)
                return []  # what a hook without firstresult returns: no results
            return inner(hook_name, hook_impls, caller_kwargs, firstresult)

        manager._inner_hookexec = holding
        try:
            yield held
        finally:
            manager._inner_hookexec = inner

    def failures(self) -> list[pytest.TestReport]:
        return [report for report in self.reports if report.failed]

    def first_failure(self) -> pytest.TestReport | None:
        failures = self.failures()
        return failures[0] if failures else None

    def supersede(self, call: pytest.TestReport) -> None:
        """The attempt is tried again: its subtests are dropped, and so are their
        failures from pytest's count; its call says what failed (the first subtest's
        failure, where a subtest failed)."""
        failures = self.failures()
        if failures:
            call.longrepr = failures[0].longrepr
            key = getattr(self.item, "id", self.item.nodeid)  # pytest 9's structured id
            if self.counts is not None:
                self.counts[key] = max(self.counts.get(key, 0) - len(failures), 0)
        self.reports.clear()

    def log_all(self, log: Callable[..., object]) -> None:
        for report in self.reports:
            log(report=report)
        self.reports.clear()


def _failed_subtest_counts(config: pytest.Config) -> dict[Any, int] | None:
    key = _failed_subtests_key()
    counts: dict[Any, int] | None = None if key is None else config.stash.get(key, None)
    return counts


@functools.cache  # looked up once: every attempt's call asks
def _failed_subtests_key() -> Any:
    try:
        from _pytest.subtests import failed_subtests_key  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # before pytest 9: no built-in subtests
        return None
    return failed_subtests_key
