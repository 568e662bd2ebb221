"""pytest-accel's hooks.

A plugin or ``conftest.py`` adds an accelerator with the first two
(``pytest_accel_platforms``, ``pytest_accel_detect``).  The others are how the features
hand each other what one needs of another (as pytest-xdist's ``newhooks.py`` does):
each is answered by the feature that knows and asked by the one that needs it, neither
importing the other, and a plugin or ``conftest.py`` may answer or ask them too.

Example (a made-up ``spyre`` card)::

    def pytest_accel_platforms():
        return ["spyre"]

    def pytest_accel_detect(context):
        cards = sorted(context.path("/dev").glob("spyre[0-9]*"))
        context.note(f"/dev/spyre*: {len(cards)} card(s)")
        if not cards:
            return None
        return Detection("spyre", len(cards), "Spyre v1", "dev", tuple(context.evidence))
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # types for checking only, as pytest-xdist's newhooks.py has them
    from pytest_accel.flaky.findings import Findings
    from pytest_accel.hardware.detection import Detection, DetectionContext
    from pytest_accel.hardware.platforms import Platform
    from pytest_accel.outcomes import RecordedOutcomes, RunColumns
    from pytest_accel.perf.result import TimingResult
    from pytest_accel.session_end import RunResult
    from pytest_accel.store.history import StoredRuns


@pytest.hookspec
def pytest_accel_platforms() -> Iterable[str | Platform]:  # type: ignore[empty-body]
    """Return platform names this plugin can detect, or rows of the platform table
    (``hardware.platforms.Platform``).

    They become valid for ``--accel``, ``--accel-emulate`` and ``accel(...)``; a row
    with a ``pinning`` gets a device set per pytest-xdist worker (from an installed
    plugin, or one given with ``-p``: a worker pins itself before conftests load).
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_run_columns(session: pytest.Session) -> RunColumns | None:
    """The run's tests as the features that account for runs read them, at the
    session's end; None where no test ran here (an xdist worker).

    The timing feature answers it (building its result's first half); the core's
    session end (``session_end``) asks, only where some feature answers
    ``pytest_accel_run_result``.
    """


@pytest.hookspec
def pytest_accel_run_result(session: pytest.Session, run: RunColumns) -> RunResult | None:
    """Return this feature's typed result for the run (``session_end.RunResult``): its
    gate, its job-summary section and its record section, built once from ``run``.

    The features that account for a run (cost, coverage, selection) answer it; the
    core's session end asks once, in the process that writes the record, then
    summarises and gates the results in a fixed order (``session_end.RESULT_ORDER``).
    A name another result already has is an error.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_finish_timing(
    session: pytest.Session, results: Sequence[RunResult]
) -> bool | None:
    """Finish the timing result with the other features' typed ``results`` (kept on
    it as they are, their record sections encoded once): its alarms and their gate, the
    record, the baseline's update.  Return True.

    The timing feature answers it; the core's session end calls it last.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_detect(context: DetectionContext) -> Detection | None:
    """Return the detected platform, or None to let the next detector look.

    Called in order: the built-in selectors and system probes (``tryfirst``), then
    third-party detectors, then the CPU fallback (``trylast``).  ``context.requested``
    names the platform asked for with ``--accel`` (None for ``auto``); record what you
    checked with ``context.note(...)`` so a missing-device error can list it.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_worker_detection(config: pytest.Config, detection: Detection) -> Detection | None:
    """In a pytest-xdist worker: this worker's own share of the controller's
    ``detection`` (``--accel-pin``), or None when it sees every device.

    Asked once, when the worker's session facts are resolved; the scale-out feature
    answers it in a worker it pinned.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_shard(config: pytest.Config) -> str | None:
    """``"K/N"`` when this session runs one CI shard, else None.

    The scale-out feature answers it under ``--accel-shard``; the timing feature asks at
    session end (the record's ``run.shard``, the run's layout).
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_expected_durations(config: pytest.Config) -> Mapping[str, float] | None:
    """Each test's expected seconds under this session's hardware key, or None when
    nothing is known.

    The timing feature answers it with a ``--perf-baseline`` (read only when asked);
    sharding asks while it plans, after every other deselection.
    """


@pytest.hookspec
def pytest_accel_wants_timings(config: pytest.Config) -> bool:  # type: ignore[empty-body]
    """Return True when this session's timings are needed although the timing
    feature's own options are off.

    The features that read the run's tests (the HTML report, cost, coverage) answer it
    from their options; the timing feature asks while it configures, and collects the
    timings if any says True.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_stored_runs(config: pytest.Config, key: str, count: int) -> StoredRuns | None:
    """The newest ``count`` runs of hardware key ``key`` in the session's store
    (``store.history.StoredRuns``: each object's URL and bytes, oldest first), or None
    (no store, or one that could not be read: the store's own line says so).

    The store feature answers it under ``--accel-store``; the timing feature asks while
    it configures, where no ``--perf-baseline`` is given, and folds them (records, as a
    baseline file of them would be).
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_stored_outcomes(config: pytest.Config) -> Sequence[RecordedOutcomes] | None:
    """The outcomes of the store's runs the timing feature read (``outcomes.RecordedOutcomes``,
    oldest first; the hosts of a multi-host run joined; no interrupted run), or None
    (no store, or it could not be read).

    The timing feature answers it under ``--accel-store``; the flaky feature asks while
    it configures, where no ``--flaky-history`` is given: its history is the store's.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_map_to_fetch(config: pytest.Config) -> str | None:
    """The dependency map this selecting run reads (``--accel-map``), where no file is
    there yet; None otherwise.

    The selection feature answers it; the store feature asks while it configures
    (before the selection reads the map), and fetches the map of the nearest commit the
    store holds to that path.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_changed_code(
    config: pytest.Config, since: str, until: str | None, tests: Sequence[str]
) -> Mapping[str, tuple[str, ...]] | None:
    """The code that changed between the commits ``since`` and ``until`` (None: the
    work tree) that each of ``tests`` runs, as ``path:qualified name``; None where
    nothing can say (no dependency map).

    The selection feature answers it from the map (``--accel-map``) and git; the timing
    feature asks for the tests of its alarms, and names that code beneath each.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_map_written(config: pytest.Config) -> tuple[str, str | None] | None:
    """The dependency map this mapping run wrote and the commit it is of, or None.

    The selection feature answers it once the map is written; the store feature asks
    at the session's end, and keeps the map as that commit's.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_timing_result(config: pytest.Config) -> TimingResult | None:
    """This session's timing result, built once at its end (``perf.result.TimingResult``:
    the run as compared, its comparison, the record's header), or None.

    The timing feature answers it; asked after every feature's session end (from a
    ``pytest_sessionfinish`` wrapper) by the output that shows everything (the HTML
    report), which renders it and computes nothing of its own.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_flaky_findings(config: pytest.Config) -> Findings | None:
    """This session's flaky findings, built once at its end (``flaky.findings.Findings``,
    with the history as updated), or None.  The flaky feature answers it; asked as
    ``pytest_accel_timing_result`` is."""


@pytest.hookspec
def pytest_accel_keep_tests(
    config: pytest.Config, tests: Sequence[str]
) -> Mapping[str, str] | None:
    """Return those of ``tests`` (the collected node ids) that change-aware selection
    must run whatever changed, each with why
    (``{"tests/test_a.py::test_x": "failed in the flaky history"}``), or None.

    The flaky feature answers it from ``--flaky-history`` (tests that failed or were
    flaky in its window, under this hardware key) and ``--flaky-quarantine``;
    selection asks where the suite is collected.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_price(config: pytest.Config) -> float | None:
    """Return USD per device-hour for this session's hardware key, or None.

    The cost feature answers it from ``--accel-price``/``--accel-prices``; selection asks
    to put a dollar figure on what it did not run, and for a budget in dollars.
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_budget_cut(config: pytest.Config) -> Collection[str] | None:
    """Return the tests of ``pytest_accel_left_out`` that selection's budget cut (for
    the nightly bucket), not deselected because their code is unchanged."""


@pytest.hookspec(firstresult=True)
def pytest_accel_left_out(config: pytest.Config) -> Mapping[str, str] | None:
    """Return the tests change-aware selection left out of this session (deselected,
    or cut by its budget), each with why; None when it left none out (off, shadow).

    Selection answers it in the process that owns the session; the timing feature asks
    when it hands the run's tests to the features that account for it
    (``outcomes.RunColumns.left_out``): coverage counts them apart from skips.
    """
