"""What each feature's reading of a session's reports costs: the flaky feature's
letters (``flaky.findings.outcomes_from_stats``: the passing calls and the reports that
did not pass, by status) against the timing feature's table (``perf.collector``: every
phase of every attempt, in order, with its seconds), on the same session's reports.

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

ROUNDS = 7
_found: dict[str, float] = {}


def _median_seconds(fold: Callable[[], Any]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fold()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    from pytest_accel.flaky.findings import outcomes_from_stats
    from pytest_accel.perf.collector import ResultsCollector
    from pytest_accel.reports import report_stats

    config = session.config
    stats = report_stats(config)

    def table() -> Any:
        collector = ResultsCollector(config)
        collector.stats = stats
        return collector.session_table()

    found = {
        "reports": sum(len(group) for group in stats.values()),
        "flaky letters (s)": _median_seconds(lambda: outcomes_from_stats(stats)),
        "timing table (s)": _median_seconds(table),
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
