"""What accelerator CI costs: device-seconds and dollars per test, module and run, what
reruns cost, a monthly projection, and a budget (``--accel-price``, ``--accel-prices``,
``--accel-cost-budget``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.cost.options import OPTIONS, file_uses, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "file_uses", "pytest_accel_price", "pytest_accel_wants_timings", "register"]


def pytest_accel_price(config: pytest.Config) -> float | None:
    """USD per device-hour for this session's hardware key, where a price is given."""
    options = resolve(config)
    if not (options.prices or options.prices_file):
        return None
    from pytest_accel.cost.prices import price_table
    from pytest_accel.files import InputError
    from pytest_accel.hardware.facts import session_facts

    try:
        price = price_table(options.prices, options.prices_file).price_for(
            session_facts(config).key
        )
    except InputError:
        return None  # the feature's own registration names the problem
    return None if price is None else price.usd_per_device_hour


def pytest_accel_wants_timings(config: pytest.Config) -> bool:
    """With a price or a budget, cost accounts for this run's tests."""
    return resolve(config).enabled


def register(config: pytest.Config) -> None:
    options = resolve(config)
    if options.enabled:
        from pytest_accel.cost.plugin import register_feature

        register_feature(config, options)
