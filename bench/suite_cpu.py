"""Where this project's own test suite spends its CPU: a plugin that reads the CPU
seconds of the test process and of the processes it started and waited for, around
each test, and a summary.

    SUITE_CPU_LOG=/tmp/cpu PYTHONPATH=. python -m pytest -W error -n auto \\
        -p bench.suite_cpu -p no:cacheprovider
    python bench/suite_cpu.py /tmp/cpu

The README's test command runs on 2 cores: its wall time is its CPU seconds over about
two, unless the workers sit idle.  Each test process (an xdist worker, or the one
process of a serial run) writes ``$SUITE_CPU_LOG.<pid>`` at its session's end: a JSON
list of [test, start (epoch seconds), wall seconds, own CPU seconds, children's CPU
seconds, CPU seconds of the test process's garbage collections].  A child's CPU
counts once it has been waited for (``getrusage``'s ``RUSAGE_CHILDREN``): a pytest
session a test runs in a subprocess, with the xdist workers that session waited for in
turn.  The collections' seconds are read by a ``gc.callbacks`` entry around each
collection, in any thread of the test process: a part of its own CPU.  The summary
also gives each process's span and how much of it ran tests: a worker idle at the end
(a long test scheduled last) shows there.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

LOG_ENV = "SUITE_CPU_LOG"
_rows: list[tuple[str, float, float, float, float, float]] = []
_collecting = [0.0, 0.0]  # the CPU seconds of every collection so far; the current's start


def _time_collections(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _collecting[1] = time.process_time()
    else:
        _collecting[0] += time.process_time() - _collecting[1]


def pytest_configure(config: pytest.Config) -> None:
    if _time_collections not in gc.callbacks:
        gc.callbacks.append(_time_collections)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    started, own, children = time.time(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    collecting = _collecting[0]
    try:
        return (yield)
    finally:
        _rows.append(
            (
                item.nodeid,
                started,
                time.time() - started,
                _cpu(resource.RUSAGE_SELF) - own,
                _cpu(resource.RUSAGE_CHILDREN) - children,
                _collecting[0] - collecting,
            )
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    prefix = os.environ.get(LOG_ENV)
    if prefix and _rows:  # a process that ran tests (not an xdist controller)
        Path(f"{prefix}.{os.getpid()}").write_text(json.dumps(_rows), encoding="utf-8")


def summary(rows_by_process: list[list[Any]], top: int = 15) -> list[str]:
    """The lines ``main`` prints: totals, each process's span, the costliest tests and
    files."""
    rows = [row for rows in rows_by_process for row in rows]
    if not rows:
        return ["no tests logged"]
    own = sum(row[3] for row in rows)
    children = sum(row[4] for row in rows)
    collecting = sum(row[5] for row in rows if len(row) > 5)  # logs from before: none
    first = min(row[1] for row in rows)
    last = max(row[1] + row[2] for row in rows)
    lines = [
        f"{len(rows)} tests in {len(rows_by_process)} process(es), {last - first:.1f} s from"
        f" the first test's start to the last one's end; CPU {own + children:.1f} s:"
        f" {own:.1f} s in the test processes ({collecting:.1f} s of it collecting"
        f" garbage), {children:.1f} s in their children"
    ]
    for rows_of_one in rows_by_process:
        start = min(row[1] for row in rows_of_one)
        end = max(row[1] + row[2] for row in rows_of_one)
        busy = sum(row[2] for row in rows_of_one)
        cpu = sum(row[3] + row[4] for row in rows_of_one)
        lines.append(
            f"  a process: {len(rows_of_one)} tests from {start - first:.1f} s to"
            f" {end - first:.1f} s, in tests {busy:.1f} s, CPU {cpu:.1f} s"
        )
    cheap = [row for row in rows if row[3] + row[4] < 0.05]
    lines.append(
        f"{len(cheap)} tests under 50 ms of CPU take {sum(r[3] + r[4] for r in cheap):.1f} s"
    )
    lines.append("the tests with the most CPU (own + children):")
    for row in sorted(rows, key=lambda row: -(row[3] + row[4]))[:top]:
        lines.append(f"  {row[3] + row[4]:6.2f} s ({row[3]:.2f} + {row[4]:.2f}) {row[0]}")
    files: dict[str, float] = defaultdict(float)
    for row in rows:
        files[row[0].split("::", 1)[0]] += row[3] + row[4]
    lines.append("the files with the most CPU:")
    for name, cpu in sorted(files.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"  {cpu:6.1f} s {name}")
    return lines


def main(argv: list[str]) -> int:
    prefix = Path(argv[0])
    logs = sorted(prefix.parent.glob(prefix.name + ".*"))
    print("\n".join(summary([json.loads(log.read_text(encoding="utf-8")) for log in logs])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
