"""Prices per hardware key: read, checked and matched only here.

A price is USD per device-hour for the hardware keys a glob matches (``tpu/*``,
``cuda/NVIDIA H100*``, ``cpu/x1``).  They come from ``--accel-price KEY=USD`` (or the
ini's lines) and from a prices file, JSON or, on Python 3.11+, TOML::

    {"as_of": "2026-11-01", "prices": {"tpu/*": 1.20, "cpu/*": 0.05}}

The first entry that matches a key wins: the command line's and ini's, then the file's
in its order.  No price is built in: a price list goes stale, and the team that pays
knows its own.
"""

from __future__ import annotations

import fnmatch
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_accel.fields import expect_date
from pytest_accel.files import InputError, parse_json, read_bytes
from pytest_accel.settings import number_value

MAX_PRICE = 1e6  # USD per device-hour: above it, a unit error (cents, a month)
MAX_PRICES_BYTES = 1 << 20


@dataclass(frozen=True)
class Price:
    pattern: str  # a glob over hardware keys
    usd_per_device_hour: float
    source: str  # where it was given: "--accel-price", or the file's path
    as_of: str | None = None  # the date the file says its prices are from


@dataclass(frozen=True)
class PriceTable:
    prices: tuple[Price, ...]

    def price_for(self, key: str) -> Price | None:
        """The first price whose pattern matches ``key`` (case-sensitive, as keys are)."""
        return next((p for p in self.prices if fnmatch.fnmatchcase(key, p.pattern)), None)

    def patterns(self) -> list[str]:
        return [p.pattern for p in self.prices]


def usd(text: Any, where: str, source: str) -> float:
    """A price: a finite, non-negative number of USD per device-hour."""
    if isinstance(text, bool):
        value = math.nan
    elif isinstance(text, (int, float)):
        value = float(text)
    else:  # ASCII digits only: float() also takes "1_000" and fullwidth digits
        found = number_value(str(text).strip().removeprefix("$"))
        value = math.nan if found is None else found
    if not (math.isfinite(value) and 0 <= value <= MAX_PRICE):
        raise InputError(
            source, f"{where}: {str(text)[:40]!r} is not a price in USD per device-hour (e.g. 1.20)"
        )
    return value


def parse_entries(entries: Iterable[str], source: str = "--accel-price") -> list[Price]:
    """``KEY=USD`` entries (the last ``=`` splits: a key may hold one)."""
    prices = []
    for entry in entries:
        pattern, equals, amount = entry.strip().rpartition("=")
        if not equals or not pattern.strip():
            raise InputError(
                source, f"{entry[:60]!r} is not KEY=USD (e.g. --accel-price 'tpu/*=1.20')"
            )
        prices.append(Price(pattern.strip(), usd(amount, pattern.strip(), source), source))
    return prices


def load_prices(path: str | os.PathLike[str]) -> list[Price]:
    """A prices file, JSON or TOML (by its suffix; TOML needs Python 3.11+)."""
    name = os.fspath(path)
    raw = read_bytes(name, MAX_PRICES_BYTES)
    if name.endswith(".toml"):
        try:
            import tomllib  # type: ignore[import-not-found,unused-ignore]
        except ImportError:  # Python 3.10
            raise InputError(
                name, "TOML needs Python 3.11 or newer; give the prices as JSON"
            ) from None
        try:
            data: Any = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise InputError(name, f"is not valid TOML ({str(exc)[:200]})") from None
    else:
        data = parse_json(name, raw)
    if not isinstance(data, dict):
        raise InputError(name, f"expected an object, got {type(data).__name__}")
    table = data.get("prices")
    if not isinstance(table, Mapping) or not table:
        raise InputError(name, "prices: expected an object of KEY: USD per device-hour")
    as_of = data.get("as_of")
    if as_of is not None:
        as_of = expect_date(name, "as_of", as_of)
    for pattern in table:
        if not str(pattern).strip():
            raise InputError(name, "prices: an empty KEY; a key is a glob over hardware keys")
    return [
        Price(str(pattern).strip(), usd(amount, f"prices[{pattern!r}]", name), name, as_of)
        for pattern, amount in table.items()
    ]


def price_table(entries: Iterable[str], path: str | None) -> PriceTable:
    """The run's prices: the entries first, then the file's."""
    prices = parse_entries(entries)
    if path:
        prices += load_prices(path)
    return PriceTable(tuple(prices))
