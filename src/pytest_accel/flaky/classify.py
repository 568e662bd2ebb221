"""Flaky, broken or fine: the cross-run rules over a test's outcome letters, and the
flaky share per platform (docs/flaky.md has the definitions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_accel.flaky.history import FAILED, FLAKY, PASSED, History, KeyOutcomes

# SPEC 6: flaky across runs when 0.05 < failure rate < 0.95 with at least 2 failures
# in at least 10 runs; broken at 0.95 or more (see classify for reruns).
FLAKY_MIN_RATE = 0.05
BROKEN_RATE = 0.95
FLAKY_MIN_FAILURES = 2
FLAKY_MIN_RUNS = 10
# A quarantined test that failed in each of its last this many runs, reruns included,
# is tried once: another attempt would fail too, and costs its whole time again.
SETTLED_FAILURE_RUNS = 3


@dataclass(frozen=True)
class Classification:
    test: str
    runs: int
    failures: int
    flaky_runs: int  # runs that passed only after a rerun
    status: str  # "flaky", "broken" or "ok"

    flip_rate: float = 0.0

    @property
    def failure_rate(self) -> float:
        return self.failures / self.runs if self.runs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "runs": self.runs,
            "failures": self.failures,
            "flaky_runs": self.flaky_runs,
            "failure_rate": round(self.failure_rate, 4),
            "flip_rate": round(self.flip_rate, 4),
        }


def classify(test: str, letters: str) -> Classification:
    """Flaky, broken or ok, from one test's outcomes (docs/flaky.md has the rule).

    SPEC 6's rule on final outcomes, with a run that passed only after a rerun counted
    as a failed first attempt: a test that needs reruns is flaky even though its final
    outcomes never fail, and one lucky rerun in 50 runs is not enough to say so.
    """
    runs = len(letters)
    failures = letters.count(FAILED)
    flaky_runs = letters.count(FLAKY)
    if not failures and not flaky_runs:
        return Classification(test, runs, 0, 0, "ok")
    first_attempt_failures = failures + flaky_runs
    if failures / runs >= BROKEN_RATE:
        status = "broken"
    elif (
        runs >= FLAKY_MIN_RUNS
        and first_attempt_failures >= FLAKY_MIN_FAILURES
        and first_attempt_failures / runs > FLAKY_MIN_RATE
    ):
        status = "flaky"
    else:
        status = "ok"
    # Status changes between runs, and a rerun's fail-then-pass inside one run.
    statuses = letters.replace(FLAKY, PASSED)
    flips = statuses.count(PASSED + FAILED) + statuses.count(FAILED + PASSED) + flaky_runs
    flip_rate = min(1.0, flips / max(runs - 1, 1))
    return Classification(test, runs, failures, flaky_runs, status, flip_rate)


def settled_failures(history: History | None, key: str) -> frozenset[str]:
    """The tests that failed in each of their last ``SETTLED_FAILURE_RUNS`` runs under
    ``key``, every rerun included (``F``; a pass after a rerun is ``K``)."""
    env = history.envs.get(key) if history is not None else None
    if env is None:
        return frozenset()
    settled = FAILED * SETTLED_FAILURE_RUNS
    return frozenset(test for test, letters in env.tests.items() if letters.endswith(settled))


def classify_all(tests: Mapping[str, str]) -> list[Classification]:
    """Flaky and broken tests, flaky ones ranked by flip rate (most unstable first)."""
    found = []
    for test, letters in tests.items():
        if FAILED in letters or FLAKY in letters:
            verdict = classify(test, letters)
            if verdict.status != "ok":
                found.append(verdict)
    found.sort(key=lambda v: (v.status != "flaky", -v.flip_rate, -v.failure_rate, v.test))
    return found


def platform_of_key(key: str, env: KeyOutcomes) -> str:
    return env.platform or key.split("/", 1)[0]


@dataclass(frozen=True)
class Share:
    """The flaky share of one platform's tests."""

    platform: str
    tests: int
    flaky: int

    @property
    def pct(self) -> float:
        return 100.0 * self.flaky / self.tests if self.tests else 0.0


def analysis(history: History) -> dict[str, Any]:
    """The offline report: per key, flaky and broken tests; per platform, the share of
    flaky tests among every test the history knows there: flaky across runs, or flaky
    in the last run (passed only on a rerun), as the plugin counts a run."""
    envs = {}
    tests: dict[str, set[str]] = {}
    flaky: dict[str, set[str]] = {}
    for key, env in sorted(history.envs.items()):
        platform = platform_of_key(key, env)
        found = classify_all(env.tests)
        # What a run's own summary calls flaky: passed only on a rerun, in the last run.
        last_run = sorted(t for t, letters in env.tests.items() if letters.endswith(FLAKY))
        envs[key] = {
            "platform": platform,
            "runs": len(env.runs),
            "tests": len(env.tests),
            "flaky": [v.to_json() for v in found if v.status == "flaky"],
            "broken": [v.to_json() for v in found if v.status == "broken"],
            "flaky_in_last_run": last_run,
            "mass_failure_runs": sum(bool(r.get("mass_failure")) for r in env.runs),
        }
        tests.setdefault(platform, set()).update(t for t, s in env.tests.items() if s)
        flaky.setdefault(platform, set()).update(v.test for v in found if v.status == "flaky")
        flaky[platform].update(last_run)
    shares = {p: Share(p, len(tests[p]), len(flaky[p])) for p in sorted(tests)}
    return {
        "window": history.window,
        "envs": envs,
        "flaky_pct": {p: round(s.pct, 4) for p, s in shares.items()},
    }
