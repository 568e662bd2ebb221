"""Full garbage collections, timed per test.

A full (generation 2) collection walks every object the process holds: with JAX and a
few hundred tests loaded it takes about 0.1 s.  When one runs depends on everything the
process allocated before, so which test pays for it moves whenever anything changes
(another test, a library, this plugin's own data): on chex's suite one such pause made
an unchanged 0.07 s test read 0.17 s, run after run.  The pause is the process's, not
the test's, so it is measured (``gc.callbacks``) and left out of the timing judged.
Collections of the younger generations are short and track what the test allocates:
they stay in.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from time import perf_counter
from typing import Any

import pytest

# The call report attribute that carries the seconds of full collections in the call.
PAUSE_ATTR = "pytest_accel_gc"

_pause_key = pytest.StashKey[float]()


class FullCollections:
    """Seconds spent in full collections, and per test, in its call phase."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = perf_counter()
        elif self._started:
            self.seconds += perf_counter() - self._started
            self._started = 0.0

    def install(self) -> None:
        gc.callbacks.append(self._callback)

    def pytest_unconfigure(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        before = self.seconds
        try:
            return (yield)
        finally:
            item.stash[_pause_key] = self.seconds - before

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "call":
            # A plain float: it crosses pytest-xdist's channel with the report.
            seconds: float = item.stash.get(_pause_key, 0.0)
            setattr(report, PAUSE_ATTR, round(seconds, 6))
        return report


def register(config: pytest.Config) -> None:
    """Time full collections in the process that runs the tests (each xdist worker)."""
    collections = FullCollections()
    collections.install()
    config.pluginmanager.register(collections, "pytest_accel:full_collections")
