"""``--accel-select``: the tests a change needs, decided where the suite is collected
(serially, or in each xdist worker: every worker decides alike from the same inputs),
after every other deselection (markers, ``-m``, ``-k``) and before the shards plan
(``--accel-shard`` plans over what is selected).  Deselected tests go through pytest's
deselection: counted as deselected, never as skipped.

The process that owns the session reports it (terminal, job summary, the record's
``selection`` section) from its own decision or a worker's (``workeroutput``), and in
shadow mode names any test that failed but would have been left out.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.files import InputError
from pytest_accel.hardware.facts import session_facts
from pytest_accel.outcomes import FAILING, RunColumns, test_id
from pytest_accel.reports import (
    is_xdist_worker,
    job_summary,
    report_stats,
    reports_are_relayed,
    write_section,
)
from pytest_accel.selection.changes import map_age_days
from pytest_accel.selection.decide import Decision, within_budget
from pytest_accel.selection.mapfile import MapInfo
from pytest_accel.selection.options import ALWAYS_MARKER, SelectionOptions, check_maps
from pytest_accel.selection.output import RunCounts
from pytest_accel.selection.planning import select_tests
from pytest_accel.selection.section import MapOfRun, Saved, SelectionSection, section_of
from pytest_accel.settings import usage_error
from pytest_accel.text import Line, Tone

WORKEROUTPUT_SELECTION = "pytest_accel_selection"


class Selector:
    """Where the suite is collected: the decision, and the deselection."""

    def __init__(self, config: pytest.Config, options: SelectionOptions) -> None:
        self.config = config
        self.options = options
        self.decision: Decision | None = None
        self.info: MapInfo | None = None

    # A wrapper, deciding once every other implementation (markers, -m, -k) has run;
    # sharding's is an outer wrapper, so it plans over what selection keeps.
    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Generator[None]:
        result = yield
        self._select(config, items)
        return result

    def _select(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        ids = [test_id(item.nodeid) for item in items]
        always = {
            test: "marked accel_always"
            for test, item in zip(ids, items, strict=True)
            if item.get_closest_marker(ALWAYS_MARKER) is not None
        }
        self.decision, self.info = plan(config, self.options, ids, always)
        if self.options.mode == "shadow":
            return  # everything runs; what would not have is reported at the end
        leave = set(self.decision.deselected) | set(self.decision.cut)
        if leave:
            config.hook.pytest_deselected(
                items=[item for t, item in zip(ids, items, strict=True) if t in leave]
            )
            items[:] = [item for t, item in zip(ids, items, strict=True) if t not in leave]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and self.decision is not None:
            section = section_of_decision(self.decision, self.info)
            workeroutput[WORKEROUTPUT_SELECTION] = section.to_json()


def section_of_decision(decision: Decision, info: MapInfo | None) -> SelectionSection:
    """The run's section, as the decision and the map it read make it."""
    return SelectionSection(
        decision.mode,
        decision.kept,
        decision.deselected,
        decision.cut,
        tuple((v.name, v.detail) for v in decision.valves),
        decision.notes,
        None
        if info is None
        else MapOfRun(
            info.commit,
            info.branch,
            info.updated,
            map_age_days(info.updated, datetime.now(timezone.utc)),
        ),
    )


def plan(
    config: pytest.Config, options: SelectionOptions, collected: list[str], marked: dict[str, str]
) -> tuple[Decision, MapInfo | None]:
    """The decision for ``collected`` (node ids), from the map, what changed, the tests
    other features keep and the budget."""
    assert options.map is not None
    always = {**_kept_by_features(config, collected), **marked}
    root = Path(str(config.rootpath)).resolve()
    try:
        found = select_tests(root, options, collected, always)
    except (InputError, sqlite3.DatabaseError) as exc:
        raise usage_error(f"--accel-map: {exc}") from None
    decision = found.decision
    if options.budget is not None and options.mode != "shadow" and found.info is not None:
        decision = _budgeted(
            config, options, decision, always=always, mapped=found.mapped, affected=found.affected
        )
    return decision, found.info


def _kept_by_features(config: pytest.Config, collected: list[str]) -> dict[str, str]:
    """Tests another feature must run whatever changed (``pytest_accel_keep_tests``)."""
    kept: dict[str, str] = {}
    for answer in config.hook.pytest_accel_keep_tests(config=config, tests=collected):
        for test, why in (answer or {}).items():
            kept.setdefault(test, why)
    return kept


def _budgeted(
    config: pytest.Config,
    options: SelectionOptions,
    decision: Decision,
    *,
    always: dict[str, str],
    mapped: set[str],
    affected: Mapping[str, list[str]],
) -> Decision:
    assert options.budget is not None
    seconds = config.hook.pytest_accel_expected_durations(config=config) or {}
    price = config.hook.pytest_accel_price(config=config)
    devices = max(session_facts(config).detection.device_count, 1)
    per_second = None if price is None else price * devices / 3600
    if options.budget.unit == "usd" and per_second is None:
        raise usage_error(
            "--accel-select-budget: an amount in USD needs a price for this hardware key"
            " (--accel-price); give seconds (600s) otherwise"
        )
    protected = set(always) | {t for t in decision.kept if t not in mapped}
    return within_budget(
        decision,
        options.budget,
        seconds=seconds,
        usd_per_second=per_second,
        protected=protected,
        changed_count={t: len(found) for t, found in affected.items()},
    )


@dataclass(frozen=True)
class SelectionResult:
    """What selection did, as the session's end reads it (``session_end.RunResult``):
    its job-summary section is written with the terminal's, which counts what pytest
    skipped and deselected."""

    section: SelectionSection
    name: str = "selection"

    def gate(self) -> None:
        return None

    def summary_section(self) -> None:
        return None

    def record_section(self) -> dict[str, Any]:
        return self.section.to_json()


class SelectionReport:
    """The process that owns the session: what selection did, in every output."""

    def __init__(self, config: pytest.Config, options: SelectionOptions, local: Selector | None):
        self.config = config
        self.options = options
        self.local = local
        self.remote: SelectionSection | None = None  # a worker's
        self.missed: dict[str, str] = {}  # shadow: failed, but would have been left out
        self.nothing_to_run = False  # every test deselected: exit status 0, said so

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        sent = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_SELECTION)
        if sent and self.remote is None:
            self.remote = found = section_of(f"worker {getattr(node, 'gateway', node)}", sent)
            if found.mode != "shadow":
                # The workers deselected them: pytest's last line here counts them too.
                reporter = self.config.pluginmanager.get_plugin("terminalreporter")
                if reporter is not None:
                    left = found.left_out
                    reporter.stats.setdefault("deselected", []).extend(_LeftOut(t) for t in left)

    def pytest_accel_left_out(self) -> dict[str, str] | None:
        found = self.summary()
        if found is None or found.mode == "shadow":
            return None
        return found.left_out

    def pytest_accel_budget_cut(self) -> list[str] | None:
        found = self.summary()
        return None if found is None else list(found.cut)

    def summary(self) -> SelectionSection | None:
        """The run's decision: its own, or a worker's."""
        if self.local is not None and self.local.decision is not None:
            return section_of_decision(self.local.decision, self.local.info)
        return self.remote

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        found = self.summary()
        if found is None:
            return
        if (
            session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
            and found.mode != "shadow"
            and not found.kept
            and found.left_out
        ):
            # Nothing this change can affect: a run that passes, not "no tests" (5).
            session.exitstatus = pytest.ExitCode.OK
            self.nothing_to_run = True
        if found.mode != "shadow":
            return
        stats = report_stats(session.config)
        failed = {
            test_id(r.nodeid)
            for category in ("failed", "error")
            for r in stats.get(category, [])
            if getattr(r, "when", None) in ("setup", "call", "teardown")
        }
        self.missed = {t: found.deselected[t] for t in failed if t in found.deselected}

    def pytest_accel_run_result(
        self, session: pytest.Session, run: RunColumns
    ) -> SelectionResult | None:
        found = self.summary()
        if found is None:
            return None
        failed = tuple(t for t, o in zip(run.ids, run.outcomes, strict=True) if o in FAILING)
        return SelectionResult(replace(found, failed=failed, saved=self.saved(found)))

    def saved(self, found: SelectionSection) -> Saved:
        """The device-seconds (and dollars, with a price) the deselected tests did not
        take, by their expected durations (the baseline's)."""
        seconds = self.config.hook.pytest_accel_expected_durations(config=self.config) or {}
        left_out = [*found.deselected, *found.cut]
        known = [seconds[t] for t in left_out if t in seconds]
        devices = max(session_facts(self.config).detection.device_count, 1)
        device_seconds = sum(known) * devices
        price = self.config.hook.pytest_accel_price(config=self.config)
        usd = None if price is None else round(device_seconds / 3600 * price, 9)
        return Saved(round(device_seconds, 6), usd, len(known))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from pytest_accel.selection.output import terminal_lines

        found = self.summary()
        if found is None:
            return
        counts = _counts(terminalreporter, found)
        lines = terminal_lines(found, self.saved(found), self.missed, counts)
        if self.nothing_to_run:
            why = "no test depends on what changed"
            if found.cut:
                why = "the budget cut every selected test"
            lines.append(
                Line(Tone.OK, f"selection: {why}: exit status 0, not pytest's 5 (no tests ran)")
            )
        write_section(terminalreporter, "pytest-accel selection", lines)
        summary = job_summary(self.config)
        if summary is not None:
            from pytest_accel.selection.output import summary_section

            summary.add(summary_section(found, self.saved(found), self.missed, counts))


class _LeftOut:
    """A test a worker deselected, as the controller's terminal counts it."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def _counts(reporter: pytest.TerminalReporter, found: SelectionSection) -> RunCounts:
    """Of the kept tests, those that were skipped here; and pytest's own deselected
    count (``-k``, ``-m`` and other options' too)."""
    kept = found.kept
    skipped = {
        test_id(report.nodeid)
        for report in reporter.stats.get("skipped", [])
        if test_id(getattr(report, "nodeid", "")) in kept
    }
    return RunCounts(len(skipped), len(reporter.stats.get("deselected", [])))


def register_selection(config: pytest.Config, options: SelectionOptions) -> None:
    check_maps(options)
    local = None
    if not reports_are_relayed(config):  # where the suite is collected: not a controller
        local = Selector(config, options)
        config.pluginmanager.register(local, "pytest_accel:selector")
    if not is_xdist_worker(config):
        config.pluginmanager.register(
            SelectionReport(config, options, local), "pytest_accel:selection_report"
        )
