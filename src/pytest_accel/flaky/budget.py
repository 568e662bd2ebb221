"""What reruns may still happen in this session: the ``--flaky-rerun-budget`` shared by
every xdist worker, and the ``--flaky-mass-failure`` guard.

The budget lives in a small file in our cache directory, created by the process that
owns the session and named to workers through ``workerinput``; a worker takes one rerun
under the file's lock.  Only failures touch it, so a passing suite never does.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pytest_accel.locking import cache_subdir, exclusive_lock, lock_path

WORKERINPUT_BUDGET = "pytest_accel_rerun_budget"
MASS_FAILURE_MIN_TESTS = 20


class Budget:
    """At most ``total`` reruns; ``used`` and ``refused`` count what was asked."""

    def __init__(self, total: int, path: str | None = None) -> None:
        self.total = total
        self.path = path
        self._used = self._refused = 0

    @classmethod
    def create(cls, total: int) -> Budget:
        """A budget that xdist workers can share: a file in our cache directory."""
        directory = cache_subdir("budgets")
        if directory is None:  # nowhere to share it: this process keeps it alone
            return cls(total)
        handle, path = tempfile.mkstemp(prefix="reruns-", suffix=".json", dir=directory)
        with os.fdopen(handle, "w") as file:
            json.dump({"used": 0, "refused": 0}, file)
        return cls(total, path)

    def take(self) -> bool:
        """One rerun, if any is left."""
        if self.path is None:
            granted = self._used < self.total
            self._used += granted
            self._refused += not granted
            return granted
        with exclusive_lock(self.path):
            counts = self._read()
            granted = counts["used"] < self.total
            counts["used" if granted else "refused"] += 1
            Path(self.path).write_text(json.dumps(counts), encoding="utf-8")
        return granted

    def _read(self) -> dict[str, int]:
        assert self.path is not None
        try:
            counts = json.loads(Path(self.path).read_text(encoding="utf-8"))
            return {"used": int(counts["used"]), "refused": int(counts["refused"])}
        except (OSError, ValueError, KeyError, TypeError):
            return {"used": 0, "refused": 0}

    def counts(self) -> tuple[int, int]:
        """(reruns used, failures refused one) so far, by every worker."""
        if self.path is None:
            return self._used, self._refused
        counts = self._read()
        return counts["used"], counts["refused"]

    def remove(self) -> None:
        if self.path is not None:
            for leftover in (Path(self.path), lock_path(Path(self.path))):
                leftover.unlink(missing_ok=True)


@dataclass
class MassFailure:
    """Counts this process's tests and first-attempt failures: once more than ``pct``
    percent of at least MASS_FAILURE_MIN_TESTS have failed, nothing is rerun."""

    pct: float
    executed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    tripped: bool = False

    def stops_reruns(self, failing: str) -> bool:
        if self.tripped:
            return True
        executed = len(self.executed | {failing})
        failed = len(self.failed | {failing})
        self.tripped = executed >= MASS_FAILURE_MIN_TESTS and 100 * failed / executed > self.pct
        return self.tripped


def is_mass_failure(executed: int, failed: int, pct: float) -> bool:
    """The same rule over a whole run (all workers): what the history marks."""
    return executed >= MASS_FAILURE_MIN_TESTS and 100 * failed / executed > pct
