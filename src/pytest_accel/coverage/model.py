"""Enablement coverage, from a run's tests (``outcomes.RunColumns``): pure, shared by
the gate, the command and the HTML report.

A test is **covered** on a hardware key when it passed there (a flaky test that passed
on a rerun included).  Never covered: a failure (a quarantined one included), an
expected failure (xfailed or xpassed), a skip.  Skips are told apart: by pytest-accel's
markers (the platform, its devices, a missing framework: the record keeps the reason)
or otherwise (``pytest.skip``, ``skipif``).  The percentage is of the tests collected
and selected on that key: deselected tests are out of scope, and those change-aware
selection left out (``--accel-select``) are counted apart, as "deselected by change":
not run, because the code they ran is unchanged since the map; neither skipped nor
absent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_accel.outcomes import FAILING, RunColumns

BUCKETS = (
    "passed",
    "failed",
    "quarantined",
    "xfailed",
    "skipped_platform",
    "skipped_other",
    "interrupted",
    "deselected_change",
    "cut_budget",
)
# Not among the tests of the percentage: selection did not run them.
NOT_RUN = frozenset({"deselected_change", "cut_budget"})
LABELS = {
    "deselected_change": "deselected by change",
    "cut_budget": "cut by the budget",
    "interrupted": "interrupted",
    "passed": "passed",
    "failed": "failed",
    "quarantined": "quarantined",
    "xfailed": "xfailed",
    "skipped_platform": "skipped by pytest-accel markers",
    "skipped_other": "skipped otherwise",
    "absent": "absent",
}


@dataclass(frozen=True)
class Coverage:
    key: str
    started: str | None
    counts: Mapping[str, int]  # per bucket
    platform_reasons: Mapping[str, int] = field(default_factory=dict)  # reason -> tests
    states: Mapping[str, str] = field(default_factory=dict)  # test -> bucket
    # The run was interrupted: its tests are a part of the suite, and the test that was
    # running never finished.  No gate passes on it.
    interrupted: bool = False

    @property
    def tests(self) -> int:
        return sum(n for bucket, n in self.counts.items() if bucket not in NOT_RUN)

    @property
    def covered(self) -> int:
        return self.counts.get("passed", 0)

    @property
    def pct(self) -> float:
        return 100 * self.covered / self.tests if self.tests else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "started": self.started,
            "tests": self.tests,
            **{bucket: self.counts.get(bucket, 0) for bucket in BUCKETS},
            "covered_pct": round(self.pct, 2),
            "platform_reasons": dict(self.platform_reasons),
            "interrupted": self.interrupted,
        }

    def below(self, minimum: float) -> bool:
        """Whether a gate of ``minimum`` percent fails it: an interrupted run's never
        passes, whatever share of its tests passed."""
        return self.interrupted or self.pct < minimum


def bucket_of(outcome: str, test: str, run: RunColumns) -> str:
    if outcome in ("passed", "interrupted"):
        return outcome
    if outcome in FAILING:
        return "quarantined" if test in run.quarantined else "failed"
    if outcome in ("xfailed", "xpassed"):
        return "xfailed"
    return "skipped_platform" if test in run.platform_skips else "skipped_other"


def coverage_of(run: RunColumns) -> Coverage:
    states = {
        test: bucket_of(outcome, test, run)
        for test, outcome in zip(run.ids, run.outcomes, strict=True)
    }
    for test in run.left_out:
        states.setdefault(test, "cut_budget" if test in run.cut else "deselected_change")
    reasons = Counter(run.platform_skips[t] for t, b in states.items() if b == "skipped_platform")
    return Coverage(
        run.key, run.started, Counter(states.values()), dict(reasons), states, run.interrupted
    )


@dataclass(frozen=True)
class Gap:
    """Tests that pass on ``covered_on`` but not on ``missing_on``, by what they are there."""

    covered_on: str
    missing_on: str
    tests: Mapping[str, list[str]]  # bucket there ("absent" included) -> tests

    @property
    def count(self) -> int:
        return sum(len(tests) for tests in self.tests.values())


def gaps(latest: Mapping[str, Coverage]) -> list[Gap]:
    """For every ordered pair of keys, the tests that pass on the first and are absent,
    skipped, failing or expected to fail on the second; largest first."""
    found = []
    for key_a, first in sorted(latest.items()):
        passing = [t for t, b in first.states.items() if b == "passed"]
        for key_b, second in sorted(latest.items()):
            if key_a == key_b:
                continue
            there: dict[str, list[str]] = {}
            for test in passing:
                state = second.states.get(test, "absent")
                if state != "passed":
                    there.setdefault(state, []).append(test)
            if there:
                found.append(Gap(key_a, key_b, there))
    return sorted(found, key=lambda gap: (-gap.count, gap.covered_on, gap.missing_on))


def by_key(coverages: Iterable[Coverage]) -> dict[str, list[Coverage]]:
    """Each key's runs, oldest first: the last is the key's current coverage and the
    list its enablement trend."""
    keyed: dict[str, list[Coverage]] = {}
    for coverage in coverages:
        keyed.setdefault(coverage.key, []).append(coverage)
    for runs in keyed.values():
        runs.sort(key=lambda c: c.started or "")
    return dict(sorted(keyed.items()))


def describe(coverage: Coverage, top_reasons: int = 3) -> str:
    """``8 of 16 test(s) pass on cpu/x8 (50.00%); 1 failed, ...``: one line."""
    counts = coverage.counts
    parts = [
        f"{counts.get('failed', 0)} failed",
        f"{counts.get('quarantined', 0)} quarantined",
        f"{counts.get('xfailed', 0)} xfailed",
        f"{counts.get('skipped_platform', 0)} skipped by pytest-accel markers",
        f"{counts.get('skipped_other', 0)} skipped otherwise",
    ]
    if counts.get("interrupted"):
        parts.append(f"{counts['interrupted']} interrupted")
    if counts.get("deselected_change"):
        parts.append(f"{counts['deselected_change']} deselected by change (not counted)")
    if counts.get("cut_budget"):
        parts.append(f"{counts['cut_budget']} cut by the budget (not counted)")
    reasons = sorted(coverage.platform_reasons.items(), key=lambda pair: (-pair[1], pair[0]))
    why = "; ".join(f"{n}x {reason}" for reason, n in reasons[:top_reasons])
    partial = (
        "; an interrupted run: a part of the suite, never a coverage to pass a gate on"
        if coverage.interrupted
        else ""
    )
    return (
        f"{coverage.covered} of {coverage.tests} test(s) pass on {coverage.key}"
        f" ({coverage.pct:.2f}%); {', '.join(parts)}" + (f" ({why})" if why else "") + partial
    )


def trend_line(runs: Sequence[Coverage]) -> str:
    """``42.0% -> 48.5% -> 51.2% over 3 runs``."""
    return " -> ".join(f"{c.pct:.1f}%" for c in runs) + f" over {len(runs)} run(s)"
