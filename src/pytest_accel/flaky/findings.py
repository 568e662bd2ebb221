"""What a run says about flakiness: pure logic behind the terminal section, the
``--flaky-report`` file, the job summary and ``--flaky-max-pct``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from pytest_accel.flaky.classify import Classification, Share, classify
from pytest_accel.flaky.history import FLAKY, History
from pytest_accel.flaky.quarantine import Entry
from pytest_accel.outcomes import (
    NEW_OUTCOMES_ATTR,
    NEW_RUNS_ATTR,
    phase_outcome,
    test_id,
    test_ids,
)


@dataclass(frozen=True)
class Quarantined:
    test: str
    entry: Entry
    outcome: str
    message: str | None = None
    # Tried once: the history shows it failed every attempt of its last runs.
    not_rerun: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            **self.entry.to_json(),
            "test": self.test,
            "outcome": self.outcome,
            "message": self.message,
            **({"not_rerun": True} if self.not_rerun else {}),
        }


@dataclass(frozen=True)
class Findings:
    """What one run says about flakiness, built once at the session's end
    (``build_findings``): the terminal section, the warnings, the ``--flaky-report``
    file, the job summary, the gate and the HTML report all render it."""

    key: str
    platform: str
    letters: dict[str, str]  # this run: node id -> P, F or K
    flaky: list[tuple[str, list[str]]] = field(default_factory=list)  # (test, attempts)
    failed: list[str] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)
    candidates: list[Quarantined] = field(default_factory=list)  # passed while quarantined
    stale: list[Entry] = field(default_factory=list)
    expired: list[Entry] = field(default_factory=list)
    across_runs: list[Classification] = field(default_factory=list)  # this run's tests, by history
    # Quarantined tests that passed here but are flaky or broken across runs: keep them.
    kept: list[tuple[Quarantined, Classification]] = field(default_factory=list)
    new_tests: dict[str, int] = field(default_factory=dict)  # --flaky-new-runs: test -> runs
    context: dict[str, Classification] = field(default_factory=dict)  # the history's verdicts
    mass_failure: tuple[int, int] | None = None  # (executed, failed) when it tripped
    budget: tuple[int, int, int] | None = None  # (total, used, refused) of --flaky-rerun-budget
    history: History | None = None
    max_pct: float | None = None

    @property
    def share(self) -> Share:
        flaky = {t for t, _ in self.flaky}
        flaky.update(v.test for v in self.across_runs if v.status == "flaky")
        return Share(self.platform, len(self.letters), len(flaky))

    @property
    def over_limit(self) -> bool:
        return self.max_pct is not None and self.share.pct > self.max_pct


@dataclass
class RunOutcomes:
    """Each test's letter for this run, and the outcome of every attempt of the tests
    that did not simply pass."""

    letters: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, list[str]] = field(default_factory=dict)
    new_runs: dict[str, int] = field(default_factory=dict)  # new tests run several times

    @property
    def first_attempt_failures(self) -> int:
        return sum(letter != "P" for letter in self.letters.values())


_NODEID = attrgetter("nodeid")


def outcomes_from_stats(
    stats: Mapping[str, Sequence[Any]], *, new_runs: bool = True
) -> RunOutcomes:
    """From the reports by status category, as pytest's terminal reporter keeps them.

    Only the calls that passed and the reports that did not pass are read: a run of
    10,000 passing tests costs one dict entry per test, not a walk over 30,000 reports.
    ``new_runs`` False: no test was run several times as new (nothing to look for).
    """
    run = RunOutcomes()
    passed = test_ids(list(map(_NODEID, stats.get("passed", ()))))
    letters = run.letters = dict.fromkeys(passed, "P")
    reruns: dict[str, list[Any]] = {}
    for report in stats.get("rerun", ()):
        reruns.setdefault(test_id(report.nodeid), []).append(report)
    for report in stats.get("flaky", ()):
        nodeid = test_id(report.nodeid)
        letters[nodeid] = FLAKY
        run.attempts[nodeid] = ["passed"]
    for category in ("failed", "error", "quarantined"):
        for report in stats.get(category, ()):
            if getattr(report, "when", "collect") == "collect":
                continue  # a collection error, not a test
            nodeid = test_id(report.nodeid)
            if letters.get(nodeid) == "F":
                continue  # a second failing phase (a call failure outranks its teardown's)
            letters[nodeid] = "F"
            run.attempts[nodeid] = [phase_outcome(report.when, "failed", False)]
    for test, earlier in reruns.items():
        earlier.sort(key=lambda r: getattr(r, "start", 0.0) or 0.0)
        failed = [phase_outcome(r.when, "failed", False) for r in earlier]
        run.attempts[test] = failed + run.attempts.get(test, ["passed"])
    for category in ("passed", "flaky", "failed", "error") if new_runs else ():
        for report in stats.get(category, ()):
            times = getattr(report, NEW_RUNS_ATTR, None)
            if times:
                nodeid = test_id(report.nodeid)
                run.new_runs[nodeid] = int(times)
                every = getattr(report, NEW_OUTCOMES_ATTR, None)
                if every:  # every run, the passing repeats too (the logged ones lack them)
                    run.attempts[nodeid] = list(every)
    return run


def build_findings(
    *,
    key: str,
    platform: str,
    run: RunOutcomes,
    quarantined: Mapping[str, Entry],
    messages: Mapping[str, str],
    stale: Sequence[Entry],
    expired: Sequence[Entry],
    history: History | None,
    max_pct: float | None,
    mass_failure: tuple[int, int] | None = None,
    budget: tuple[int, int, int] | None = None,
    not_rerun: frozenset[str] = frozenset(),
) -> Findings:
    letters = run.letters
    flaky: list[tuple[str, list[str]]] = []
    failed: list[str] = []
    quarantined_failures: list[Quarantined] = []
    for test, attempts in run.attempts.items():
        letter = letters.get(test)
        entry = quarantined.get(test)
        if letter == FLAKY:
            flaky.append((test, attempts))
        elif letter == "F" and entry is not None:
            quarantined_failures.append(
                Quarantined(
                    test,
                    entry,
                    attempts[-1],
                    messages.get(test),
                    not_rerun=test in not_rerun and len(attempts) == 1,
                )
            )
        elif letter == "F":
            failed.append(test)
    across = _across_runs(history, key, letters)
    kept: list[tuple[Quarantined, Classification]] = []
    candidates: list[Quarantined] = []
    for test, entry in quarantined.items():
        if letters.get(test) == "P":
            passed = Quarantined(test, entry, "passed")
            if test in across:  # one sentence: it passed here, but not across runs
                kept.append((passed, across.pop(test)))
            else:
                candidates.append(passed)
    # One status per test: a test shown as flaky or quarantined here carries its history
    # in that line; a failed one (pytest shows the failure) gets the across-runs line.
    told = {t for t, _ in flaky} | {q.test for q in quarantined_failures}
    across_runs = sorted(
        (v for t, v in across.items() if t not in told),
        key=lambda v: (v.status != "flaky", -v.flip_rate, -v.failure_rate, v.test),
    )
    return Findings(
        key,
        platform,
        letters,
        flaky=flaky,
        failed=failed,
        quarantined=quarantined_failures,
        candidates=candidates,
        stale=list(stale),
        expired=list(expired),
        across_runs=across_runs,
        kept=kept,
        new_tests=dict(run.new_runs),
        context=dict(across),
        mass_failure=mass_failure,
        budget=budget,
        history=history,
        max_pct=max_pct,
    )


def _across_runs(
    history: History | None, key: str, letters: Mapping[str, str]
) -> dict[str, Classification]:
    """This run's tests that the history calls flaky or broken."""
    env = history.envs.get(key) if history is not None else None
    if env is None:
        return {}
    found = {}
    for test in letters:
        series = env.tests.get(test)
        # One run is what the run section shows; without F or K there is nothing.
        if series and len(series) > 1 and ("F" in series or FLAKY in series):
            verdict = classify(test, series)
            if verdict.status != "ok":
                found[test] = verdict
    return found
