"""What accelerator CI covers: per hardware key, which tests pass there, which fail,
which are skipped by pytest-accel's markers (and why) or otherwise; the gate
``--accel-min-coverage`` and the ``pytest-accel coverage`` command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.coverage.options import OPTIONS, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "pytest_accel_wants_timings", "register"]


def pytest_accel_wants_timings(config: pytest.Config) -> bool:
    """With the gate, coverage counts this run's outcomes."""
    return resolve(config) is not None


def register(config: pytest.Config) -> None:
    minimum = resolve(config)
    if minimum is not None:
        from pytest_accel.coverage.plugin import register_feature

        register_feature(config, minimum)
