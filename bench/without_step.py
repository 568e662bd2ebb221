"""A plugin that switches steps of a recording run off, for ``bench/instructions.py
--steps`` and ``--clock``: what a step costs is the count with it less the count
without.

    PYTEST_ACCEL_WITHOUT=finish        # nothing at the session's end: no fold, record, output
    PYTEST_ACCEL_WITHOUT=waits         # no CPU-wait clock (as on a kernel without schedstat)
    PYTEST_ACCEL_WITHOUT=call-body     # the clock's call wrapper left empty: nothing read
    PYTEST_ACCEL_WITHOUT=put           # no call's figure put on its report (kept or relayed)
    PYTEST_ACCEL_WITHOUT=closing-read  # no call read again at its end (SHORT_CALL unbounded)
    PYTEST_ACCEL_WITHOUT=short-call    # no call too short to be read again (SHORT_CALL 0)
    PYTEST_ACCEL_WITHOUT=gc            # no garbage collection: no full one moves between counts
    PYTEST_ACCEL_WITHOUT=call-body,gc  # several, comma-separated
    PYTEST_ACCEL_WITHOUT=              # nothing off: the reference, loaded the same way

Load it before the plugin (``-p bench.without_step -p pytest_accel``), with the
repository on ``PYTHONPATH``.  Its own cost is a module import, the same in every
variant.
"""

from __future__ import annotations

import gc
import math
import os
from collections.abc import Generator

import pytest

from pytest_accel import session_end
from pytest_accel.perf import meters, waits

STEPS = ("finish", "waits", "call-body", "put", "closing-read", "short-call", "gc")
_without = [step for step in os.environ.get("PYTEST_ACCEL_WITHOUT", "").split(",") if step]
if set(_without) - set(STEPS):
    raise SystemExit(
        f"PYTEST_ACCEL_WITHOUT={','.join(_without)!r}: expected one of {', '.join(STEPS)}"
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def _empty_call_wrapper(
    self: meters.CallDriver, item: pytest.Item
) -> Generator[None, object, object]:
    return (yield)


if "finish" in _without:
    session_end.finish = lambda session: None
if "waits" in _without:
    waits.RunQueueClock.open = classmethod(lambda cls: None)  # type: ignore[method-assign,assignment]
if "call-body" in _without:
    meters.CallDriver.pytest_runtest_call = _empty_call_wrapper  # type: ignore[method-assign]
if "put" in _without:
    meters.CallDriver.take_kept = lambda self: []  # type: ignore[method-assign]
    del meters._CallReports.pytest_runtest_logreport
if "closing-read" in _without:
    waits.SHORT_CALL = math.inf
if "short-call" in _without:  # every call read at its end, as each of a real suite's is
    waits.SHORT_CALL = 0.0
if "gc" in _without:
    gc.disable()
