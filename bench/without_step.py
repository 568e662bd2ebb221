"""A plugin that switches one step of a recording run off, for ``bench/instructions.py
--steps``: what a step costs is the count with it less the count without.

    PYTEST_ACCEL_WITHOUT=finish  # nothing at the session's end: no fold, record, output
    PYTEST_ACCEL_WITHOUT=waits   # no CPU-wait clock (as on a kernel without schedstat)
    PYTEST_ACCEL_WITHOUT=        # nothing off: the reference, loaded the same way

Load it before the plugin (``-p bench.without_step -p pytest_accel``), with the
repository on ``PYTHONPATH``.  Its own cost is a module import, the same in every
variant.
"""

from __future__ import annotations

import os

from pytest_accel import session_end
from pytest_accel.perf import waits

STEPS = ("finish", "waits")
_without = os.environ.get("PYTEST_ACCEL_WITHOUT", "")
if _without not in ("", *STEPS):
    raise SystemExit(f"PYTEST_ACCEL_WITHOUT={_without!r}: expected one of {', '.join(STEPS)}")
if _without == "finish":
    session_end.finish = lambda session: None
elif _without == "waits":
    waits.RunQueueClock.open = classmethod(lambda cls: None)  # type: ignore[method-assign,assignment]
