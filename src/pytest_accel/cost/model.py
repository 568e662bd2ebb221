"""A run's cost, from its tests (``outcomes.RunColumns``) and a price: pure arithmetic,
shared by the plugin, the record and the HTML report.

- A run holds ``device_count`` devices for its wall time: ``run`` device-seconds.
- A test holds its share of them while it runs: all of them without xdist, a worker's
  share (``device_count / workers``) with it.  Its device-seconds are its seconds (every
  attempt) times that share; a module's are its tests'.
- What reruns cost is the seconds of the attempts before the last.
- The run costs more than its tests: collection, start-up and idle workers; the record
  keeps both.
- A test that passed on an accelerator key and compiled nothing (where the suite uses
  JAX, ``perf.compiles``) is a candidate for the CPU tier.
- The monthly projection multiplies this run's cost by how often the key ran: the runs
  the baseline holds for it, with this one, over the days they span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pytest_accel.outcomes import RunColumns

DAYS_PER_MONTH = 30.0
MIN_SPAN_DAYS = 1 / 24  # runs within an hour say nothing of how often CI runs
PROJECTION_RUNS = 3  # runs a monthly projection needs, over MIN_SPAN_DAYS at least
TOP = 20  # the most expensive tests the record names


@dataclass(frozen=True)
class Spend:
    device_seconds: float
    usd: float | None  # None: no price for the key

    def to_json(self) -> dict[str, Any]:
        return {
            "device_seconds": round(self.device_seconds, 3),
            "usd": None if self.usd is None else round(self.usd, 6),
        }


@dataclass(frozen=True)
class RunCost:
    key: str
    price: float | None  # USD per device-hour
    price_source: str | None
    as_of: str | None
    device_count: int
    devices_per_test: float
    run: Spend
    tests: Spend
    reruns: Spend
    runs_per_month: float | None
    modules: dict[str, Spend] = field(default_factory=dict)
    top_tests: list[tuple[str, Spend]] = field(default_factory=list)
    # On an accelerator key with JAX in use: the passing tests that compiled nothing
    # (None: not known here), costliest first.
    cpu_candidates: list[tuple[str, Spend]] | None = None
    # The runs the projection was made from (the baseline's of this key and this one)
    # and the hours they span: what it waits for while there is none.
    projection_runs: int = 0
    projection_span_hours: float = 0.0

    @property
    def per_month_usd(self) -> float | None:
        if self.runs_per_month is None or self.run.usd is None:
            return None
        return self.run.usd * self.runs_per_month

    def to_json(self) -> dict[str, Any]:
        """The record's ``cost`` section (docs/format.md)."""
        per_month = self.per_month_usd
        return {
            "currency": "USD",
            "key": self.key,
            "price_per_device_hour": self.price,
            "price_source": self.price_source,
            "price_as_of": self.as_of,
            "device_count": self.device_count,
            "devices_per_test": round(self.devices_per_test, 6),
            "run": self.run.to_json(),
            "tests": self.tests.to_json(),
            "reruns": self.reruns.to_json(),
            "runs_per_month": None
            if self.runs_per_month is None
            else round(self.runs_per_month, 3),
            "per_month_usd": None if per_month is None else round(per_month, 2),
            "modules": {name: spend.to_json() for name, spend in self.modules.items()},
            "top_tests": [{"id": ident, **spend.to_json()} for ident, spend in self.top_tests],
            **(
                {}
                if self.cpu_candidates is None
                else {
                    "cpu_candidates": [
                        {"id": ident, **spend.to_json()} for ident, spend in self.cpu_candidates
                    ]
                }
            ),
        }


# More devices than any run holds: a damaged file, not a machine.
MAX_DEVICES = 1_000_000


def _spend(device_seconds: float, price: float | None) -> Spend:
    return Spend(device_seconds, None if price is None else device_seconds / 3600 * price)


def spend_of_test(seconds: float, cost: RunCost) -> Spend | None:
    """What a test of ``seconds`` (every attempt) cost in the run of ``cost`` (None where
    the run had no price): what the report shows beside each test."""
    if cost.price is None:
        return None
    return _spend(seconds * cost.devices_per_test, cost.price)


def account(
    run: RunColumns,
    price: float | None,
    price_source: str | None = None,
    as_of: str | None = None,
) -> RunCost:
    """What ``run`` cost at ``price`` USD per device-hour (None: device-seconds only)."""
    devices = max(run.device_count, 1)
    share = devices / max(run.workers, 1)
    starts = [*run.earlier_starts, *([run.started] if run.started else [])]
    moments = sorted(_moment(text) for text in starts if text)
    per_test = [
        (ident, (total + run.earlier.get(ident, 0.0)) * share)
        for ident, total in zip(run.ids, run.totals, strict=True)
    ]
    modules: dict[str, float] = {}
    for (_, seconds), module in zip(per_test, run.modules, strict=True):
        name = module or "(no module)"
        modules[name] = modules.get(name, 0.0) + seconds
    ranked = sorted(per_test, key=lambda pair: -pair[1])
    top = ranked[:TOP]
    candidates = None
    if run.compiles is not None and run.platform != "cpu":
        passed = {t for t, o in zip(run.ids, run.outcomes, strict=True) if o == "passed"}
        candidates = [
            (ident, _spend(seconds, price))
            for ident, seconds in ranked
            if ident in passed and run.compiles.get(ident) == 0
        ]
    return RunCost(
        key=run.key,
        price=price,
        price_source=price_source,
        as_of=as_of,
        device_count=devices,
        devices_per_test=share,
        run=_spend(run.wall * devices, price),
        tests=_spend(sum(seconds for _, seconds in per_test), price),
        reruns=_spend(sum(run.earlier.values()) * share, price),
        runs_per_month=runs_per_month(starts),
        modules={
            name: _spend(seconds, price)
            for name, seconds in sorted(modules.items(), key=lambda pair: -pair[1])
        },
        top_tests=[(ident, _spend(seconds, price)) for ident, seconds in top if seconds > 0],
        cpu_candidates=candidates,
        projection_runs=len(moments),
        projection_span_hours=(moments[-1] - moments[0]) / 3600 if moments else 0.0,
    )


def cost_of_section(section: Mapping[str, Any]) -> RunCost:
    """A record's ``cost`` section as the type the run built it from, read leniently (as
    ``merged_section`` reads it): a damaged field reads as nothing (no price, no
    device-seconds, no entries) rather than stopping a report of many records."""
    price = _number(section.get("price_per_device_hour"))

    def spend(part: Any) -> Spend:
        usd = _number(part.get("usd")) if isinstance(part, Mapping) else None
        return Spend(_seconds(part), usd)

    def named(value: Any) -> list[tuple[str, Spend]]:
        return [(str(entry["id"]), spend(entry)) for entry in _entries(value)]

    candidates = section.get("cpu_candidates")
    share = _number(section.get("devices_per_test"))
    source, as_of = section.get("price_source"), section.get("price_as_of")
    return RunCost(
        key=str(section.get("key", "")),
        price=price,
        price_source=source if isinstance(source, str) else None,
        as_of=as_of if isinstance(as_of, str) else None,
        device_count=_count(section.get("device_count")),
        devices_per_test=share or 0.0,
        run=spend(section.get("run")),
        tests=spend(section.get("tests")),
        reruns=spend(section.get("reruns")),
        runs_per_month=_number(section.get("runs_per_month")),
        modules={name: spend(part) for name, part in _mapping(section.get("modules")).items()},
        top_tests=named(section.get("top_tests")),
        cpu_candidates=None if candidates is None else named(candidates),
    )


def merged_section(sections: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The ``cost`` section of merged shards, from theirs (records' ``cost``): each shard
    held its own devices, so device-seconds and dollars add up, and so do the devices;
    the 20 costliest tests and the CPU-tier candidates are taken from all of them.  None
    when the sections cannot be added: a price differs between them."""
    if not sections:
        return None
    costs = [cost_of_section(section) for section in sections]
    prices = {cost.price for cost in costs}
    if len(prices) > 1:
        return None
    price = prices.pop()
    first = costs[0]

    def added(part: str) -> Spend:
        return _spend(sum(getattr(cost, part).device_seconds for cost in costs), price)

    modules: dict[str, float] = {}
    tests: dict[str, float] = {}
    candidates: dict[str, float] | None = None
    for cost in costs:
        for name, spent in cost.modules.items():
            modules[name] = modules.get(name, 0.0) + spent.device_seconds
        tests.update((ident, spent.device_seconds) for ident, spent in cost.top_tests)
        if cost.cpu_candidates is not None:
            candidates = {} if candidates is None else candidates
            candidates.update((ident, spent.device_seconds) for ident, spent in cost.cpu_candidates)
    shares = {_number(section.get("devices_per_test")) for section in sections}
    share = shares.pop() if len(shares) == 1 else None
    merged = RunCost(
        key=first.key,
        price=price,
        price_source=first.price_source,
        as_of=first.as_of,
        device_count=sum(cost.device_count for cost in costs),
        devices_per_test=float(share) if isinstance(share, int | float) else 0.0,
        run=added("run"),
        tests=added("tests"),
        reruns=added("reruns"),
        runs_per_month=first.runs_per_month,
        modules={
            name: _spend(seconds, price)
            for name, seconds in sorted(modules.items(), key=lambda pair: -pair[1])
        },
        top_tests=[
            (ident, _spend(seconds, price))
            for ident, seconds in sorted(tests.items(), key=lambda pair: -pair[1])[:TOP]
        ],
        cpu_candidates=None
        if candidates is None
        else [
            (ident, _spend(seconds, price))
            for ident, seconds in sorted(candidates.items(), key=lambda pair: -pair[1])
        ],
    )
    data = merged.to_json()
    if share is None or not isinstance(share, int | float):
        data["devices_per_test"] = None  # the shards shared their devices differently
    return data


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _seconds(part: Any) -> float:
    """A spend's device-seconds (or a plain number), 0 where a damaged file has none."""
    if isinstance(part, Mapping):
        part = part.get("device_seconds")
    return _number(part) or 0.0


def _count(value: Any) -> int:
    """A device count, 0 where a damaged file has none or an absurd one."""
    number = _number(value)
    return int(number) if number is not None and 0 <= number <= MAX_DEVICES else 0


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _entries(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [entry for entry in value if isinstance(entry, Mapping) and "id" in entry]


def runs_per_month(starts: Sequence[str]) -> float | None:
    """How many runs a month the start times (``2026-11-21T02:00:00Z``) say, or None with
    fewer than three or a span under an hour."""
    moments = sorted(_moment(text) for text in starts if text)
    if len(moments) < PROJECTION_RUNS:
        return None
    span_days = (moments[-1] - moments[0]) / 86400
    if span_days < MIN_SPAN_DAYS:
        return None
    return (len(moments) - 1) / span_days * DAYS_PER_MONTH


def _moment(text: str) -> float:
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    return moment.replace(tzinfo=timezone.utc).timestamp()


def quantity(value: float) -> str:
    """Device-seconds as people read them: ``1,234.5``, ``12.3``, ``0.0481`` (never a
    ``0.0`` for a run that took something)."""
    return f"{value:,.1f}" if value >= 10 else f"{value:.3g}"


def money(usd: float | None) -> str:
    """``$1,234.56``; under a dollar, three significant digits (``$0.0123``,
    ``$0.00000694``: a CPU run's cost is never shown as ``$0.0000``); ``$0`` for nothing."""
    if usd is None:
        return "no price"
    if usd >= 1:
        return f"${usd:,.2f}"
    if usd <= 0:
        return "$0"
    from math import floor, log10

    digits = max(2, 2 - floor(log10(usd)))
    return f"${usd:.{digits}f}"
