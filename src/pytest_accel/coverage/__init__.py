"""What accelerator CI covers: per hardware key, which tests pass there, which fail,
which are skipped by pytest-accel's markers (and why) or otherwise; the gate
``--accel-min-coverage`` and the ``pytest-accel coverage`` command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.coverage.options import OPTIONS, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "ask_for_timings", "register"]


def ask_for_timings(config: pytest.Config) -> None:
    """With the gate, the timing feature collects this run's outcomes."""
    if resolve(config) is not None:
        from pytest_accel import session  # pytest's side; the command line tool imports this

        config.stash[session.timings_wanted_key] = True


def register(config: pytest.Config) -> None:
    minimum = resolve(config)
    if minimum is not None:
        from pytest_accel.coverage.plugin import register_feature

        register_feature(config, minimum)
