"""What trying a test again needs, for reruns and for a new test's repeats alike: the
outcome a failed attempt is logged with, and forgetting what the attempt left cached."""

from __future__ import annotations

import contextlib

import pytest

from pytest_accel.outcomes import RERUN_ATTR

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
