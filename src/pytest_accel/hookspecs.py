"""Hooks a plugin or ``conftest.py`` implements to add an accelerator.

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

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_accel.hardware.detection import Detection, DetectionContext
    from pytest_accel.outcomes import RunColumns


@pytest.hookspec
def pytest_accel_platforms() -> Iterable[str]:  # type: ignore[empty-body]
    """Return platform names this plugin can detect.

    They become valid for ``--accel``, ``--accel-emulate`` and ``accel(...)``.
    """


@pytest.hookspec
def pytest_accel_record_sections(
    session: pytest.Session, run: RunColumns
) -> Mapping[str, Any] | None:
    """Return top-level sections to add to this run's timing record (``{"cost": ...}``),
    worked out from its tests; called once, at session end, in the process that writes
    the record, also without ``--perf-record`` (the HTML report reads the record).

    The features that account for a run (cost, coverage) implement it; a name another
    section already has is an error.  May set the exit status with a reason
    (``reports.fail_session``).
    """


@pytest.hookspec(firstresult=True)
def pytest_accel_detect(context: DetectionContext) -> Detection | None:
    """Return the detected platform, or None to let the next detector look.

    Called in order: the built-in selectors and system probes (``tryfirst``), then
    third-party detectors, then the CPU fallback (``trylast``).  ``context.requested``
    names the platform asked for with ``--accel`` (None for ``auto``); record what you
    checked with ``context.note(...)`` so a missing-device error can list it.
    """
