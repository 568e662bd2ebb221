"""What each feature's reading of a session's reports costs: the flaky feature's
letters (``flaky.findings.outcomes_from_stats``: the passing calls and the reports that
did not pass, by status) against the timing feature's table (``perf.collector``: every
phase of every attempt, in order, with its seconds), on the same session's reports;
and the timing table folded report by report (``add_report`` for every phase, as before
the plain phases were folded in one loop), which must give the same table.

    python bench/suite.py /tmp/suite --tests 10000
    cd /tmp && PYTHONPATH=/path/to/repo PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 \\
        python -m pytest suite -q -p no:cacheprovider -p pytest_accel -p bench.fold_cost

Loaded as a plugin, it reads the reports at the end of the session, folds them each
way 7 times and prints the medians (and writes them, as JSON, to ``$FOLD_COST`` when
set).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_accel.perf.model.table import TimingTable

ROUNDS = 7
_found: dict[str, float] = {}


def _median_seconds(fold: Callable[[], Any], rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fold()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class _ReportByReport(TimingTable):
    """A table that folds every phase through ``add_report``."""

    def add_passed_phases(self, rows: Any, **columns: Any) -> None:
        for index, _ in enumerate(rows):
            columns["other"](index)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    from pytest_accel.flaky.findings import outcomes_from_stats
    from pytest_accel.perf.collector import ResultsCollector
    from pytest_accel.reports import report_stats

    config = session.config
    stats = report_stats(config)

    def table(by_report: bool = False) -> Any:
        collector = ResultsCollector(config)
        collector.stats = stats
        if by_report:
            collector.table = _ReportByReport()
        return collector.session_table()

    if vars(table()) != vars(table(by_report=True)):
        raise AssertionError("the plain phases' loop and add_report made different tables")
    ratios = []  # paired, in turn, as the machine's speed drifts between rounds
    for _ in range(ROUNDS):
        plain, by_report = _median_seconds(table, 1), _median_seconds(lambda: table(True), 1)
        ratios.append(plain / by_report)
    found = {
        "reports": sum(len(group) for group in stats.values()),
        "flaky letters (s)": _median_seconds(lambda: outcomes_from_stats(stats)),
        "timing table (s)": _median_seconds(table),
        "timing table, report by report (s)": _median_seconds(lambda: table(by_report=True)),
        "timing table / report by report (paired)": statistics.median(ratios),
    }
    _found.update(found)
    target = os.environ.get("FOLD_COST")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(found) + "\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _found:
        shown = ", ".join(f"{name}: {value:.4g}" for name, value in _found.items())
        terminalreporter.write_line(f"fold cost (median of {ROUNDS}): {shown}")
