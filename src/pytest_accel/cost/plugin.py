"""The cost feature's hooks: the record's ``cost`` section, the terminal's and the job
summary's, and the budget, in the process that writes the record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_accel.cost.model import (
    PROJECTION_RUNS,
    RunCost,
    Spend,
    account,
    money,
    quantity,
)
from pytest_accel.cost.options import CostOptions
from pytest_accel.cost.prices import Price, price_table
from pytest_accel.files import InputError
from pytest_accel.github import Section, escape_cell
from pytest_accel.hardware.facts import session_facts
from pytest_accel.outcomes import RAN_THROUGH, RunColumns
from pytest_accel.reports import is_xdist_worker, write_section
from pytest_accel.text import Line, Tone

TERMINAL_MODULES = 5


@dataclass(frozen=True)
class CostResult:
    """The run's cost as the session's end reads it (``session_end.RunResult``)."""

    cost: RunCost
    budget: float | None
    unmatched: tuple[str, ...]
    over_budget: bool
    name: str = "cost"

    def gate(self) -> str | None:
        if not self.over_budget or self.budget is None:
            return None
        return (
            f"this run cost {money(self.cost.run.usd)} on {self.cost.key}, over"
            f" --accel-cost-budget {money(self.budget)}"
        )

    def summary_section(self) -> Section:
        return summary_section(self.cost, self.budget, self.unmatched)

    def record_section(self) -> dict[str, Any]:
        return self.cost.to_json()


class CostPlugin:
    def __init__(
        self, options: CostOptions, price: Price | None, unmatched: tuple[str, ...] = ()
    ) -> None:
        self.options = options
        self.price = price
        self.unmatched = unmatched  # the keys prices were given for, none of them this run's
        self.cost: RunCost | None = None
        self.over_budget = False

    def pytest_accel_run_result(self, session: pytest.Session, run: RunColumns) -> CostResult:
        price = self.price
        self.cost = cost = account(
            run,
            None if price is None else price.usd_per_device_hour,
            None if price is None else f"{price.source}: {price.pattern}",
            None if price is None else price.as_of,
        )
        budget = self.options.budget
        ran = session.exitstatus in RAN_THROUGH  # else it failed already, and said why
        self.over_budget = (
            ran and budget is not None and cost.run.usd is not None and cost.run.usd > budget
        )
        return CostResult(cost, budget, self.unmatched, self.over_budget)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.cost is None:
            return
        lines = terminal_lines(self.cost, self.options.budget, self.unmatched)
        write_section(terminalreporter, "pytest-accel cost", lines)


def terminal_lines(
    cost: RunCost, budget: float | None, unmatched: tuple[str, ...] = ()
) -> list[Line]:
    """The run's cost, its reruns' share, the projection, the costliest modules and
    tests, the CPU-tier candidates and the budget's verdict, each with its tone.
    ``unmatched``: the keys prices were given for where none is this run's."""
    if cost.price is not None:
        at = (
            f"at {money(cost.price)} per device-hour ({cost.price_source}"
            + (f", prices as of {cost.as_of}" if cost.as_of else "")
            + ")"
        )
    elif unmatched:  # a price meant for this runner, by a key that is not its own
        given = ", ".join(repr(key) for key in unmatched)
        at = (
            f"(no price given matches this key: given for {given}; a key is a glob over"
            f" hardware keys, e.g. --accel-price '{cost.key.split('/')[0]}/*=USD';"
            " device-seconds only)"
        )
    else:
        at = "(no price for this key: device-seconds only; --accel-price KEY=USD)"
    lines = [
        Line(
            Tone.NOTE,
            f"cost on {cost.key} {at}: this run {money(cost.run.usd)}"
            f" ({quantity(cost.run.device_seconds)} device-seconds: {cost.device_count} device(s)"
            f" for {quantity(cost.run.device_seconds / cost.device_count)} s); its tests"
            f" {money(cost.tests.usd)} ({quantity(cost.tests.device_seconds)} device-seconds),"
            f" reruns {money(cost.reruns.usd)}"
            f"{_share(cost.reruns.device_seconds, cost.tests.device_seconds)}",
        )
    ]
    per_month = cost.per_month_usd
    if per_month is not None and cost.runs_per_month is not None:
        lines.append(
            Line(
                Tone.NOTE,
                f"about {money(per_month)} a month at {cost.runs_per_month:,.1f} run(s) a month"
                " (the baseline's runs of this key)",
            )
        )
    elif cost.price is not None:
        lines.append(Line(Tone.NOTE, projection_pending(cost)))
    costly = list(cost.modules.items())[:TERMINAL_MODULES]
    if costly:
        named = ", ".join(f"{n} {_spent(s)}" for n, s in costly)
        lines.append(Line(Tone.NOTE, f"costliest modules: {named}"))
    if cost.top_tests:
        top = cost.top_tests[:TERMINAL_MODULES]
        named = ", ".join(f"{t} {_spent(s)}" for t, s in top)
        lines.append(Line(Tone.NOTE, f"costliest tests: {named}"))
    if cost.cpu_candidates:
        spent = sum(s.device_seconds for _, s in cost.cpu_candidates)
        usd = None if cost.price is None else spent / 3600 * cost.price
        named = ", ".join(f"{t} {_spent(s)}" for t, s in cost.cpu_candidates[:TERMINAL_MODULES])
        lines.append(
            Line(
                Tone.CHANGE,
                f"CPU-tier candidates: {len(cost.cpu_candidates)} test(s) passed on {cost.key}"
                " and compiled nothing"
                f" ({money(usd) if usd is not None else f'{quantity(spent)} device-s'} a run):"
                f" {named}",
            )
        )
    if budget is not None and cost.run.usd is not None:
        over = cost.run.usd > budget
        verdict = "over budget" if over else "within budget"
        lines.append(
            Line(
                Tone.ALARM if over else Tone.OK,
                f"{verdict}: {money(cost.run.usd)} of --accel-cost-budget {money(budget)}",
            )
        )
    return lines


def projection_pending(cost: RunCost) -> str:
    """Why there is no monthly projection yet, and what it waits for."""
    seen = cost.projection_runs
    if seen <= 1:
        return (
            f"monthly projection: needs {PROJECTION_RUNS} runs of {cost.key} over at least an"
            " hour; keep them with --perf-baseline and --perf-update-baseline"
        )
    return (
        f"monthly projection: needs {PROJECTION_RUNS} runs of {cost.key} over at least an"
        f" hour; the baseline and this run hold {seen} over"
        f" {cost.projection_span_hours * 60:,.0f} minute(s)"
    )


def _spent(spend: Spend) -> str:
    return (
        money(spend.usd) if spend.usd is not None else f"{quantity(spend.device_seconds)} device-s"
    )


def _share(part: float, whole: float) -> str:
    return f" ({100 * part / whole:.1f}% of the tests')" if whole > 0 and part > 0 else ""


def summary_section(
    cost: RunCost, budget: float | None, unmatched: tuple[str, ...] = ()
) -> Section:
    """The job summary's cost: the run, its reruns, the projection, then the costliest
    modules as rows."""
    head = ["### pytest-accel cost", ""]
    lines = terminal_lines(cost, budget, unmatched)[:2]
    head += [escape_cell(line.text) for line in lines] + [""]
    head += ["| module | device-seconds | cost |", "| --- | ---: | ---: |"]
    rows = [
        f"| {escape_cell(name)} | {quantity(spend.device_seconds)} | {money(spend.usd)} |"
        for name, spend in cost.modules.items()
    ]
    return Section(head, rows)


def register_feature(config: pytest.Config, options: CostOptions) -> None:
    if is_xdist_worker(config):
        return  # the process that writes the record accounts for the run
    facts = session_facts(config)
    try:
        table = price_table(options.prices, options.prices_file)
    except InputError as exc:  # names the file, or --accel-price for an entry
        prefix = "--accel-prices: " if exc.path == options.prices_file else ""
        raise pytest.UsageError(f"{prefix}{exc}") from None
    price = table.price_for(facts.key)
    if options.budget is not None and price is None:
        given = ", ".join(table.patterns()) or "none"
        raise pytest.UsageError(
            f"--accel-cost-budget needs a price for the hardware key {facts.key!r}"
            f" (prices given for: {given}); add --accel-price '{facts.key}=USD'"
        )
    unmatched = tuple(table.patterns()) if price is None else ()
    config.pluginmanager.register(CostPlugin(options, price, unmatched), "pytest_accel:cost")
