"""Which threads run a suite's full garbage collections: a plugin that notes each full
(generation 2) collection of a test process, on the thread that runs the tests or
another, and a summary.

    GC_THREADS_LOG=/tmp/gl PYTHONPATH=/path/to/repo python -m pytest -p bench.gc_threads \\
        -n 2 ...
    python bench/gc_threads.py /tmp/gl

The plugin times only the tests' thread's collections (docs/regressions.md, "Full
garbage collections"): one another thread runs (xdist's channel, a thread a test
started) is left in the test's time.  This says how many such collections a real suite
has, and so how many of its records that choice touches.  Each test process writes
``$GC_THREADS_LOG.<pid>``: a JSON list of [on the tests' thread, seconds].
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

LOG_ENV = "GC_THREADS_LOG"
_collections: list[tuple[bool, float]] = []
_state = {"thread": threading.get_ident(), "started": 0.0}


def _noted(phase: str, info: dict[str, Any]) -> None:
    if info.get("generation") != 2:
        return
    if phase == "start":
        _state["started"] = time.perf_counter()
    elif _state["started"]:
        on_tests_thread = threading.get_ident() == _state["thread"]
        _collections.append((on_tests_thread, time.perf_counter() - _state["started"]))
        _state["started"] = 0.0


def pytest_configure() -> None:
    gc.callbacks.append(_noted)


def pytest_unconfigure() -> None:
    if _noted in gc.callbacks:
        gc.callbacks.remove(_noted)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop() -> None:
    _state["thread"] = threading.get_ident()


def pytest_sessionfinish(session: pytest.Session) -> None:
    prefix = os.environ.get(LOG_ENV)
    workers = getattr(session.config.option, "numprocesses", None)
    if prefix and not workers:  # a process that ran tests (not an xdist controller)
        Path(f"{prefix}.{os.getpid()}").write_text(json.dumps(_collections), encoding="utf-8")


def summary(logs: list[list[list[Any]]]) -> str:
    rows = [row for log in logs for row in log]
    own = [seconds for on_tests_thread, seconds in rows if on_tests_thread]
    other = [seconds for on_tests_thread, seconds in rows if not on_tests_thread]
    return (
        f"{len(logs)} test process(es): {len(own)} full collection(s) on the tests' thread"
        f" ({sum(own):.3f} s), {len(other)} on other threads ({sum(other):.3f} s)"
    )


def main(argv: list[str]) -> int:
    prefix = Path(argv[0])
    logs = sorted(prefix.parent.glob(prefix.name + ".*"))
    print(summary([json.loads(log.read_text(encoding="utf-8")) for log in logs]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
