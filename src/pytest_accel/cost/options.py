"""The cost feature's options: prices per hardware key and a budget per run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_accel.file_uses import FileUse
from pytest_accel.settings import (
    OptionGroup,
    OptionSpec,
    list_setting,
    parse_positive_float,
    spec_in,
    text_setting,
)

if TYPE_CHECKING:
    import pytest

OPTIONS = OptionGroup(
    "accel-cost",
    "Cost",
    "what accelerator CI costs (pytest-accel)",
    (
        OptionSpec(
            "--accel-price",
            "USD per device-hour for hardware keys matching KEY (a glob such as 'tpu/*';"
            " repeatable; ini: one KEY=USD a line). No price is built in.",
            metavar="KEY=USD",
            repeatable=True,
        ),
        OptionSpec(
            "--accel-prices",
            'Prices from a JSON (or, on Python 3.11+, TOML) file: {"as_of": DATE,'
            ' "prices": {KEY: USD}} (docs/cost.md); --accel-price entries come first.',
            metavar="PATH",
        ),
        OptionSpec(
            "--accel-cost-budget",
            "Exit with status 1 when this run cost more than USD (needs a price for its"
            " hardware key).",
            metavar="USD",
        ),
    ),
)


def option(flag: str) -> OptionSpec:
    return spec_in(OPTIONS.specs, flag)


@dataclass(frozen=True)
class CostOptions:
    prices: tuple[str, ...]  # KEY=USD, as given
    prices_file: str | None
    budget: float | None

    @property
    def enabled(self) -> bool:
        return bool(self.prices or self.prices_file) or self.budget is not None


def file_uses(config: pytest.Config) -> tuple[FileUse, ...]:
    path = text_setting(config, option("--accel-prices"))
    return (FileUse("--accel-prices", path, reads=True),) if path else ()


def resolve(config: pytest.Config) -> CostOptions:
    """The options as given; the prices are parsed (and checked) when the feature
    registers (``prices.price_table``)."""
    budget = text_setting(config, option("--accel-cost-budget"))
    return CostOptions(
        prices=tuple(list_setting(config, option("--accel-price"))),
        prices_file=text_setting(config, option("--accel-prices")),
        # A budget of 0 fails every priced run: not a budget.
        budget=parse_positive_float("--accel-cost-budget", budget) if budget else None,
    )
