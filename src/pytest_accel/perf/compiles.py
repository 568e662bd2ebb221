"""How many times each test made XLA compile, where the suite uses JAX.

Nothing here imports jax: once collection is done (the test modules imported what they
use), a suite that imported jax gets a ``jax.monitoring`` listener that counts backend
compilations, and two per-test hooks that say which test they belong to.  A suite
without jax pays nothing per test.  The count rides on the test's last (teardown)
report, so pytest-xdist carries it from a worker; the record keeps it
(``tests.compiles``).  It is the first piece of compile-aware timing: a test that ran on
an accelerator and compiled nothing is a candidate for the CPU tier (docs/cost.md).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from pytest_accel.outcomes import COMPILES_ATTR

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
# Tracing, lowering to MLIR and the backend's compile: a test's compilation seconds.
COMPILE_STEPS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        BACKEND_COMPILE,
    }
)
CACHE_HIT = "/jax/compilation_cache/cache_hits"
CACHE_MISS = "/jax/compilation_cache/cache_misses"
PER_TEST = "pytest_accel:compiles_per_test"


class CompileCounter:
    """Registered wherever tests run, with the timing feature; listens only if the
    suite imported jax.  Per test: ``[compilations, seconds, cache hits, cache misses]``
    (the persistent compilation cache's; 0 and 0 where it is off)."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.tally: list[float] = [0, 0.0, 0, 0]
        self.monitoring: Any = None

    def heard(self, event: str, duration_secs: float, **_: str | int) -> None:
        if self.current is None or event not in COMPILE_STEPS:
            return
        self.tally[1] += duration_secs
        if event == BACKEND_COMPILE:
            self.tally[0] += 1

    def heard_event(self, event: str, **_: str | int) -> None:
        if self.current is not None and event in (CACHE_HIT, CACHE_MISS):
            self.tally[2 if event == CACHE_HIT else 3] += 1

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if "jax" not in sys.modules or self.monitoring is not None:
            return
        try:
            from jax import monitoring
        except Exception:  # a jax too old for monitoring, or broken: count nothing
            return
        monitoring.register_event_duration_secs_listener(self.heard)
        monitoring.register_event_listener(self.heard_event)
        self.monitoring = monitoring
        session.config.pluginmanager.register(_PerTest(self), PER_TEST)

    def pytest_unconfigure(self) -> None:
        if self.monitoring is not None:  # in-process runs (pytester) leave none behind
            self.monitoring.unregister_event_duration_listener(self.heard)
            self.monitoring.unregister_event_listener(self.heard_event)
            self.monitoring = None


class _PerTest:
    def __init__(self, counter: CompileCounter) -> None:
        self.counter = counter

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.counter.current, self.counter.tally = nodeid, [0, 0.0, 0, 0]

    @pytest.hookimpl(tryfirst=True)  # before pytest-xdist sends the report on
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown" and report.nodeid == self.counter.current:
            count, seconds, hits, misses = self.counter.tally
            setattr(report, COMPILES_ATTR, [int(count), round(seconds, 6), int(hits), int(misses)])
