"""What accelerator CI costs: device-seconds and dollars per test, module and run, what
reruns cost, a monthly projection, and a budget (``--accel-price``, ``--accel-prices``,
``--accel-cost-budget``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.cost.options import OPTIONS, file_uses, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "ask_for_timings", "file_uses", "register"]


def ask_for_timings(config: pytest.Config) -> None:
    """With a price or a budget, the timing feature collects this run's timings."""
    if resolve(config).enabled:
        from pytest_accel import session  # pytest's side; the command line tool imports cost

        config.stash[session.timings_wanted_key] = True


def register(config: pytest.Config) -> None:
    options = resolve(config)
    if options.enabled:
        from pytest_accel.cost.plugin import register_feature

        register_feature(config, options)
