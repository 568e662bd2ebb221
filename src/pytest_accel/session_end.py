"""The session's end, in one fixed order, owned by the core rather than by a feature.

After every feature's own work at the session's end (pytest calls this last), for the
process that owns the session:

1. the timing feature builds its result's first half (the table, the comparison, its
   job-summary rows) and hands over the run's tests as ``RunColumns``
   (``pytest_accel_run_columns``), asked only when some feature accounts for the run;
2. each feature that accounts for a run (cost, coverage, selection) returns its typed
   result for it (``pytest_accel_run_result``: a ``RunResult``);
3. their job-summary sections, then their gates, in ``RESULT_ORDER`` whatever order
   pluggy called them in;
4. the timing feature finishes with their results (``pytest_accel_finish_timing``): its
   alarms and their gate, the record (each result's section encoded once, isolated from
   the others), the baseline.

No feature calls another's session end; each piece is isolated from the others (a
failure is one line and the rest still runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_accel.files import gc_paused
from pytest_accel.reports import fail_session, isolated, job_summary

if TYPE_CHECKING:
    from pytest_accel.github import Section
    from pytest_accel.outcomes import RunColumns

__all__ = ["RESULT_ORDER", "RunResult", "SessionEnd"]

# The order results are summarised and gated in: what a run spent, then what it
# covered, then what it left out.
RESULT_ORDER = ("cost", "coverage", "selection")


class RunResult(Protocol):
    """One feature's result for a run, built once at its end from the run's tests."""

    @property
    def name(self) -> str:
        """The feature (``cost``), and its section's name in the record."""

    def gate(self) -> str | None:
        """Why this result fails the run (``--accel-cost-budget``, ...), or None."""

    def summary_section(self) -> Section | None:
        """Its section of the job summary, or None."""

    def record_section(self) -> Mapping[str, Any] | None:
        """Its section of the record, encoded (None: the record's columns hold it)."""


def _rank(result: RunResult) -> int:
    name = result.name
    return RESULT_ORDER.index(name) if name in RESULT_ORDER else len(RESULT_ORDER)


def run_results(session: pytest.Session) -> list[RunResult]:
    """Each accounting feature's result for this run, in ``RESULT_ORDER``; none where
    no feature accounts for runs or the timing feature has no tests to give."""
    hook = session.config.hook
    if not hook.pytest_accel_run_result.get_hookimpls():
        return []
    run: RunColumns | None = hook.pytest_accel_run_columns(session=session)
    if run is None:
        return []
    answered = hook.pytest_accel_run_result(session=session, run=run)
    return sorted((r for r in answered if r is not None), key=_rank)


def finish(session: pytest.Session) -> None:
    """The pipeline (the module's docstring), each piece isolated."""
    results: list[RunResult] = []
    with isolated(session, "account for the run (cost, coverage)"):
        results = run_results(session)
    summary = job_summary(session.config)
    finished: dict[str, RunResult] = {}
    for result in results:
        with isolated(session, f"finish the {result.name} result"):
            if result.name in finished:
                raise ValueError(f"two features answer for the record section {result.name!r}")
            shown = result.summary_section() if summary is not None else None
            if summary is not None and shown is not None:
                summary.add(shown)
            reason = result.gate()
            if reason is not None:
                fail_session(session, reason)
            finished[result.name] = result
    session.config.hook.pytest_accel_finish_timing(
        session=session, results=tuple(finished.values())
    )


class SessionEnd:
    """Registered in every process; where no timing feature runs (an xdist worker, a
    collection) the hooks it asks have no answer and it does nothing."""

    @pytest.hookimpl(trylast=True)  # after every feature's own session end
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # Also after failures, -x and Ctrl-C. What is built here has no reference cycles.
        with gc_paused():
            finish(session)
