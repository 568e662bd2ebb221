"""The report contract the features share: what an outcome is, which attributes our
features attach to pytest's reports, and how a test id is written.

The features never read each other's state: the flaky feature marks a quarantined
failure or a rerun's teardown on the report itself, and the timing feature reads those
marks from the report.  Report attributes are plain values, so pytest-xdist carries
them from a worker to the controller unchanged.  Nothing here needs pytest: the command
line tool reads records with it.  Where a session's reports are read from is
``reports``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# Set on a report by the flaky feature, read by the timing feature:
# the real outcome of a quarantined failure (reported as an expected failure),
QUARANTINED_ATTR = "pytest_accel_quarantined"
# and the teardown time of an attempt that was rerun (its teardown report is not logged).
RERUN_TEARDOWN_ATTR = "pytest_accel_teardown"
# pytest-rerunfailures' field, which our reruns set too: the attempt number (0 = first).
RERUN_ATTR = "rerun"
# On the final reports of a repeated new test (``--flaky-new-runs``): how many times it ran.
NEW_RUNS_ATTR = "pytest_accel_new_runs"
# ... and each run's outcome, in order ("passed" or a failing phase's outcome).
NEW_OUTCOMES_ATTR = "pytest_accel_new_outcomes"
# What a test's meters measured (perf.meters), one plain mapping on its report: on the
# call report, the seconds the call's thread waited for a CPU (``cpu_wait``, perf.waits)
# and spent compiling (``compile_seconds``, perf.compiles); on the teardown report, where
# the suite uses JAX, its ``CompileFigures`` as a list (``compiles``) and, where it
# compiled a function more than once, that function and where it was called from
# (``recompiling``: ``[function, caller, path, line]``, ``Culprit``); where its process
# has a GPU or TPU in use, each device's peak memory during the test
# (``device_memory``: ``[[device, bytes, exact], ...]``, exact 0 for a lower bound).
MEASURES_ATTR = "pytest_accel_measures"


class CompileFigures(NamedTuple):
    """One test's JAX compile activity, as its teardown report carries it
    (``MEASURES_ATTR``'s ``compiles``: a list on the wire, as xdist sends it; ``of``
    reads one back, the five figures of a worker of 0.3 and the seven or eight of 0.4.0
    included)."""

    compilations: int  # backend compilations
    seconds: float  # tracing, lowering and compiling, each instant once
    cache_hits: int  # the persistent compilation cache's
    cache_misses: int
    recompiles: int  # compilations of a function it had compiled already
    trace_seconds: float = 0.0  # of ``seconds``: tracing its Python (the project's speed)
    backend_seconds: float = 0.0  # of ``seconds``: what the persistent cache can save
    # Compilations of the function it compiled most: what a function jitted anew on
    # every call drives up whatever its process compiled before (``perf.compiles``).
    repeats: int = 0
    # Of ``trace_seconds``: what the test's thread waited for a CPU while JAX traced, at
    # most (``perf.compiles``); -1: not measured (no clock, or tracing on another thread).
    trace_wait: float = -1.0

    @classmethod
    def of(cls, value: Sequence[float]) -> CompileFigures:
        figures = [*value[:8], *[0.0] * (8 - len(value[:8]))]
        count, seconds, hits, misses, repeated, trace, backend, most = figures
        waited = value[8] if len(value) > 8 else -1.0
        return cls(
            int(count),
            seconds,
            int(hits),
            int(misses),
            int(repeated),
            trace,
            backend,
            int(most),
            waited,
        )

    def plus(self, other: CompileFigures) -> CompileFigures:
        summed = CompileFigures.of([a + b for a, b in zip(self, other, strict=True)])
        known = self.trace_wait >= 0 and other.trace_wait >= 0
        return summed._replace(trace_wait=summed.trace_wait if known else -1.0)


# pytest.ExitCode.INTERRUPTED, as a record's run.exitstatus says it (no pytest here).
EXIT_INTERRUPTED = 2
# The statuses of a run whose tests all ran (passed or not): what a gate judges.
RAN_THROUGH = (0, 1)


def interrupted(record: Mapping[str, Any]) -> bool:
    """A checked record of a run that was interrupted (Ctrl-C, SIGTERM): it holds a part
    of the suite, so it adds nothing to a baseline or a history."""
    return int(record["run"].get("exitstatus", 0)) == EXIT_INTERRUPTED


def is_subtest(report: object) -> bool:
    """A subtest's report (``unittest``'s ``subTest`` or pytest's ``subtests``
    fixture): a part of its test's call, reported while the call runs."""
    return getattr(report, "context", None) is not None and hasattr(report, "when")


PHASES = ("setup", "call", "teardown")
# A test's final outcome that counts as a failure of the run.
FAILING = frozenset({"failed", "error", "crashed"})
# Outcomes ranked by how bad they are: the worst phase decides an attempt's outcome.
# A failed call outranks the teardown error that may follow it.
OUTCOME_RANK = {
    "passed": 0,
    "skipped": 1,
    "xfailed": 1,
    "xpassed": 1,
    "error": 2,
    "failed": 3,
    "crashed": 4,
    # Running when the run was interrupted (Ctrl-C, SIGTERM): it never finished, so
    # nothing is known of it; never passed, never covered.
    "interrupted": 5,
}
OUTCOMES = frozenset(OUTCOME_RANK)  # what a record may say of a test


def phase_outcome(when: str, outcome: str, wasxfail: bool) -> str:
    """A report's contribution to its test's outcome, as pytest's summary counts it."""
    if when == "???":  # pytest-xdist's report for a test that took its worker down
        return "crashed"
    if outcome in ("failed", "rerun"):  # "rerun": a failed attempt that is tried again
        return "failed" if when == "call" else "error"
    if outcome == "skipped":
        return "xfailed" if wasxfail else "skipped"
    return "xpassed" if wasxfail and when == "call" else "passed"


def test_id(nodeid: str) -> str:
    """A node id as our files and output carry it.

    A file name that is not valid UTF-8 reaches Python with lone surrogates, which no
    JSON, XML or terminal encoder takes; its bytes are written escaped, ``test_\\xff.py``,
    as Python shows them.  Every other id is returned as it is.
    """
    if nodeid.isascii():
        return nodeid
    try:
        nodeid.encode()
    except UnicodeEncodeError:
        return nodeid.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return nodeid


def test_ids(nodeids: list[str]) -> list[str]:
    """``test_id`` of each: the list itself when every id is ASCII (the usual case, one
    pass in C over a session's ids)."""
    return nodeids if all(map(str.isascii, nodeids)) else list(map(test_id, nodeids))


Parents = tuple[str | None, str | None]  # class node id, module node id

# Set on a test's ``user_properties`` by the hardware feature where it skips the test for
# the platform (the reason), so pytest-xdist carries it on the reports and JUnit XML
# shows it; read by the timing feature into the record (``tests.platform_skips``).
PLATFORM_SKIP_PROPERTY = "accel_platform_skip"


@dataclass(frozen=True)
class RecordedOutcomes:
    """One earlier run's tests as the flaky history reads them: each test's final
    outcome and, for those that ran more than once, every attempt's, oldest first
    (the timing feature reads them from a store's records)."""

    started: str
    source: str  # where the run was read: a store object's URL
    key: str
    platform: str | None
    outcomes: Mapping[str, str]
    attempts: Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class RunColumns:
    """One run's tests as the features that account for a run read them (cost,
    coverage): what ``pytest_accel_run_result`` is given, and what a record read
    back gives (``perf.formats.record.run_columns``).  Seconds are each test's final attempt;
    ``earlier`` holds the seconds of attempts that were rerun."""

    key: str
    platform: str
    device_count: int
    workers: int  # xdist workers (0: none)
    wall: float  # the run's wall time, seconds
    ids: Sequence[str]
    outcomes: Sequence[str]
    totals: Sequence[float]
    modules: Sequence[str | None]
    earlier: Mapping[str, float] = field(default_factory=dict)
    quarantined: frozenset[str] = frozenset()
    platform_skips: Mapping[str, str] = field(default_factory=dict)
    started: str | None = None  # this run's start (UTC, as the files write it)
    interrupted: bool = False  # the run was interrupted: a part of the suite, no verdict
    compiles: Mapping[str, int] | None = None  # XLA compilations per test (None: no JAX)
    earlier_starts: Sequence[str] = ()  # earlier runs of this key the baseline holds
    reruns: Mapping[str, int] = field(default_factory=dict)  # attempts before the last
    # Tests change-aware selection left out (deselected or cut by its budget), and why:
    # not run because their code is unchanged, never absent.
    left_out: Mapping[str, str] = field(default_factory=dict)
    cut: frozenset[str] = frozenset()  # of those, the tests its budget cut


# The run's tally in pytest's words and order (``TerminalReporter``'s ``KNOWN_TYPES``,
# then the plugin's own statuses as they come): what the terminal's last line says.
TALLY_ORDER = (
    "failed",
    "passed",
    "skipped",
    "xfailed",
    "xpassed",
    "error",
    "rerun",
    "flaky",
    "quarantined",
    "crashed",
    "interrupted",
)
_PLURALS = {"error": "errors"}


def tally(run: RunColumns) -> dict[str, int]:
    """How many tests of ``run`` ended each way, as the terminal's last line counts them:
    a test that passed after a rerun is ``flaky`` (not passed), a failure a quarantine
    list covered ``quarantined`` (not failed), and each rerun attempt a ``rerun``."""
    counts: dict[str, int] = {}
    for test, outcome in zip(run.ids, run.outcomes, strict=True):
        shown = outcome
        if outcome in FAILING and test in run.quarantined:
            shown = "quarantined"
        elif outcome == "passed" and run.reruns.get(test):
            shown = "flaky"
        counts[shown] = counts.get(shown, 0) + 1
    reruns = sum(run.reruns.values())
    if reruns:
        counts["rerun"] = reruns
    return {name: counts[name] for name in TALLY_ORDER if counts.get(name)}


def tally_words(counts: Mapping[str, int]) -> str:
    """``8 passed, 6 skipped, 2 rerun, 1 flaky, 1 quarantined``."""
    return ", ".join(
        f"{n} {_PLURALS.get(name, name) if n != 1 else name}" for name, n in counts.items()
    )
